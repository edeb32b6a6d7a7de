"""`vigil demo` end to end, as `make demo` runs it: every part started for real, every part stopped after."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys


def test_the_demo_scores_every_sampled_turn_reports_from_clickhouse_raises_the_regression_and_cleans_up(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CLICKHOUSE_DSN", "VIGIL_JUDGE_BASE_URL")}
    env["COLUMNS"] = "200"
    env["VIGIL_HOME"] = str(tmp_path / "demo")  # where every command looks by default
    run = subprocess.run([sys.executable, "-m", "worker", "demo"], env=env, capture_output=True, text=True,
                         timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]

    assert "offline BASELINE judge" in out, "the demo says which judge it used"
    assert re.search(r"scored every sampled turn of 264 in", out)
    progress = re.findall(r"(\d+) of (\d+) scored", out)
    assert progress and progress[-1][0] == progress[-1][1] and int(progress[-1][1]) > 264, "progress counts scores"
    for monitor in ("answer_relevancy", "context_relevance", "prompt_alignment", "rag_correctness", "multi_turn"):
        assert f"monitor {monitor} ({monitor} v2)" in out, f"{monitor} missing from the report"
    assert "Baseline judge (word overlap, no LLM): score" in out, "reasons are read back"
    assert re.search(r"ALERT answer_relevancy on acme-shop/support-bot: mean 0\.\d+ over the last 120 min", out)
    html = (tmp_path / "demo" / "report.html").read_text(encoding="utf-8")
    assert "mean 0." in html and "over the last 120 min" in html, "the HTML shows the alerts the demo raised"
    assert "vigil report" in out.split("next")[-1] and "vigil show TRACE_ID" in out, "the demo says what to try next"

    # Afterwards, `vigil report` in the same VIGIL_HOME finds the demo's store: its scores and its alerts.
    after = subprocess.run([sys.executable, "-m", "worker", "report", "--json"], env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    assert after.returncode == 0, after.stderr
    report = json.loads(after.stdout)
    scored = {m["monitor"]: m["scored"] for m in report["monitors"]}
    assert set(scored) >= {"answer_relevancy", "context_relevance", "prompt_alignment", "rag_correctness"}
    assert all(n > 0 for n in scored.values())
    assert any(a["rule"] == "support-relevancy-regression" and a["state"] == "firing" for a in report["alerts"])

    redis_pid = int(re.search(r"pid\s+(\d+)", out).group(1))
    worker_pid = int(re.search(r"`vigil worker` pid (\d+)", out).group(1))
    for pid in (redis_pid, worker_pid):
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower(), \
            f"process {pid} outlived the demo"
