"""Work a run started in a trace of its own, tied to it by an OpenTelemetry span link (``vigil.schemas.links``,
``vigil.worker.assembly.links``): a multi-agent runtime hands the next agent its input as a message, and that agent
runs in a trace whose root is linked to the span that sent it, asked no user words. The rule on hand-made spans, the
decoder keeping links, and the whole path through a real ``vigil intake`` and ``vigil worker``, with a second project
(its own key) linking to the first project's trace ids."""

from __future__ import annotations

import base64
import json
import time
import uuid
import zlib
from io import StringIO
from typing import Any

import pytest
import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from rich.console import Console
from vigil.schemas import links
from vigil.schemas.spans import assembly, waiting_for_parent
from vigil.worker.assembly.traces import record_key, trace_name
from vigil.worker.intake.otlp import decode_traces
from vigil.worker.report.build import build_report
from vigil.worker.report.text import render_tables
from vigil.worker.store import connect

from tests.judge_server import ScriptedJudge
from tests.pipeline import wait_while_alive
from tests.security.test_turn_ownership import (
    DEFAULT_KEY,
    RIVAL_KEY,
    _reply,
    calls,
    rows,
    settled,
    started,
)
from tests.test_session_chains import send

SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND
QUESTION = "Where is order A-1001?"
FIRST = "Order A-1001 shipped on Monday."
FINAL = "Good news: your order A-1001 shipped on Monday and arrives in two days."


def _id() -> str:
    return uuid.uuid4().hex[:16]


def _span(trace_id: str, name: str, start: int, end: int, parent: str | None = None, span_id: str | None = None,
          links_to: list[tuple[str, str]] = (), **attributes: Any) -> dict[str, Any]:
    span = {"trace_id": trace_id, "span_id": span_id or _id(), "parent_id": parent, "name": name, "start": start,
            "end": end, "attributes": attributes}
    if links_to:
        span["links"] = [{"trace_id": t, "span_id": s} for t, s in links_to]
    return span


def _messages(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in pairs])


def _chat(trace_id: str, parent: str, start: int, asked: list[tuple[str, str]], answer: str, **more: Any):
    return _span(trace_id, "chat m", start, start + SECOND, parent, **{
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": _messages(*asked),
        "gen_ai.output.messages": _messages(("assistant", answer)), **more})


def first_agent(trace_id: str, start: int = T0, question: str = QUESTION, answer: str = FIRST,
                waits: int = 6 * SECOND):
    """The first agent's trace: the runtime's handler span, the agent run (asked the user's question) under it, and,
    after the run, the message the handler sends the next agent, its span open ``waits`` until that agent's work is
    done (as an in-process runtime awaits it; ``next_agent`` by default runs within). Returns the spans and the
    sending span's id."""
    handler, agent, send = _id(), _id(), _id()
    return [
        _span(trace_id, "process support_bot", start, start + 4 * SECOND + waits, span_id=handler, kind=5),
        _span(trace_id, "invoke_agent support_bot", start, start + 2 * SECOND, handler, span_id=agent,
              **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_bot"}),
        _chat(trace_id, agent, start + SECOND // 2, [("user", question)], answer),
        _span(trace_id, "create writer", start + 3 * SECOND, start + 3 * SECOND + waits, handler, span_id=send,
              kind=4, **{"messaging.operation": "create"}),
    ], send


def next_agent(trace_id: str, linked: list[tuple[str, str]], start: int = T0 + 5 * SECOND, handed: str = FIRST,
               answer: str = FINAL, asked_by_user: bool = False, **chat: Any):
    """The next agent's trace: the runtime's delivery of the message (linked to the span that sent it) and the agent
    run under it, handed the first agent's answer as an assistant message (or, ``asked_by_user``, as a user's)."""
    deliver, agent = _id(), _id()
    return [
        _span(trace_id, "process writer", start, start + 3 * SECOND, span_id=deliver, links_to=linked, kind=5),
        _span(trace_id, "invoke_agent writer", start, start + 2 * SECOND, deliver, span_id=agent,
              **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"}),
        _chat(trace_id, agent, start + SECOND // 2, [("user" if asked_by_user else "assistant", handed)], answer,
              **chat),
    ]


def turns(*traces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every turn of the traces, joined by their links as ``vigil.schemas.links.join`` joins a file's traces."""
    by_trace = {spans[0]["trace_id"]: spans for spans in traces}
    joined, _ = links.join(by_trace, {t: assembly(spans) for t, spans in by_trace.items()})
    return [turn for spans in joined.values() for turn in assembly(spans).turns]


def words(turn: dict[str, Any]) -> tuple[str, str]:
    return next((m["content"] for m in reversed(turn["input"]) if m["role"] == "user"), ""), turn["output"]


# -- the rule, on hand-made spans ------------------------------------------------------------------------------------


def test_a_trace_whose_run_states_no_user_words_joins_the_run_of_the_span_its_link_names():
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    first, send = first_agent(a)
    second = next_agent(b, [(a, send)])

    [turn] = turns(first, second)

    assert (turn["trace_id"], turn["span_id"]) == (a, first[1]["span_id"])  # the first run's turn id
    assert words(turn) == (QUESTION, FINAL)  # its question, the joined work's last answer
    assert turn["ended_at"] == assembly(second).turns[0]["ended_at"]
    assert {s["span_id"] for s in turn["spans"]} >= {s["span_id"] for s in second}
    assert assembly(second).link == (a, send)


def test_a_joined_runs_usage_and_tool_calls_are_the_whole_works():
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    first, send = first_agent(a)
    first[2]["attributes"].update({"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 4})
    second = next_agent(b, [(a, send)], **{"gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3})
    agent = second[1]["span_id"]
    second.append(_span(b, "execute_tool lookup_order", T0 + 5 * SECOND + SECOND // 4, T0 + 5 * SECOND + SECOND // 3,
                        agent, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                                  "gen_ai.tool.call.arguments": '{"order_id": "A-1001"}',
                                  "gen_ai.tool.call.result": "shipped"}))

    [turn] = turns(first, second)

    assert turn["usage"] == {"prompt_tokens": 17, "completion_tokens": 7}
    assert [(c["name"], c["arguments"], c.get("result")) for c in turn["tool_calls"]] == [
        ("lookup_order", {"order_id": "A-1001"}, "shipped")]


def test_a_run_that_answers_after_the_work_it_waited_for_keeps_its_own_last_answer():
    """A run hands work on from a tool it waits in (the tool span is the linked span) and answers after it."""
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    agent, tool = _id(), _id()
    run = [_span(a, "invoke_agent support_bot", T0, T0 + 10 * SECOND, span_id=agent,
                 **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_bot"}),
           _chat(a, agent, T0, [("user", QUESTION)], "Let me ask the writer."),
           _span(a, "execute_tool ask_writer", T0 + 2 * SECOND, T0 + 8 * SECOND, agent, span_id=tool,
                 **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ask_writer"}),
           _chat(a, agent, T0 + 8 * SECOND + 1, [("user", QUESTION), ("assistant", "A draft.")], FINAL)]
    writer = next_agent(b, [(a, tool)], start=T0 + 3 * SECOND, answer="A draft.")

    [turn] = turns(run, writer)

    assert words(turn) == (QUESTION, FINAL)


def test_when_the_joined_work_fails_without_an_answer_the_run_failed_with_its_error():
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    first, send = first_agent(a)
    second = next_agent(b, [(a, send)])
    second[2]["attributes"]["gen_ai.output.messages"] = "[]"
    second[2]["status"] = {"code": 2, "message": "model overloaded"}
    second[1]["status"] = {"code": 2, "message": "model overloaded"}

    [turn] = turns(first, second)

    assert turn["output"] == "" and turn["metadata"]["vigil.run"] == "failed"
    assert "model overloaded" in turn["metadata"]["vigil.error"]


def background_job(trace_id: str, linked: tuple[str, str], start: int, answer: str = "Summary: A-1001 shipped."):
    """A job a chat run started and did not wait for (a summariser): a trace of its own whose root is linked to a
    span of the run, its LLM call given the conversation as a system and an assistant message, answering something
    else, and ending after the span it is linked to ended."""
    job = _id()
    return [_span(trace_id, "summarise conversation", start, start + 4 * SECOND, span_id=job, links_to=[linked],
                  kind=5),
            _span(trace_id, "chat m", start + SECOND, start + 3 * SECOND, job, **{
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Summarise the conversation."}]),
                "gen_ai.input.messages": _messages(("assistant", FIRST)),
                "gen_ai.output.messages": _messages(("assistant", answer))})]


@pytest.mark.parametrize("linked", ["the run's root", "its LLM call", "a producer span that ended on sending"])
def test_a_job_the_run_did_not_wait_for_never_changes_its_answer_and_is_a_run_of_its_own(linked):
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    chat, _ = first_agent(a)
    chat = chat[:3]  # the handler, the run and its LLM call: no next agent
    publish = _span(a, "publish summarise", T0 + 2 * SECOND - 1000, T0 + 2 * SECOND - 900, chat[1]["span_id"],
                    kind=4, **{"messaging.operation": "publish"})
    span = {"the run's root": chat[1], "its LLM call": chat[2], "a producer span that ended on sending": publish}
    job = background_job(b, (a, span[linked]["span_id"]), start=T0 + 2 * SECOND)

    assert assembly(job).link == (a, span[linked]["span_id"])  # its runs state no user words: the rule looks
    assert sorted((t["trace_id"], words(t)) for t in turns([*chat, publish], job)) == sorted(
        [(a, (QUESTION, FIRST)), (b, ("", "Summary: A-1001 shipped."))])


def test_a_linked_run_asked_user_words_of_its_own_stays_a_run_of_its_own():
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    first, send = first_agent(a)
    follow_up = next_agent(b, [(a, send)], handed="And can I return it?", asked_by_user=True)

    assert sorted(words(t) for t in turns(first, follow_up)) == [("And can I return it?", FINAL), (QUESTION, FIRST)]
    assert assembly(follow_up).link is None


@pytest.mark.parametrize("linked", ["two spans of two traces", "a trace not in the file", "more links than kept"])
def test_a_run_whose_links_name_no_one_known_span_is_assembled_on_its_own(linked):
    a, c = uuid.uuid4().hex, uuid.uuid4().hex
    first, send = first_agent(a)
    other, other_send = first_agent(c, question="Another question?", answer="Another answer.")
    named = {"two spans of two traces": [(a, send), (c, other_send)],
             "a trace not in the file": [(uuid.uuid4().hex, _id())],
             "more links than kept": [(a, send)]}[linked]
    second = next_agent(uuid.uuid4().hex, named)
    if linked == "more links than kept":
        second[0]["links_more"] = True

    assert sorted(words(t) for t in turns(first, other, second)) == [
        ("", FINAL), ("Another question?", "Another answer."), (QUESTION, FIRST)]


def test_a_trace_with_no_run_linked_to_a_run_stays_a_non_run():
    a = uuid.uuid4().hex
    first, send = first_agent(a)
    ack = [_span(uuid.uuid4().hex, "ack", T0 + 9 * SECOND, T0 + 10 * SECOND, links_to=[(a, send)],
                 **{"messaging.operation": "ack"})]

    assert [words(t) for t in turns(first, ack)] == [(QUESTION, FIRST)]
    assert assembly(ack).link is None


def test_a_chain_of_agents_joins_through_to_the_run_that_started_it():
    a, b, c = (uuid.uuid4().hex for _ in range(3))
    first, send = first_agent(a, waits=20 * SECOND)  # the first waits for the second, the second for the third
    second = next_agent(b, [(a, send)], answer="A draft.")
    second[0]["end"] = T0 + 20 * SECOND
    send_on = _span(b, "create editor", T0 + 8 * SECOND, T0 + 19 * SECOND, second[0]["span_id"], kind=4)
    third = next_agent(c, [(b, send_on["span_id"])], start=T0 + 10 * SECOND, handed="A draft.", answer=FINAL)

    [turn] = turns(first, [*second, send_on], third)

    assert (turn["trace_id"], words(turn)) == (a, (QUESTION, FINAL))


def test_hosts_follow_chains_only_to_a_trace_that_holds_a_run():
    targets = {"b": ("a", "s1"), "c": ("b", "s2"), "d": ("x", "s3"), "e": ("d", "s4")}

    assert links.hosts(targets, lambda t: t in {"a", "d"}) == {"b": "a", "c": "a", "e": "d"}


# -- the decoder keeps links ---------------------------------------------------------------------------------------


def _otlp_span(trace_id: str, span_id: str, span_links: list[dict[str, Any]] = ()) -> dict[str, Any]:
    return {"traceId": trace_id, "spanId": span_id, "name": "process writer", "kind": 5,
            "startTimeUnixNano": "1", "endTimeUnixNano": "2", "links": list(span_links)}


def test_the_decoder_keeps_a_spans_links_in_otlp_json_and_protobuf_and_drops_a_link_that_is_no_otlp_id():
    a, b, s = uuid.uuid4().hex, uuid.uuid4().hex, _id()
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [
        _otlp_span(b, _id(), [{"traceId": a, "spanId": s}, {"traceId": "not hex", "spanId": s},
                              {"traceId": a, "spanId": s}]),
        _otlp_span(b, _id())]}]}]}
    proto = ExportTraceServiceRequest()
    span = proto.resource_spans.add().scope_spans.add().spans.add(trace_id=bytes.fromhex(b),
                                                                  span_id=bytes.fromhex(_id()), name="p")
    span.links.add(trace_id=bytes.fromhex(a), span_id=bytes.fromhex(s))
    span.links.add(trace_id=b"short", span_id=bytes.fromhex(s))

    decoded = decode_traces(json.dumps(body).encode(), json_body=True)
    [from_proto] = decode_traces(proto.SerializeToString(), json_body=False).spans

    assert decoded.rejected == 0
    assert [r.get("links") for r in decoded.spans] == [[{"trace_id": a, "span_id": s}], None]
    assert from_proto["links"] == [{"trace_id": a, "span_id": s}]


def test_the_decoder_keeps_at_most_max_links_and_says_there_were_more():
    b = uuid.uuid4().hex
    many = [{"traceId": uuid.uuid4().hex, "spanId": _id()} for _ in range(links.MAX_LINKS + 3)]
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [_otlp_span(b, _id(), many)]}]}]}

    [record] = decode_traces(json.dumps(body).encode(), json_body=True).spans

    assert len(record["links"]) == links.MAX_LINKS and record["links_more"] is True
    assert record["links"][0]["span_id"] == base64.b64decode(base64.b64encode(bytes.fromhex(many[0]["spanId"]))).hex()


# -- through a real intake and worker ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored(redis_server, tmp_path_factory):
    """The default project's orchestrations: one sent whole in one request (``together``), with a span of its next
    agent that comes after that one joined (``late_tool``); one whose next agent comes after the first agent's turn
    was stored (``later``); one whose next agent settles before the first agent's root span comes (``settling``: its
    handler span sent with ``later``'s next agent); one whose host is at its span cap (``full``: 6 spans, the cap 8).
    A chat run (``chat``) and, after its turn was stored, a background job linked to its LLM call (``job``). Then a
    second project's next agent linked to the default project's ``target`` trace id (which holds a scored turn), with
    its own trace of that id. The ``traces`` rows and funnel stages by (project, trace id), the judge's calls for the
    target and its assemblies before and after the rival's, and the chat's assemblies."""
    home = tmp_path_factory.mktemp("links")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    env = {"VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_PARENT_WAIT_S": "5", "VIGIL_INTAKE_TOKEN": DEFAULT_KEY,
           "VIGIL_INTAKE_MAX_TRACE_SPANS": "8"}
    ids = {name: uuid.uuid4().hex for name in ("together", "together_next", "later", "later_next", "settling",
                                               "settling_next", "full", "full_next", "target", "rival_next", "chat",
                                               "job")}
    now = time.time_ns()
    made = {}
    for name in ("together", "later", "settling", "full", "target"):
        made[name], made[f"{name}_send"] = first_agent(ids[name], start=now, question=f"{name}: {QUESTION}")
    made["full"] += [_span(ids["full"], "db query", now + 3 * SECOND, now + 3 * SECOND + 10, made["full"][0]["span_id"])
                     for _ in range(2)]  # 6 spans: the next agent's 3 are over the cap of 8
    for name in ("together", "later", "settling", "full"):
        made[f"{name}_next"] = next_agent(ids[f"{name}_next"], [(ids[name], made[f"{name}_send"])],
                                            start=now + 5 * SECOND)
    made["chat"] = first_agent(ids["chat"], start=now, question=f"chat: {QUESTION}")[0][:3]
    made["job"] = background_job(ids["job"], (ids["chat"], made["chat"][2]["span_id"]), start=now + 2 * SECOND)
    rival_next = next_agent(ids["rival_next"], [(ids["target"], made["target_send"])], start=now + 5 * SECOND,
                            answer="The rival's answer.")
    rival_own = json.loads(json.dumps(made["target"]))  # the same trace and span ids, the rival's own words
    rival_own[2]["attributes"]["gen_ai.input.messages"] = _messages(("user", "The rival's own question?"))
    rival_own[2]["attributes"]["gen_ai.output.messages"] = _messages(("assistant", "Rival."))
    with ScriptedJudge(_reply) as judge:
        intake, worker = started(redis_server.url, home, judge, env)
        try:
            send(intake, [made["together"], made["together_next"], made["later"], made["full"], made["full_next"],
                          made["target"], made["settling"][1:], made["settling_next"], made["chat"]], DEFAULT_KEY)
            wait_while_alive(worker, lambda: all(client.hexists(record_key(ids[name]), "turns") for name in (
                "together", "later", "full", "target", "chat")), "the first traces assembled")
            writer = made["together_next"][1]
            late_tool = _span(ids["together_next"], "execute_tool get_shipping", writer["start"] + 10,
                              writer["start"] + 20, writer["span_id"], **{
                                  "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_shipping",
                                  "gen_ai.tool.call.arguments": '{"order_id": "A-1001"}',
                                  "gen_ai.tool.call.result": "2 days"})
            send(intake, [made["later_next"], made["settling"][:1], [late_tool], made["job"]], DEFAULT_KEY)
            settled(redis_server.url, worker)
            before = {"judged": calls(judge, f"target: {QUESTION}"),
                      "target": int(client.hget(record_key(ids["target"]), "assemblies") or 0)}
            send(intake, [rival_next, rival_own], key=RIVAL_KEY)
            settled(redis_server.url, worker)
            after = {"judged": calls(judge, f"target: {QUESTION}"),
                     "target": int(client.hget(record_key(ids["target"]), "assemblies") or 0),
                     "rival_record": client.hget(record_key(trace_name("rival", ids["rival_next"])), "joined"),
                     "chat": int(client.hget(record_key(ids["chat"]), "assemblies") or 0),
                     "job_record": client.hget(record_key(ids["job"]), "joined")}
            assert worker.stop() == 0
        finally:
            intake.stop()
            worker.stop()
    store = connect(worker.dsn)
    report = StringIO()
    Console(file=report, width=400).print(render_tables(build_report(store)))
    found = {(r["project"], r["trace_id"]): r for r in rows(
        store, "SELECT project, trace_id, span_id, question, output, tool_calls_json FROM traces FINAL")}
    stages = {(r["project"], r["trace_id"], r["stage"]) for r in rows(
        store, "SELECT project, trace_id, stage FROM pipeline_events")}
    scored = {(r["project"], r["trace_id"]): r["n"] for r in rows(
        store, "SELECT project, trace_id, count() AS n FROM scores FINAL WHERE status = 'scored' "
               "GROUP BY project, trace_id")}
    store.close()
    client.close()
    yield {"ids": ids, "made": made, "rows": found, "stages": stages, "scored": scored, "before": before,
           "after": after, "log": worker.output(), "report": report.getvalue()}


@pytest.mark.parametrize("name", ["together", "later", "settling"])
def test_the_worker_stores_one_turn_for_an_orchestration_the_first_runs_question_and_the_last_answer(stored, name):
    ids = stored["ids"]
    row = stored["rows"][("default", ids[name])]

    assert (row["span_id"], row["question"], row["output"]) == (
        stored["made"][name][1]["span_id"], f"{name}: {QUESTION}", FINAL)
    assert ("default", ids[f"{name}_next"]) not in stored["rows"]
    assert ("default", ids[f"{name}_next"], "joined") in stored["stages"]
    assert stored["scored"][("default", ids[name])] >= 1


def test_a_job_linked_to_a_stored_run_that_did_not_wait_for_it_is_stored_on_its_own_and_changes_nothing(stored):
    ids = stored["ids"]
    chat = stored["rows"][("default", ids["chat"])]

    assert (chat["question"], chat["output"]) == (f"chat: {QUESTION}", FIRST)
    assert stored["after"]["chat"] == 1  # never assembled again, so never scored again
    assert stored["rows"][("default", ids["job"])]["output"] == "Summary: A-1001 shipped."
    assert ("default", ids["job"], "joined") not in stored["stages"] and stored["after"]["job_record"] is None


def test_the_report_counts_the_traces_that_joined_another_traces_run_in_plain_words(stored):
    # together_next, later_next and settling_next joined (full_next was over its host's cap, the job ran on its own,
    # the rival's is another project's), each counted once under the agent its own turn would have had
    assert ("default/writer: 0 tool step(s) whose answer was in another trace (counted, not turns); 0 turn(s) "
            "superseded by a late root (removed with their scores); 3 trace(s) joined another trace's run (work that "
            "run handed on and waited for: scored as part of its turn, not turns of their own)") in stored["report"]
    assert ("rival/writer: 0 tool step(s) whose answer was in another trace (counted, not turns); 0 turn(s) "
            "superseded by a late root (removed with their scores); 1 trace(s) joined another trace's run") in stored[
                "report"]
    assert "default/support_bot: 0 tool step(s)" not in stored["report"]  # the hosts' agent: nothing joined it


def test_a_linked_trace_over_its_hosts_span_cap_is_assembled_on_its_own(stored):
    ids = stored["ids"]

    assert stored["rows"][("default", ids["full"])]["output"] == FIRST
    assert stored["rows"][("default", ids["full_next"])]["output"] == FINAL
    assert ("default", ids["full_next"], "joined") not in stored["stages"]


def test_another_projects_linked_span_changes_nothing_of_the_linked_projects_run(stored):
    ids = stored["ids"]
    target = stored["rows"][("default", ids["target"])]

    assert (target["question"], target["output"]) == (f"target: {QUESTION}", FIRST)
    assert stored["after"]["target"] == stored["before"]["target"] == 1  # never assembled again
    assert stored["after"]["judged"] == stored["before"]["judged"] > 0  # nor judged again
    assert stored["scored"][("default", ids["target"])] == stored["scored"][("default", ids["together"])]
    # in its own project the link names its own trace of that id, whose run it joins
    rival = stored["rows"][("rival", ids["target"])]
    assert (rival["question"], rival["output"]) == ("The rival's own question?", "The rival's answer.")
    assert ("rival", ids["rival_next"]) not in stored["rows"]
    assert json.loads(stored["after"]["rival_record"])[0] == trace_name("rival", ids["target"])


def test_a_span_of_a_joined_trace_that_comes_later_joins_the_run_too(stored):
    row = stored["rows"][("default", stored["ids"]["together"])]

    assert [(c["name"], c.get("result")) for c in json.loads(row["tool_calls_json"])] == [("get_shipping", "2 days")]
    assert row["output"] == FINAL
    assert ("default", stored["ids"]["together_next"]) not in stored["rows"]


def test_spans_joined_from_another_trace_never_make_their_host_wait_for_a_parent():
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    first, send = first_agent(a)
    second = next_agent(b, [(a, send)])
    second[0]["parent_id"] = _id()  # its own trace's parent, never sent: its trace waited for it already

    assert waiting_for_parent(second)
    assert not waiting_for_parent([*first, *links.graft(second, a, send)])


@pytest.mark.parametrize(("assemblies", "joins"), [(1, True), (21, False)])
def test_a_linked_trace_joins_a_stored_host_only_within_its_reassembly_cap(redis_url, assemblies, joins):
    """On a real Redis: the host stored with a turn and its spans' record (``late.compact``), assembled ``assemblies``
    times (the cap: 20 re-assemblies)."""
    from vigil.worker.assembly.late import compact
    from vigil.worker.assembly.links import Trace, join_linked
    from vigil.worker.assembly.traces import Spans, assembly_of, store_spans, trace_key

    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    first, send = first_agent(a)
    second = next_agent(b, [(a, send)])
    client = redis.Redis.from_url(redis_url)
    store_spans(client, first, keep_s=600)
    client.hset(record_key(a), mapping={"turns": json.dumps({first[1]["span_id"]: "digest"}),
                                        "assembled": zlib.compress(json.dumps(compact(first, set())).encode()),
                                        "assemblies": assemblies})
    client.delete(trace_key(a))  # assembled: its list was emptied
    linked = Trace(b, Spans(second), [], assembly_of(second))

    events, pending = join_linked(client, [linked], max_spans=2000, max_bytes=2**22, max_reassemblies=20, keep_s=600,
                                  now=time.time(), read=lambda name: pytest.fail("no host in the sweep"),
                                  wait=lambda name: pytest.fail("the host is stored"), monitors=[])

    assert (len(events), pending, not linked.result.turns) == (int(joins), joins, joins)
    assert client.llen(trace_key(a)) == (len(second) if joins else 0)
    assert (client.hget(record_key(b), "joined") is not None) == joins
    client.close()
