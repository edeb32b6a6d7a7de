"""`vigil demo` end to end, as `make demo` runs it: every part started for real, every part stopped after.

The demo runs once per test session (conftest's ``vigil_demo``); each test reads its own part of the output or of
the store it left."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from vigil.worker.demo import demo_turns
from vigil.worker.store import connect


def test_the_demo_scores_every_sampled_turn_reports_from_clickhouse_raises_the_regression_and_cleans_up(vigil_demo):
    out, env, home = vigil_demo.output, vigil_demo.env, vigil_demo.home

    assert "offline BASELINE judge" in out, "the demo says which judge it used"
    assert re.search(r"scored every sampled turn of 264 in", out)
    progress = re.findall(r"(\d+) of (\d+) scored", out)
    assert progress and progress[-1][0] == progress[-1][1] and int(progress[-1][1]) > 264, "progress counts scores"
    for monitor in ("answer_relevancy", "context_relevance", "prompt_alignment", "rag_correctness", "multi_turn"):
        assert f"monitor {monitor} ({monitor} v2)" in out, f"{monitor} missing from the report"
    assert "Baseline judge (word overlap, no LLM): score" in out, "reasons are read back"
    said = re.compile(r"answer_relevancy on support-bot fell from 0\.\d\d to 0\.\d\d since (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC \(95%: "
                      r"0\.\d\d to 0\.\d\d lower\); all of the drop is model = llama-3\.2-3b-instruct \(\d+% of traffic\)")
    flat = " ".join(out.split())  # rich wraps the terminal's lines
    assert said.search(flat), "the alert is one sentence naming the agent and the model the regression came from"
    assert "CUSUM" not in flat and "recovery test" not in flat, "detector words only under --explain"
    html = (home / "report.html").read_text(encoding="utf-8")
    assert said.search(html), "the HTML says the same sentence"
    assert "vigil report" in out.split("next")[-1] and "vigil show TRACE_ID" in out, "the demo says what to try next"
    assert "vigil compare --by model llama-3.1-8b-instruct llama-3.2-3b-instruct" in flat  # test_compare runs it

    # Afterwards, `vigil report` in the same VIGIL_HOME finds the demo's store: its scores and its alerts.
    after = subprocess.run([sys.executable, "-m", "vigil.worker", "report", "--json"], env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    assert after.returncode == 0, after.stderr
    report = json.loads(after.stdout)
    scored = {m["monitor"]: m["scored"] for m in report["monitors"]}
    assert set(scored) >= {"answer_relevancy", "context_relevance", "prompt_alignment", "rag_correctness"}
    assert all(n > 0 for n in scored.values())
    assert any(a["rule"] == "support-relevancy-regression" and a["state"] == "firing" for a in report["alerts"])

    redis_pid = int(re.search(r"pid\s+(\d+)", out).group(1))
    worker_pid = int(re.search(r"`vigil worker` pid (\d+)", out).group(1))
    intake_pid = int(re.search(r"`vigil intake` pid (\d+)", out).group(1))
    for pid in (redis_pid, worker_pid, intake_pid):
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower(), \
            f"process {pid} outlived the demo"


def test_the_support_bot_comes_over_otlp_and_its_turns_are_scored_with_the_retrievers_documents(vigil_demo):
    out, home = vigil_demo.output, vigil_demo.home
    assert "over OTLP: support-bot sent 150 traces" in out, "the demo says which agents came over OTLP"
    assert "through the SDK hook: code-helper, travel-assistant sent 114 turns" in out

    store = connect(f"chdb://{(home / 'chdb').resolve()}")
    try:
        rows = store.query("SELECT agent, metadata['source'], metadata['spans'], contexts_json, trace_id "
                           "FROM traces FINAL").result_rows
        scored = dict(store.query(
            "SELECT monitor, uniqExact(trace_id) FROM scores FINAL WHERE agent = 'support-bot' AND status = 'scored' "
            "GROUP BY monitor").result_rows)
    finally:
        store.close()
    sources = {(agent, source) for agent, source, *_ in rows}
    assert sources == {("support-bot", "otlp"), ("travel-assistant", ""), ("code-helper", "")}
    support = [row for row in rows if row[0] == "support-bot"]
    assert len(support) == 150, "one turn per agent trace, however many spans it had"
    tools = {trace_id: len(t.get("tool_calls", [])) for t in demo_turns() for trace_id in [t["trace_id"]]}
    assert all(int(spans) == 4 + tools[trace_id] for _, _, spans, _, trace_id in support), \
        "root, planning call, retriever, one span per tool call, answering call"
    with_contexts = [json.loads(contexts) for *_, contexts, _ in support if json.loads(contexts)]
    assert len(with_contexts) == 150, "every support-bot turn carries the retriever's documents"
    assert all(doc["id"].startswith("kb-") and doc["text"] for docs in with_contexts for doc in docs)
    assert scored["context_relevance"] == 150, "context relevance judged every OTLP turn's retrieved documents"
    assert scored["rag_correctness"] > 0 and scored["answer_relevancy"] > 0


def test_the_support_bots_own_rubric_json_check_and_refund_policy_score_its_otlp_turns(vigil_demo):
    home = vigil_demo.home
    store = connect(f"chdb://{(home / 'chdb').resolve()}")
    try:
        got = store.query("SELECT monitor, status, label, count() FROM scores FINAL WHERE agent = 'support-bot' "
                          "AND monitor IN ('cites_sources', 'refund_calls', 'refund_policy') "
                          "GROUP BY monitor, status, label").result_rows
        broken = store.query("SELECT reason FROM scores FINAL WHERE monitor = 'refund_policy' AND label = 'fail'"
                             ).result_rows
    finally:
        store.close()
    counts = {(monitor, status, label): n for monitor, status, label, n in got}
    assert counts[("refund_policy", "scored", "fail")] > 0 and counts[("refund_calls", "scored", "fail")] > 0
    assert counts[("cites_sources", "scored", "yes")] > 0 and counts[("cites_sources", "scored", "no")] > 0
    assert sum(n for (monitor, *_), n in counts.items() if monitor == "refund_policy") == 150
    assert any("#1 issue_refund came before any call it must follow" in reason or "failed: PaymentGatewayTimeout"
               in reason for (reason,) in broken), "the tool spans' order and error status reach the policy"
