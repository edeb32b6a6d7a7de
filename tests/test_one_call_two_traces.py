"""One model call written by two instrumentations, each in a trace of its own, is one call
(``vigil.schemas.steps.once``, ``vigil.worker.assembly.steps.one_call_once``): OpenLLMetry JS's LangChain handler
opens its chat span with no parent and never makes it current, so the openai instrumentation's span of the same call
is a trace of its own too; and a tool that failed in a trace of its own failed in the run whose model was told so
(``vigil.schemas.steps.tell``, ``tell_failures``): the same handler's tool spans are traces of their own. The rules
on hand-made spans in that shape, on a real Redis, and the whole path through a real ``vigil intake`` and
``vigil worker`` with a second project (its own key) sending the same words."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import redis
from vigil.schemas import steps as run_steps
from vigil.schemas.spans import assembly
from vigil.worker.assembly.links import Trace
from vigil.worker.assembly.steps import (
    EVICTED,
    STEPS,
    STEPS_BYTES,
    one_call_once,
    tell_failures,
)
from vigil.worker.assembly.traces import Spans, trace_name
from vigil.worker.store import connect

from tests.security.test_turn_ownership import (
    DEFAULT_KEY,
    RIVAL_KEY,
    rows,
    through_stack,
)
from tests.test_run_steps import send

MS = 1_000_000
SECOND = 1000 * MS
LANGCHAIN, OPENAI = "@traceloop/instrumentation-langchain", "@traceloop/instrumentation-openai"
SYSTEM = {"role": "system", "parts": [{"type": "text", "content": "You are Acme's support bot."}]}
ANSWER = "A-1001 has shipped."
ERROR = "order database unreachable for A-1001"
TOLD = f"Error: {ERROR}\n Please fix your mistakes."  # LangGraph.js's ToolNode tells the model a tool's error so


def text(role: str, words: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": words}]}


def chat(scope: str, start: int, end: int, messages: list[dict[str, Any]], output: list[dict[str, Any]], *,
         service: str = "shop-bot") -> list[dict[str, Any]]:
    """One model call's span as OpenLLMetry JS writes it, the root of a trace of its own."""
    return [{"trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16], "parent_id": None,
             "name": "chat gpt-4o-mini", "start": start, "end": end, "scope": scope,
             "resource": {"service.name": service},
             "attributes": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                            "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 42,
                            "gen_ai.usage.output_tokens": 17, "gen_ai.input.messages": json.dumps(messages),
                            "gen_ai.output.messages": json.dumps(output)}}]


def asks(start: int, question: str = "Where is order A-1001?", **kw: Any) -> tuple[list[dict], list[dict]]:
    """The call that asks for ``lookup_order``, as LangChain's handler writes it (an empty text: it loses the tool
    calls) around the openai instrumentation's (the tool call, its id)."""
    sent = [SYSTEM, text("user", question)]
    wrapper = chat(LANGCHAIN, start, start + 80 * MS, sent, [text("assistant", "")], **kw)
    inner = chat(OPENAI, start + MS, start + 79 * MS, sent, [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order",
                                         "arguments": {"order_id": "A-1001"}}]}], **kw)
    return wrapper, inner


def answers(start: int, question: str = "Where is order A-1001?", answer: str = ANSWER, result: str = "A-1001 shipped",
            **kw: Any) -> tuple[list[dict], list[dict]]:
    """The call sent the tool's result, which answers: LangChain's span (its assistant message an empty text, its
    tool message bare text) around the openai instrumentation's (the tool call and its result by id)."""
    wrapper = chat(LANGCHAIN, start, start + 80 * MS, [SYSTEM, text("user", question), text("assistant", ""),
                                                       text("tool", result)],
                   [text("assistant", answer)], **kw)
    inner = chat(OPENAI, start + MS, start + 80 * MS + MS // 3, [
        SYSTEM, text("user", question),
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order",
                                         "arguments": {"order_id": "A-1001"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": result}]}],
        [text("assistant", answer)], **kw)
    return wrapper, inner


def failed(start: int, *, service: str = "shop-bot", order: str = "A-1001") -> list[dict[str, Any]]:
    """A tool's call that raised, as LangChain.js's handler writes it: a trace of its own, named by the tool's class,
    its arguments as the call's JSON text, its error as the status and an ``exception`` event; no call id."""
    return [{"trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16], "parent_id": None,
             "name": "execute_tool DynamicStructuredTool", "start": start, "end": start + 2 * MS, "scope": LANGCHAIN,
             "resource": {"service.name": service}, "status": {"code": 2, "message": ERROR},
             "events": [{"name": "exception", "time": start + MS, "attributes": {
                 "exception.type": "Error", "exception.message": ERROR}}],
             "attributes": {"gen_ai.operation.name": "execute_tool", "gen_ai.provider.name": "langchain",
                            "traceloop.span.kind": "task", "traceloop.entity.name": "DynamicStructuredTool",
                            "traceloop.entity.input": json.dumps({"args": [json.dumps({"order_id": order})]})}}]


def errors(turn: dict[str, Any]) -> list[str | None]:
    return [c.get("error") for c in turn.get("tool_calls") or ()]


def turns_of(*traces: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each trace's turn (by trace id) after the rules over all of them, as a file is read."""
    by_trace = {spans[0]["trace_id"]: spans for spans in traces}
    results = {t: assembly(spans) for t, spans in by_trace.items()}
    run_steps.join(by_trace, results)
    return {t: r.turns[0] for t, r in results.items() if r.turns}


def trace_of(spans: list[dict[str, Any]]) -> str:
    return spans[0]["trace_id"]


def test_a_call_written_by_two_instrumentations_in_traces_of_their_own_is_one_turn_read_from_the_inner_one():
    wrapper, inner = answers(0)

    turns = turns_of(wrapper, inner)

    assert list(turns) == [trace_of(inner)]
    [turn] = turns.values()
    assert [(c["name"], c.get("id"), c.get("result")) for c in turn["tool_calls"]] == [
        ("lookup_order", "call_1", "A-1001 shipped")]
    assert turn["output"] == ANSWER


def test_a_run_of_both_layers_is_one_turn_with_each_call_counted_once():
    asking, answering = asks(0), answers(200 * MS)

    turns = turns_of(*asking, *answering)

    assert list(turns) == [trace_of(answering[1])]
    turn = turns[trace_of(answering[1])]
    assert (turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"]) == (84, 34)
    assert turn["metadata"][run_steps.CONTINUES_METADATA] == trace_of(asking[1])


def test_two_users_asking_the_same_words_at_once_through_both_layers_make_two_turns():
    first, second = answers(0), answers(5 * MS)  # every span overlaps every other: one key, four spans

    turns = turns_of(*first, *second)

    assert sorted(turns) == sorted([trace_of(first[1]), trace_of(second[1])])  # the client's, each once


def test_only_a_twin_yields_another_answer_service_time_or_a_run_around_the_call_is_a_turn_of_its_own():
    wrapper, inner = answers(0)
    same_layer = answers(0)[1]  # the openai instrumentation's again, at the same time: a call of its own
    other_answer = answers(0, answer="A-1001 is lost.")[0]
    other_service = answers(0, service="billing-bot")[0]
    later = answers(10 * SECOND)[0]
    run = answers(0)[0]
    agent = {**run[0], "span_id": uuid.uuid4().hex[:16], "name": "workflow support-bot", "start": -MS,
             "end": 90 * MS, "attributes": {"traceloop.span.kind": "workflow", "traceloop.workflow.name": "support"}}
    run = [agent, {**run[0], "parent_id": agent["span_id"]}]  # the LangChain call inside a run of its own

    turns = turns_of(wrapper, inner, same_layer, other_answer, other_service, later, run)

    assert trace_of(wrapper) not in turns
    assert sorted(turns) == sorted(map(trace_of, (inner, same_layer, other_answer, other_service, later, run)))


def test_a_tool_that_failed_in_a_trace_of_its_own_failed_in_the_run_whose_model_was_told_so():
    tool = failed(100 * MS)
    run = answers(200 * MS, result=TOLD)

    turns = turns_of(tool, *run)

    [turn] = turns.values()
    assert errors(turn) == [f"Error: {ERROR}"]
    assert turn["metadata"][run_steps.FAILURES_METADATA] == trace_of(tool)


def test_each_run_takes_its_own_failure_and_no_run_takes_one_it_was_not_told_of():
    first, second = failed(100 * MS), failed(SECOND + 100 * MS)  # the same call failing the same way, twice
    told = [answers(200 * MS, result=TOLD)[1], answers(SECOND + 200 * MS, question="Is A-1001 late?", result=TOLD)[1]]
    ok = answers(2 * SECOND, question="Has A-1001 left?")[1]  # told the tool's result, not an error
    early = answers(2 * SECOND + 100 * MS, question="Where is A-1001 now?", result=TOLD)[1]  # its failure came after
    after = failed(2 * SECOND + 150 * MS)
    other_service = failed(2 * SECOND, service="billing-bot")

    turns = turns_of(first, second, *told, ok, early, after, other_service)

    assert [turns[trace_of(t)]["metadata"].get(run_steps.FAILURES_METADATA) for t in told] == [
        trace_of(first), trace_of(second)]
    assert errors(turns[trace_of(ok)]) == errors(turns[trace_of(early)]) == [None]


# -- the calls on a real Redis -------------------------------------------------------------------------------------


def swept(project: str, *traces: list[dict[str, Any]], stored: bool = False) -> list[Trace]:
    """Traces as a sweep holds them; ``stored``: each one's turn was stored by an earlier assembly."""
    out = []
    for spans in traces:
        kept = Spans(spans)
        result = assembly(spans)
        if stored:
            kept.stored = {t["span_id"]: "digest" for t in result.turns}
        out.append(Trace(trace_name(project, trace_of(spans)), kept, [], result))
    return out


def decide(client: redis.Redis, traces: list[Trace], **kw: Any) -> list[tuple[str, str]]:
    events = one_call_once(client, traces, keep_s=600, budget=2**20, monitors=["relevancy"], **kw)
    return [(e.trace_id, e.stage) for e in events]


def test_calls_are_a_projects_own_a_rival_sending_the_same_words_neither_removes_a_turn_nor_is_removed(client):
    wrapper, inner = answers(0)
    rival = swept("rival", [{**wrapper[0], "trace_id": uuid.uuid4().hex}])  # the same span under another key
    decide(client, rival)

    shop_inner = swept("shop", inner)
    assert decide(client, shop_inner) == []
    shop_wrapper = swept("shop", wrapper)
    assert decide(client, shop_wrapper) == [(trace_of(wrapper), "joined")]

    assert rival[0].result.turns and shop_inner[0].result.turns  # each project's call is its own turn
    assert shop_wrapper[0].result.turns == []  # and the shop's two layers are one


def test_a_sweep_keeps_the_inner_call_whatever_order_its_traces_came_in(client):
    wrapper, inner = answers(0)
    sweep = swept("shop", wrapper, inner)

    assert decide(client, sweep) == [(trace_of(wrapper), "joined")]
    assert [bool(t.result.turns) for t in sweep] == [False, True]


def test_a_stored_turn_never_yields_and_a_trace_assembled_again_decides_as_it_did(client):
    wrapper, inner = answers(0)
    first = swept("shop", wrapper)
    assert decide(client, first) == []  # the wrapper came alone: its turn is stored

    assert decide(client, swept("shop", inner)) == [(trace_of(inner), "joined")]  # the stored one stays
    again = swept("shop", wrapper, inner)  # both assembled again for late spans
    assert decide(client, again) == []  # counted once, when it yielded
    assert [bool(t.result.turns) for t in again] == [True, False]

    known, other = answers(SECOND)
    assert decide(client, swept("shop", other)) == []
    assert decide(client, swept("shop", known, stored=True)) == []  # stored before its call was kept: it stays


def test_calls_are_kept_with_the_steps_bounded_by_bytes_and_the_keep_time(client):
    for i in range(3):
        decide(client, swept("shop", answers(i * SECOND, question=f"Where is order A-{i}?")[1]), now=1000 + i)
    assert client.hlen(STEPS) == 3
    one = int(client.get(STEPS_BYTES)) // 3

    one_call_once(client, swept("shop", answers(3 * SECOND, question="A-3?")[1]), keep_s=600,
                  budget=2 * one + one // 2, monitors=[], now=1003)
    assert client.hlen(STEPS) == 2 and int(client.get(EVICTED)) == 2  # the oldest first out, counted
    one_call_once(client, swept("shop", answers(0, question="later")[1]), keep_s=600, budget=2**20, monitors=[],
                  now=1003 + 601)
    assert client.hlen(STEPS) == 1  # the others were older than the keep time


def test_failures_are_a_projects_own_a_rivals_failure_is_no_error_of_a_projects_run(client):
    tell_failures(client, swept("rival", failed(100 * MS)), keep_s=600, budget=2**20)
    untold = swept("shop", answers(200 * MS, result=TOLD)[1])
    tell_failures(client, untold, keep_s=600, budget=2**20)
    told = swept("shop", failed(SECOND), answers(SECOND + 100 * MS, question="Is A-1001 late?", result=TOLD)[1])
    tell_failures(client, told, keep_s=600, budget=2**20)

    assert errors(untold[0].result.turns[0]) == [None]  # the rival's failure is not its
    assert errors(told[1].result.turns[0]) == [f"Error: {ERROR}"]  # its own project's is


def test_a_stored_turn_assembled_again_takes_what_it_took_and_nothing_new(client):
    tool, run = failed(100 * MS), answers(200 * MS, result=TOLD)[1]
    tell_failures(client, swept("shop", tool, run), keep_s=600, budget=2**20)
    bare = answers(SECOND, question="Is A-1001 late?", result=TOLD)[1]
    tell_failures(client, swept("shop", bare), keep_s=600, budget=2**20)  # stored with no error: none was kept
    tell_failures(client, swept("shop", failed(SECOND - 50 * MS)), keep_s=600, budget=2**20)  # one comes later

    again = swept("shop", run, bare, stored=True)
    tell_failures(client, again, keep_s=600, budget=2**20)

    assert errors(again[0].result.turns[0]) == [f"Error: {ERROR}"]  # what it took: what it was scored with
    assert errors(again[1].result.turns[0]) == [None]  # a failure that settled after it changes nothing scored


# -- through a real intake and worker ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored(redis_server, tmp_path_factory):
    """Another project's LangChain-layer call first; then the default project's client-layer call of the same words
    alone, and its LangChain layer in a later export; then a second call whose two layers come in one export (the
    wrapper first). The ``traces`` rows by (project, trace id) and the funnel's ``joined`` stages by trace id."""
    home = tmp_path_factory.mktemp("one_call")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    env = {"VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_PARENT_WAIT_S": "1", "VIGIL_INTAKE_TOKEN": DEFAULT_KEY}
    now = time.time_ns()
    wrapper, inner = answers(now)
    rival = [{**wrapper[0], "trace_id": uuid.uuid4().hex}]
    together = answers(now + SECOND, question="Can I return the kettle?")
    rival_failure, failure = failed(now + 2 * SECOND), failed(now + 3 * SECOND)
    told = answers(now + 3 * SECOND + 100 * MS, question="Is A-1001 late?", result=TOLD)
    untold = answers(now + 4 * SECOND, question="Has A-1001 left?", result=TOLD)  # the shop's failure is taken
    worker = through_stack(redis_server.url, home, env, [
        lambda intake, key=key, traces=traces: send(intake, [s for spans in traces for s in spans], key)
        for key, traces in ((RIVAL_KEY, [rival, rival_failure]), (DEFAULT_KEY, [inner]), (DEFAULT_KEY, [wrapper]),
                            (DEFAULT_KEY, list(together)), (DEFAULT_KEY, [failure, *told]), (DEFAULT_KEY, list(untold)))])
    store = connect(worker.dsn)
    found = {(r["project"], r["trace_id"]): r for r in rows(
        store, "SELECT project, trace_id, output, tool_calls_json FROM traces FINAL")}
    joined = [r["trace_id"] for r in rows(store, "SELECT trace_id FROM pipeline_events WHERE stage = 'joined'")]
    store.close()
    client.close()
    yield {"wrapper": trace_of(wrapper), "inner": trace_of(inner), "rival": trace_of(rival),
           "together": list(map(trace_of, together)), "told": trace_of(told[1]), "untold": trace_of(untold[1]),
           "wrappers": [trace_of(w) for w in (wrapper, together[0], told[0], untold[0])], "rows": found,
           "joined": joined}


def test_the_worker_stores_each_call_of_two_layers_once_and_counts_the_other_trace_joined(stored):
    shop = sorted(trace for project, trace in stored["rows"] if project == "default")
    inner = stored["together"][1]

    # the first call's client layer, stored before its wrapper came; each other call's client layer
    assert shop == sorted([stored["inner"], inner, stored["told"], stored["untold"]])
    assert json.loads(stored["rows"]["default", inner]["tool_calls_json"])[0]["id"] == "call_1"
    assert sorted(stored["joined"]) == sorted(stored["wrappers"])  # once each (one turn monitor)


def test_another_projects_call_of_the_same_words_at_the_same_time_neither_removes_a_turn_nor_is_removed(stored):
    assert ("rival", stored["rival"]) in stored["rows"] and stored["rival"] not in stored["joined"]
    # its LangChain-layer call, kept first, made the default project's client layer yield to nothing: that one is
    # stored, and it is the default project's own wrapper that yields to it
    assert ("default", stored["inner"]) in stored["rows"] and ("default", stored["wrapper"]) not in stored["rows"]


def test_the_worker_gives_a_run_the_error_of_its_tool_that_failed_in_a_trace_of_its_own_and_no_other(stored):
    told, untold = (json.loads(stored["rows"]["default", stored[k]]["tool_calls_json"]) for k in ("told", "untold"))

    assert [c.get("error") for c in told] == [f"Error: {ERROR}"]
    assert [c.get("error") for c in untold] == [None]  # its project's one failure was the other run's; the rival's
    # is not its
