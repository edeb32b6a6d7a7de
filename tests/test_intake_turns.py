"""Turns as the agent meant them, end to end: OTLP recorded from the real instrumentation libraries
(``tests/fixtures/otlp``) -> a real `vigil intake` -> Redis -> a real `vigil worker` with a settle delay of 2 s and a
parent wait of 20 s, set as an operator sets them (``VIGIL_INTAKE_SETTLE_S``, ``VIGIL_INTAKE_PARENT_WAIT_S``; settle,
wait for a missing parent, assemble, ingest, score with the offline judge, write) -> chDB. Neither is the default (10 s
and 120 s): the scenario waits out three settle windows and a deferred trace's sweep, scheduled for when its parent
wait ends, like any queued task (with a 10 s settle and a 40 s wait the module took 58 s, with these 29 s).

One scenario for the module (a worker run is the slow part): the fixtures' requests are posted as recorded; a slow
agent's root is posted only once its children have settled and the worker chose to wait for it; a run whose inner
chain and agent arrive after a partial turn was already scored supersedes that turn. Each test reads its rows back.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis
from vigil.worker.store import connect

from tests.pipeline import intake_and_worker, wait_drained

FIXTURES = Path(__file__).parent / "fixtures" / "otlp"
CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"
ANSWER = "Damaged items can be returned within 30 days for a full refund; bring the order number."
LATE_TRACE = "7a1e" * 8
PARTIAL, CHAIN, AGENT = "1111111111111111", "2222222222222222", "3333333333333333"
INDEX_TRACE, INDEX, EMBED = "1dec" * 8, "4444444444444444", "5555555555555555"
# a settle delay; a parent wait that leaves room for the first claim to come late (it is often the worker's backstop
# sweep's, every 5 s at the least, later on a busy machine) and the root to be posted after it
SETTLE_S, PARENT_WAIT_S = 2, 20


def post(url: str, path: str, body: Any) -> dict[str, Any]:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        return json.loads(response.read() or b"{}")


def replay(url: str, fixture: str, only: slice = slice(None)) -> set[str]:
    """Post a fixture's requests as they were recorded; the trace ids they carry."""
    traces = set()
    for request in json.loads((FIXTURES / fixture).read_text())["requests"][only]:
        answer = post(url, request["path"], request["body"])
        assert "partialSuccess" not in answer, answer
        for resource in request["body"].get("resourceSpans", []):
            traces |= {s["traceId"] for scope in resource["scopeSpans"] for s in scope["spans"]}
    return traces


def span(span_id: str, parent: str, name: str, attributes: dict[str, str], start: int, **extra: Any) -> dict:
    return {"traceId": LATE_TRACE, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1_000_000), "flags": 0x100,
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()], **extra}


def spans_request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",
                                                            "value": {"stringValue": "late-bot"}}]},
                               "scopeSpans": [{"spans": list(spans)}]}]}


def chat(question: str, answer: str) -> dict[str, str]:
    return {"gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant",
                                                   "parts": [{"type": "text", "content": answer}]}])}


@pytest.fixture(scope="module")
def scenario(redis_server, tmp_path_factory):
    client = redis.Redis.from_url(redis_server.url)
    sent: dict[str, Any] = {}
    with intake_and_worker(redis_server.url, tmp_path_factory.mktemp("intake-turns"), CONFIG,
                           VIGIL_INTAKE_SETTLE_S=str(SETTLE_S), VIGIL_INTAKE_PARENT_WAIT_S=str(PARENT_WAIT_S),
                           ) as (intake, worker):
        for fixture in ("openai_v2_span_only.json", "openllmetry.json", "openlit.json", "langchain.json",
                        "openai_v2_no_content.json", "pydantic_ai_crash.json"):
            sent[fixture] = replay(intake.url, fixture)
        # an index build: a framework's chain over an embedding batch, no LLM call
        post(intake.url, "/v1/traces", {"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "indexer"}}]},
            "scopeSpans": [{"spans": [
                {**span(INDEX, "", "SentenceSplitter.__call__", {"openinference.span.kind": "CHAIN"}, time.time_ns()),
                 "traceId": INDEX_TRACE},
                {**span(EMBED, INDEX, "embed", {"openinference.span.kind": "EMBEDDING"}, time.time_ns()),
                 "traceId": INDEX_TRACE}]}]}]})
        # a slow agent: its children settle (2 s), the worker waits for their parent instead of assembling them
        # (it defers the trace: its pending score becomes the wait's end less the settle delay, later than any
        # span's arrival and earlier than a claim's lease, 120 s ahead), and the root comes more than 2 s after them
        sent_at = time.time()
        [slow] = sent["slow"] = replay(intake.url, "openai_v2_slow_agent.json", slice(0, 1))
        children_sent = time.monotonic()
        deadline = time.monotonic() + 120
        while not sent_at + PARENT_WAIT_S - SETTLE_S <= (client.zscore("vigil.intake.pending", slow) or 0) \
                < time.time() + PARENT_WAIT_S:
            assert time.monotonic() < deadline and worker.process.poll() is None, worker.output()[-3000:]
            time.sleep(0.2)
        sent["root_after_s"] = time.monotonic() - children_sent
        replay(intake.url, "openai_v2_slow_agent.json", slice(1, None))
        # a partial turn under an inner chain whose parent is remote (never waited for) is assembled and scored
        now = time.time_ns()
        post(intake.url, "/v1/traces", spans_request(
            span(PARTIAL, CHAIN, "chat", chat("What does shipping cost?", "Let me check."), now, flags=0x300)))
        wait_drained(redis_server.url, worker)
        # then the chain and the agent arrive: the run is one turn under the agent; the partial one is superseded
        post(intake.url, "/v1/traces", spans_request(
            span(CHAIN, AGENT, "chain", {"openinference.span.kind": "CHAIN"}, now - 1000),
            span(AGENT, "", "invoke_agent", {**chat("What does shipping cost?", "Shipping is free."),
                                             "gen_ai.operation.name": "invoke_agent"}, now - 2000)))
        wait_drained(redis_server.url, worker)
        assert client.zcard("vigil.intake.pending") == 0
    sent["intake_log"] = intake.output()
    sent["worker_log"] = worker.output()
    store = connect(worker.dsn)
    yield sent, store
    store.close()


def rows(store, sql: str, **parameters: Any) -> list[dict[str, Any]]:
    result = store.query(sql, parameters=parameters)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def turns(store, traces: set[str]) -> list[dict[str, Any]]:
    return rows(store, "SELECT trace_id, span_id, agent, session_id, question, output, tool_calls_json, input_json, "
                       "metadata FROM traces FINAL WHERE has({t:Array(String)}, trace_id) ORDER BY started_at",
                t=sorted(traces))


@pytest.mark.parametrize(("fixture", "runs"), [
    pytest.param("openai_v2_span_only.json", 3, id="openai-v2: agent, tool loop with no parent, HTTP span"),
    pytest.param("openllmetry.json", 3, id="OpenLLMetry: workflow spans, tool loop, HTTP span"),
    pytest.param("openlit.json", 2, id="openlit: agent, tool loop"),
    pytest.param("langchain.json", 1, id="OpenInference LangChain: RAG chain"),
])
def test_each_agent_run_is_exactly_one_turn_with_the_answer_and_no_tool_step_scores_zero(scenario, fixture, runs):
    sent, store = scenario

    found = turns(store, sent[fixture])
    scores = rows(store, "SELECT status, score FROM scores FINAL WHERE has({t:Array(String)}, trace_id)",
                  t=sorted(sent[fixture]))

    assert len(found) == runs and all(t["output"] == ANSWER for t in found)
    assert scores and all(s["status"] == "scored" and s["score"] > 0 for s in scores)


def test_the_tool_round_trip_keeps_its_call_result_and_session(scenario):
    sent, store = scenario

    [run] = [t for t in turns(store, sent["openllmetry.json"]) if t["session_id"]]

    assert (run["agent"], run["session_id"]) == ("support-bot", "sess-tl-1")
    assert json.loads(run["tool_calls_json"]) == [{"name": "get_return_window", "arguments": {"item": "kettle"},
                                                   "result": "30 days", "error": None, "id": "call_1"}]
    # the tool span names no id: it is the LLM's tool call it ran (same name and arguments)


def test_a_step_whose_answer_is_another_trace_is_counted_as_a_step_in_the_funnel(scenario):
    sent, store = scenario
    traces = sent["openai_v2_span_only.json"] | sent["openllmetry.json"] | sent["openlit.json"]

    steps = rows(store, "SELECT trace_id FROM pipeline_events FINAL WHERE stage = 'step' AND "
                        "has({t:Array(String)}, trace_id)", t=sorted(traces))

    assert len(steps) == 3  # one per library's loop: its first call asked for the tool in a trace of its own


def test_a_root_exported_after_its_children_settled_makes_one_turn_and_costs_no_extra_judge_call(scenario):
    sent, store = scenario

    [turn] = turns(store, sent["slow"])
    superseded = rows(store, "SELECT count() AS n FROM pipeline_events FINAL WHERE stage = 'superseded' AND "
                             "has({t:Array(String)}, trace_id)", t=sorted(sent["slow"]))

    assert sent["root_after_s"] >= SETTLE_S  # the settle delay had passed when the root came
    assert (turn["agent"], turn["output"], json.loads(turn["metadata"]["spans"])) == ("support-bot", ANSWER, 5)
    assert superseded == [{"n": 0}]


def test_a_late_root_supersedes_the_partial_turn_and_its_scores_everywhere(scenario):
    _, store = scenario

    [turn] = turns(store, {LATE_TRACE})
    scores = rows(store, "SELECT span_id FROM scores FINAL WHERE trace_id = {t:String}", t=LATE_TRACE)
    stages = rows(store, "SELECT span_id, stage FROM pipeline_events FINAL WHERE trace_id = {t:String} AND "
                         "monitor = '' ORDER BY stage", t=LATE_TRACE)

    rollup = rows(store, "SELECT countMerge(rows) AS n FROM scores_1m WHERE agent = 'late-bot'")
    assert (turn["span_id"], turn["output"]) == (AGENT, "Shipping is free.")
    assert {s["span_id"] for s in scores} == {AGENT}
    assert rollup == [{"n": len(scores)}]  # the rollups were rebuilt without the superseded score
    # the partial turn stood in for its parent, the chain that had not arrived: that was its id
    assert stages == [{"span_id": AGENT, "stage": "received"}, {"span_id": CHAIN, "stage": "superseded"}]


def test_a_turn_without_captured_content_is_recorded_and_unscored_naming_the_setting(scenario):
    sent, store = scenario

    found = turns(store, sent["openai_v2_no_content.json"])
    scores = rows(store, "SELECT status, reason FROM scores FINAL WHERE has({t:Array(String)}, trace_id)",
                  t=sorted(sent["openai_v2_no_content.json"]))

    assert len(found) == 2 and all(t["metadata"]["vigil.content"] == "missing" for t in found)
    assert scores and all(s["status"] == "unscored" and "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
                          in s["reason"] for s in scores)


def test_the_intake_logs_one_line_per_request(scenario):
    sent, _ = scenario

    lines = [json.loads(line) for line in sent["intake_log"].splitlines() if '"event": "request"' in line]

    assert lines and all(line["status"] == 200 and line["path"] in ("/v1/traces", "/v1/logs") for line in lines)
    assert {"accepted", "rejected", "bytes"} <= set(lines[0])


def test_the_report_names_the_tool_steps_and_the_superseded_turns_per_agent(scenario):
    from io import StringIO

    from rich.console import Console
    from vigil.worker.report.build import build_report
    from vigil.worker.report.text import render_tables

    _, store = scenario
    out = StringIO()

    Console(file=out, width=300).print(render_tables(build_report(store)))

    assert "default/late-bot: 0 tool step(s) whose answer was in another trace (counted, not turns); 1 turn(s) " \
           "superseded by a late root" in out.getvalue()
    assert "default/shop-agent: 1 tool step(s)" in out.getvalue()


def test_a_run_that_failed_without_an_answer_is_stored_with_its_error_counted_and_never_scored(scenario):
    sent, store = scenario

    [run] = turns(store, sent["pydantic_ai_crash.json"])
    scores = rows(store, "SELECT count() AS n FROM scores FINAL WHERE has({t:Array(String)}, trace_id)",
                  t=sorted(sent["pydantic_ai_crash.json"]))
    stages = rows(store, "SELECT DISTINCT stage FROM pipeline_events FINAL WHERE has({t:Array(String)}, trace_id) "
                         "ORDER BY stage", t=sorted(sent["pydantic_ai_crash.json"]))

    assert (run["question"], run["output"]) == ("What is the status of order A-1001?", "")
    assert run["metadata"]["vigil.error"] == "ValueError: order database unreachable for A-1001"
    assert scores == [{"n": 0}]
    assert [s["stage"] for s in stages] == ["failed_run", "received"]


def test_a_trace_with_genai_spans_and_no_llm_call_makes_no_turn_and_says_why(scenario):
    sent, store = scenario

    stages = rows(store, "SELECT DISTINCT agent, stage FROM pipeline_events FINAL WHERE trace_id = {t:String}",
                  t=INDEX_TRACE)

    assert turns(store, {INDEX_TRACE}) == []
    assert stages == [{"agent": "indexer", "stage": "no_turn"}]
    [line] = [json.loads(line) for line in sent["worker_log"].splitlines() if "made no turn" in line]
    assert (line["agent"], line["why"]) == ("indexer", "no LLM call (its spans: chain)")


def test_with_a_key_the_no_turn_and_step_stages_name_the_service_whatever_span_comes_first():
    """A sender with a key has every span stamped with its project (``tasks._stamped``), also a span whose resource
    the intake did not keep (no GenAI attributes: an HTTP root): the stages still name the service."""
    from vigil.schemas.spans import assembly
    from vigil.worker.assembly.tasks import _no_turn, _stamped, _steps
    from vigil.worker.intake.otlp import decode_traces

    def otlp(span_id: str, parent: str, name: str, **attributes: str) -> dict[str, Any]:
        return {"traceId": INDEX_TRACE, "spanId": span_id, "parentSpanId": parent, "name": name,
                "startTimeUnixNano": "1", "endTimeUnixNano": "9",
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()]}

    service = [{"key": "service.name", "value": {"stringValue": "indexer"}}]
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "split"}
    body = {"resourceSpans": [{"resource": {"attributes": service}, "scopeSpans": [{"spans": [
        otlp(INDEX, "", "POST /reindex", **{"http.request.method": "POST"}), otlp(EMBED, INDEX, "split", **tool)]}]}]}
    spans = [_stamped(s, "", "acme") for s in decode_traces(json.dumps(body).encode(), json_body=True).spans]

    assert spans[0]["resource"] == {"vigil.project": "acme"}  # the root's resource: the stamp alone
    assert {(e.project, e.agent) for e in _no_turn(INDEX_TRACE, spans, assembly(spans).no_turn, ["relevancy"])} == {
        ("acme", "indexer")}
    assert {(e.project, e.agent) for e in _steps(INDEX_TRACE, spans, [EMBED])} == {("acme", "indexer")}


def test_the_report_names_the_failed_runs_per_agent(scenario):
    from io import StringIO

    from rich.console import Console
    from vigil.worker.report.build import build_report
    from vigil.worker.report.text import render_tables

    _, store = scenario
    out = StringIO()

    Console(file=out, width=300).print(render_tables(build_report(store)))

    assert "default/support-bot: 1 run(s) failed without an answer (recorded with their error, never scored); " \
           "0 trace(s) made no turn" in out.getvalue()
    assert "default/indexer: 0 run(s) failed without an answer (recorded with their error, never scored); " \
           "1 trace(s) made no turn" in out.getvalue()
