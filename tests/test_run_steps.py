"""A run whose model calls are traces of their own (``vigil.schemas.steps``, ``vigil.worker.assembly.steps``): an
application with no span around its tool loop, traced only by its model client (LiteLLM's ``otel`` callback), sends
the call that asks for a tool and the call that is sent its result as two traces. The rule on hand-made spans in
LiteLLM's shape, the steps on a real Redis, and the whole path through a real ``vigil intake`` and ``vigil worker``
with a second project (its own key) sending the same conversation."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import redis
from vigil.schemas import conventions
from vigil.schemas import steps as run_steps
from vigil.schemas.spans import assembly
from vigil.worker.assembly.links import Trace
from vigil.worker.assembly.steps import EVICTED, STEPS, STEPS_BYTES, continue_runs
from vigil.worker.assembly.traces import trace_name
from vigil.worker.store import connect

from tests.security.test_turn_ownership import (
    DEFAULT_KEY,
    RIVAL_KEY,
    _attrs,
    _post,
    rows,
    through_stack,
)

SECOND = 1_000_000_000
SYSTEM = {"role": "system", "parts": [{"type": "text", "content": "You are Acme's support bot."}]}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def asked(call_id: str, order: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": "lookup_order",
                                            "arguments": {"order_id": order}}]}


def result(call_id: str, order: str) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                       "response": f"{order} shipped"}]}


def call(start: int, messages: list[dict[str, Any]], *, asks: str | None = None, answer: str = "",
         trace_id: str | None = None, usage: tuple[int, int] = (42, 17)) -> dict[str, Any]:
    """One model call as LiteLLM's callback exports it, the root of a trace of its own: a call that asks for a tool
    states it only in the flat ``gen_ai.completion.0.function_call.*`` attributes (its ``gen_ai.output.messages`` an
    assistant message with no parts), without the call's id."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": usage[0], "gen_ai.usage.output_tokens": usage[1],
        "gen_ai.input.messages": json.dumps(messages)}
    if asks:
        attributes["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [],
                                                            "finish_reason": "tool_calls"}])
        attributes["gen_ai.completion.0.function_call.name"] = "lookup_order"
        attributes["gen_ai.completion.0.function_call.arguments"] = json.dumps({"order_id": asks})
    else:
        attributes["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
            {"type": "text", "content": answer}], "finish_reason": "stop"}])
    return {"trace_id": trace_id or uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16], "parent_id": None,
            "name": "litellm_request", "start": start, "end": start + SECOND // 2, "attributes": attributes}


def run(start: int, question: str, order: str = "A-1001", call_id: str = "call_1") -> list[list[dict[str, Any]]]:
    """One run of a tool loop, each call a trace: the call that asks for ``lookup_order``, then the call sent its
    result, which answers."""
    conversation = [SYSTEM, user(question)]
    return [[call(start, conversation, asks=order)],
            [call(start + SECOND, [*conversation, asked(call_id, order), result(call_id, order)],
                  answer=f"{order} has shipped.")]]


def turns_of(traces: list[list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each trace's turn (by trace id) after the rule over all of them, as ``vigil explain-trace`` reads a file."""
    by_trace = {spans[0]["trace_id"]: spans for spans in traces}
    results = {t: assembly(spans) for t, spans in by_trace.items()}
    run_steps.join(by_trace, results)
    return {t: r.turns[0] for t, r in results.items() if r.turns}


def usage(turn: dict[str, Any]) -> tuple[int, int]:
    return turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"]


def test_a_call_whose_output_messages_are_empty_asks_for_the_tool_calls_its_flat_attributes_state():
    [[step], _] = run(0, "Where is order A-1001?")

    _, outputs, _ = conventions.io(step)

    assert [c for m in outputs for c in m["tool_calls"]] == [{"name": "lookup_order",
                                                              "arguments": {"order_id": "A-1001"}}]


def test_a_turn_that_continues_a_step_of_another_trace_has_the_runs_usage_and_names_the_steps_trace():
    step, answer = run(0, "Where is order A-1001?")
    alone = assembly(answer)

    turns = turns_of([step, answer])

    assert usage(alone.turns[0]) == (42, 17) and alone.steps == [] and assembly(step).steps == [step[0]["span_id"]]
    [turn] = turns.values()
    assert usage(turn) == (84, 34)
    assert turn["metadata"][run_steps.CONTINUES_METADATA] == step[0]["trace_id"]
    assert [(c["name"], c["arguments"]) for c in turn["tool_calls"]] == [("lookup_order", {"order_id": "A-1001"})]


def test_a_loop_of_three_calls_in_three_traces_sums_all_three():
    conversation = [SYSTEM, user("Where are orders A-1 and A-2?")]
    first = [call(0, conversation, asks="A-1")]
    after_first = [*conversation, asked("c1", "A-1"), result("c1", "A-1")]
    second = [call(SECOND, after_first, asks="A-2")]
    third = [call(2 * SECOND, [*after_first, asked("c2", "A-2"), result("c2", "A-2")], answer="Both shipped.")]

    [turn] = turns_of([third, first, second]).values()

    assert usage(turn) == (126, 51)


def test_the_same_question_asked_twice_each_run_takes_its_own_step():
    one, two = run(0, "Where is order A-1001?"), run(10 * SECOND, "Where is order A-1001?")

    turns = turns_of([*two, *one])  # the same conversation and the same tool call: one key, two steps

    assert [t[run_steps.CONTINUES_METADATA] for t in (turns[one[1][0]["trace_id"]]["metadata"],
                                                       turns[two[1][0]["trace_id"]]["metadata"])] == [
        one[0][0]["trace_id"], two[0][0]["trace_id"]]


def test_a_follow_up_does_not_take_a_step_of_the_run_before_it():
    step, answer = run(0, "Where is order A-1001?")
    history = [SYSTEM, user("Where is order A-1001?"), asked("call_1", "A-1001"), result("call_1", "A-1001"),
               {"role": "assistant", "parts": [{"type": "text", "content": "A-1001 has shipped."}]}]
    follow_up = [call(10 * SECOND, [*history, user("Thanks!")], answer="You're welcome.", usage=(50, 5))]

    turns = turns_of([answer, follow_up, step])  # the step is the first run's, and the follow-up asked no tool

    assert usage(turns[follow_up[0]["trace_id"]]) == (50, 5)
    assert usage(turns[answer[0]["trace_id"]]) == (84, 34)


def test_a_trace_that_holds_its_own_step_takes_none_of_another_trace():
    stray, _ = run(0, "Where is order A-1001?")  # an open step of the same conversation, in a trace of its own
    trace_id = uuid.uuid4().hex
    [[step], [answer]] = run(SECOND, "Where is order A-1001?")
    whole = [{**step, "trace_id": trace_id}, {**answer, "trace_id": trace_id}]  # both calls of the run in one trace

    turns = turns_of([stray, whole])

    assert usage(turns[trace_id]) == (84, 34)  # its own two calls, not the stray step's too
    assert run_steps.CONTINUES_METADATA not in turns[trace_id]["metadata"]


# -- the steps on a real Redis -------------------------------------------------------------------------------------


def swept(project: str, *traces: list[dict[str, Any]]) -> list[Trace]:
    return [Trace(trace_name(project, spans[0]["trace_id"]), spans, [], assembly(spans)) for spans in traces]


def test_steps_are_a_projects_own_another_project_sending_the_same_conversation_takes_none(client):
    step, answer = run(0, "Where is order A-1001?")
    continue_runs(client, swept("shop", step), keep_s=600, budget=2**20)
    rival = swept("rival", answer)  # the same conversation and tool call, under another project's key

    continue_runs(client, rival, keep_s=600, budget=2**20)
    shop = swept("shop", answer)
    continue_runs(client, shop, keep_s=600, budget=2**20)

    assert usage(rival[0].result.turns[0]) == (42, 17)  # the shop's step is not its to take
    assert usage(shop[0].result.turns[0]) == (84, 34)  # and it was left for the shop's turn


def test_a_step_joins_one_turn_and_the_same_turn_assembled_again_takes_it_again(client):
    step, answer = run(0, "Where is order A-1001?")
    first = swept("shop", step, answer)
    continue_runs(client, first, keep_s=600, budget=2**20)
    again = swept("shop", answer)  # its trace assembled again (late spans)
    replay = [call(2 * SECOND, json.loads(answer[0]["attributes"]["gen_ai.input.messages"]), answer="Shipped.")]
    other = swept("shop", replay)  # another trace sending the run's conversation again

    continue_runs(client, again, keep_s=600, budget=2**20)
    continue_runs(client, other, keep_s=600, budget=2**20)

    assert usage(first[1].result.turns[0]) == usage(again[0].result.turns[0]) == (84, 34)
    assert usage(other[0].result.turns[0]) == (42, 17)


def test_a_trace_that_holds_its_own_step_takes_no_kept_step_of_its_conversation(client):
    stray, _ = run(0, "Where is order A-1001?")
    trace_id = uuid.uuid4().hex
    [[step], [answer]] = run(SECOND, "Where is order A-1001?")
    continue_runs(client, swept("shop", stray), keep_s=600, budget=2**20)
    whole = swept("shop", [{**step, "trace_id": trace_id}, {**answer, "trace_id": trace_id}])

    continue_runs(client, whole, keep_s=600, budget=2**20)

    assert usage(whole[0].result.turns[0]) == (84, 34)  # its own two calls: the stray step is still open
    assert json.loads(client.hget(STEPS, json.dumps(["shop", run_steps.left(stray, [stray[0]["span_id"]])[0].key])))[
        0]["taken"] == ""


def test_steps_are_bounded_by_bytes_oldest_first_out_and_forgotten_after_the_keep_time(client):
    steps = [run(i * SECOND, f"Where is order A-{i}?", order=f"A-{i}")[0] for i in range(4)]
    for i, step in enumerate(steps[:3]):
        continue_runs(client, swept("shop", step), keep_s=600, budget=1, now=1000 + i)

    assert client.hlen(STEPS) == 0 or int(client.get(STEPS_BYTES)) <= 1
    assert int(client.get(EVICTED)) == 3  # each key over the budget alone: dropped at once, counted
    client.delete(STEPS, STEPS_BYTES, EVICTED)
    for i, step in enumerate(steps[:3]):
        continue_runs(client, swept("shop", step), keep_s=600, budget=2**20, now=1000 + i)
    one = int(client.get(STEPS_BYTES)) // 3
    continue_runs(client, swept("shop", steps[3]), keep_s=600, budget=2 * one + one // 2, now=1003)
    assert client.hlen(STEPS) == 2 and int(client.get(EVICTED)) == 2  # the two oldest went first
    continue_runs(client, swept("shop", run(0, "later")[0]), keep_s=600, budget=2**20, now=1003 + 601)
    assert client.hlen(STEPS) == 1  # the others were older than the keep time


# -- through a real intake and worker ------------------------------------------------------------------------------


def send(intake, spans: list[dict[str, Any]], key: str) -> None:
    """Span records as one OTLP/JSON export (numbers as ``intValue``, as an SDK sends usage) under ``key``, each in
    its ``scope`` (the instrumentation that wrote it) when it names one, with its ``status`` and ``events``."""
    def value(v: Any) -> dict[str, Any]:
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}

    def attributes(found: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": k, "value": value(v)} for k, v in found.items()]

    answer = _post(f"{intake.url}/v1/traces", key=key, body={"resourceSpans": [{
        "resource": {"attributes": _attrs(service__name="shop-bot")}, "scopeSpans": [
            {"scope": {"name": s.get("scope", "")}, "spans": [
                {"traceId": s["trace_id"], "spanId": s["span_id"], "parentSpanId": "", "name": s["name"], "kind": 3,
                 "startTimeUnixNano": str(s["start"]), "endTimeUnixNano": str(s["end"]),
                 "attributes": attributes(s["attributes"]), "status": s.get("status", {}),
                 "events": [{"name": e["name"], "timeUnixNano": str(e["time"]), "attributes": attributes(
                     e["attributes"])} for e in s.get("events", ())]}]}
            for s in spans]}]})
    assert "partialSuccess" not in answer, answer


def step_rival_answer(redis_url: str, home, step: list[dict[str, Any]], answer: list[dict[str, Any]],
                      ) -> dict[str, Any]:
    """Through a real intake and worker: the default project's ``step``, then another project's copy of ``answer`` (its
    own key, started before it), then the default project's ``answer``; the ``traces`` rows and the funnel's ``step``
    stages by trace id."""
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    env = {"VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_PARENT_WAIT_S": "1", "VIGIL_INTAKE_TOKEN": DEFAULT_KEY}
    rival = [{**answer[0], "trace_id": uuid.uuid4().hex, "start": answer[0]["start"] - SECOND // 2}]
    worker = through_stack(redis_url, home, env, [lambda intake: send(intake, step, DEFAULT_KEY),
                                                  lambda intake: send(intake, rival, RIVAL_KEY),
                                                  lambda intake: send(intake, answer, DEFAULT_KEY)])
    store = connect(worker.dsn)
    found = {r["trace_id"]: r for r in rows(
        store, "SELECT trace_id, project, tool_calls_json, prompt_tokens, completion_tokens, metadata FROM traces "
               "FINAL")}
    steps = {r["trace_id"] for r in rows(store, "SELECT trace_id FROM pipeline_events WHERE stage = 'step'")}
    store.close()
    client.close()
    return {"step": step[0]["trace_id"], "answer": answer[0]["trace_id"], "rival": rival[0]["trace_id"],
            "rows": found, "steps": steps}


@pytest.fixture(scope="module")
def stored(redis_server, tmp_path_factory):
    """The default project's step, then another project's answering call with the same conversation (its own key),
    then the default project's answering call (``step_rival_answer``)."""
    step, answer = run(time.time_ns(), "Where is order A-1001?")
    return step_rival_answer(redis_server.url, tmp_path_factory.mktemp("steps"), step, answer)


def test_the_worker_stores_the_run_with_the_usage_of_its_calls_and_counts_the_step(stored):
    row = stored["rows"][stored["answer"]]

    assert (row["project"], row["prompt_tokens"], row["completion_tokens"]) == ("default", 84, 34)
    assert dict(row["metadata"])[run_steps.CONTINUES_METADATA] == stored["step"]
    assert stored["step"] in stored["steps"] and stored["step"] not in stored["rows"]


def test_another_projects_call_sending_the_same_conversation_keeps_its_own_usage(stored):
    row = stored["rows"][stored["rival"]]

    assert (row["project"], row["prompt_tokens"], row["completion_tokens"]) == ("rival", 42, 17)
    assert run_steps.CONTINUES_METADATA not in dict(row["metadata"])
