"""A tool message answers the tool call whose id it names (``vigil.schemas.steps``, ``vigil.worker.assembly.steps``):
an application traced only by OpenLIT's model client (LlamaIndex's workflow agent) sends each model call as a trace
of its own, and OpenLIT writes no assistant message that has no text, so the call sent a tool's result states only the
tool message (its call id and the result); the call that asked, another trace, states the tool's name, arguments and
id. The rule on hand-made spans in OpenLIT's shape, the kept calls on a real Redis with a second project naming the
same id, and the whole path through a real ``vigil intake`` and ``vigil worker``."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from vigil.schemas import steps as run_steps
from vigil.schemas.spans import assembly
from vigil.worker.assembly.steps import STEPS, continue_runs

from tests.test_run_steps import (
    SECOND,
    SYSTEM,
    step_rival_answer,
    swept,
    turns_of,
    usage,
    user,
)


def asked(*calls: tuple[str, str]) -> list[dict[str, Any]]:
    """An answer that only asks for tools, as OpenLIT writes it: one assistant message of ``tool_call`` parts."""
    return [{"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "tool_call", "id": call_id, "name": "lookup_order", "arguments": {"order_id": order}}
        for call_id, order in calls]}]


def told(call_id: str, text: str) -> dict[str, Any]:
    """The tool message the next call is sent: OpenLIT keeps its id and text, and drops the assistant message before
    it (no text)."""
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": text}]}


def chat(start: int, messages: list[dict[str, Any]], output: list[dict[str, Any]], *,
         usage: tuple[int, int] = (46, 0), service: str = "shop-agent") -> list[dict[str, Any]]:
    """One model call as OpenLIT's OpenAI instrumentation exports it with no span around it: a trace of its own."""
    return [{"trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16], "parent_id": None,
             "name": "chat gpt-4o-mini", "start": start, "end": start + SECOND // 2, "scope": "openlit",
             "resource": {"service.name": service},
             "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                            "gen_ai.usage.input_tokens": usage[0], "gen_ai.usage.output_tokens": usage[1],
                            "gen_ai.input.messages": json.dumps(messages),
                            "gen_ai.output.messages": json.dumps(output)}}]


def answered(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}]


def run(start: int, question: str, *calls: tuple[str, str], service: str = "shop-agent",
        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One run of LlamaIndex's agent through OpenLIT: the call that asks for ``calls`` ((id, order) each), then the
    call sent their results (tool messages only), which answers."""
    conversation = [SYSTEM, user(question)]
    calls = calls or (("call_1_37313", "A-1001"),)
    results = [told(call_id, f'{{"order_id": "{order}", "status": "shipped"}}') for call_id, order in calls]
    return (chat(start, conversation, asked(*calls), service=service),
            chat(start + SECOND, [*conversation, *results], answered("It has shipped."), usage=(94, 74),
                 service=service))


def named(turn: dict[str, Any]) -> list[tuple[str, dict[str, Any], str | None, str | None]]:
    return [(c["name"], c["arguments"], c.get("id"), c.get("result")) for c in turn.get("tool_calls") or ()]


def test_a_tool_message_is_given_the_name_and_arguments_of_the_call_whose_id_it_names_in_another_trace():
    step, answer = run(0, "Where is order A-1001?")
    alone = assembly(answer).turns[0]

    [turn] = turns_of([answer, step]).values()

    assert named(alone) == []  # the answering call alone states only the tool message
    assert named(turn) == [("lookup_order", {"order_id": "A-1001"}, "call_1_37313",
                            '{"order_id": "A-1001", "status": "shipped"}')]
    assert turn["metadata"][run_steps.CALLS_METADATA] == step[0]["trace_id"]
    assert usage(turn) == (140, 74)  # the asking call's usage is the run's
    assert turn["metadata"][run_steps.CONTINUES_METADATA] == step[0]["trace_id"]


def test_parallel_calls_of_one_step_are_given_in_the_order_their_tool_messages_were_sent_its_usage_once():
    step, answer = run(0, "Where are my orders?", ("call_2_b", "A-2"), ("call_1_a", "A-1"))
    messages = json.loads(answer[0]["attributes"]["gen_ai.input.messages"])
    messages[2:] = reversed(messages[2:])  # the results sent in the other order
    answer[0]["attributes"]["gen_ai.input.messages"] = json.dumps(messages)

    [turn] = turns_of([step, answer]).values()

    assert [(c[0], c[1], c[2]) for c in named(turn)] == [("lookup_order", {"order_id": "A-1"}, "call_1_a"),
                                                         ("lookup_order", {"order_id": "A-2"}, "call_2_b")]
    assert usage(turn) == (140, 74)


def test_a_tool_message_before_the_runs_user_words_is_an_earlier_runs_the_run_takes_only_its_own_calls():
    step, _ = run(0, "Where is order A-1001?")
    history = [SYSTEM, user("Where is order A-1001?"), told("call_1_37313", "shipped"),
               {"role": "assistant", "parts": [{"type": "text", "content": "It has shipped."}]},
               user("And A-1002?")]
    own_step = chat(10 * SECOND, history, asked(("call_9", "A-1002")), usage=(60, 0))
    follow_up = chat(11 * SECOND, [*history, told("call_9", "A-1002 shipped")], answered("Both shipped."),
                     usage=(70, 5))

    turns = turns_of([step, own_step, follow_up])

    assert named(turns[follow_up[0]["trace_id"]]) == [("lookup_order", {"order_id": "A-1002"}, "call_9",
                                                       "A-1002 shipped")]
    assert usage(turns[follow_up[0]["trace_id"]]) == (130, 5)  # its own step's, not the earlier run's


def test_a_call_asked_with_the_same_id_by_another_service_of_the_project_is_not_the_runs():
    own, answer = run(0, "Where is order A-1001?", ("call_1", "A-1001"))
    other = chat(SECOND // 2, [SYSTEM, user("Where is order A-1001?")], asked(("call_1", "B-7")), usage=(30, 0),
                 service="billing-agent")  # later, so the latest: it would be chosen were services not apart

    [turn] = turns_of([own, other, answer]).values()

    assert [c[:3] for c in named(turn)] == [("lookup_order", {"order_id": "A-1001"}, "call_1")]
    assert usage(turn) == (140, 74)


def test_a_call_is_one_runs_a_later_turn_naming_its_id_again_takes_nothing():
    step, answer = run(0, "Where is order A-1001?")
    replay = chat(5 * SECOND, json.loads(answer[0]["attributes"]["gen_ai.input.messages"]), answered("Shipped."))

    turns = turns_of([step, answer, replay])

    assert [c[2] for c in named(turns[answer[0]["trace_id"]])] == ["call_1_37313"]
    assert named(turns[replay[0]["trace_id"]]) == []


# -- the kept calls on a real Redis --------------------------------------------------------------------------------


def test_a_projects_kept_calls_are_its_own_another_project_naming_the_same_id_gets_none(client):
    step, answer = run(0, "Where is order A-1001?")
    continue_runs(client, swept("shop", step), keep_s=600, budget=2**20)
    rival = swept("rival", answer)  # the same tool message, its id among it, under another project's key

    continue_runs(client, rival, keep_s=600, budget=2**20)
    shop = swept("shop", answer)
    continue_runs(client, shop, keep_s=600, budget=2**20)

    assert named(rival[0].result.turns[0]) == [] and usage(rival[0].result.turns[0]) == (94, 74)
    assert named(shop[0].result.turns[0]) == [("lookup_order", {"order_id": "A-1001"}, "call_1_37313",
                                               '{"order_id": "A-1001", "status": "shipped"}')]
    assert usage(shop[0].result.turns[0]) == (140, 74)


def test_a_kept_call_is_given_to_one_turn_and_again_to_that_turn_assembled_again(client):
    step, answer = run(0, "Where is order A-1001?", ("call_1_a", "A-1"), ("call_2_b", "A-2"))
    first = swept("shop", step, answer)  # the step and its answer settle in one sweep
    continue_runs(client, first, keep_s=600, budget=2**20)
    again = swept("shop", answer)  # late spans: the trace assembled again
    replay = chat(5 * SECOND, json.loads(answer[0]["attributes"]["gen_ai.input.messages"]), answered("Shipped."))
    other = swept("shop", replay)

    continue_runs(client, again, keep_s=600, budget=2**20)
    continue_runs(client, other, keep_s=600, budget=2**20)

    assert named(first[1].result.turns[0]) == named(again[0].result.turns[0])
    assert [c[2] for c in named(again[0].result.turns[0])] == ["call_1_a", "call_2_b"]
    assert usage(first[1].result.turns[0]) == usage(again[0].result.turns[0]) == (140, 74)  # the step once
    assert named(other[0].result.turns[0]) == []
    kept = [json.loads(v) for k, v in client.hgetall(STEPS).items() if json.loads(k)[1] == "id"]
    assert sorted(e["taken"] for entries in kept for e in entries) == [answer[0]["trace_id"]] * 2


def test_a_stored_turn_assembled_again_takes_no_call_of_a_step_that_settled_after_it(client):
    from tests.test_one_call_two_traces import swept as swept_stored

    step, answer = run(0, "Where is order A-1001?")
    continue_runs(client, swept("shop", answer), keep_s=600, budget=2**20)  # stored with no call: its step not kept
    continue_runs(client, swept("shop", step), keep_s=600, budget=2**20)
    again = swept_stored("shop", answer, stored=True)  # late spans: the stored turn assembled again
    fresh = swept("shop", answer)  # had it not been stored, it would take the call

    continue_runs(client, again, keep_s=600, budget=2**20)
    continue_runs(client, fresh, keep_s=600, budget=2**20)

    assert named(again[0].result.turns[0]) == [] and usage(again[0].result.turns[0]) == (94, 74)
    assert [c[2] for c in named(fresh[0].result.turns[0])] == ["call_1_37313"]


# -- through a real intake and worker ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored(redis_server, tmp_path_factory):
    """The default project's asking call, then another project's answering call naming the same call id (its own
    key), then the default project's answering call (``step_rival_answer``)."""
    step, answer = run(time.time_ns(), "Where is order A-1001?")
    return step_rival_answer(redis_server.url, tmp_path_factory.mktemp("steps_by_id"), step, answer)


def test_the_worker_stores_the_run_with_the_call_its_tool_message_names_by_id(stored):
    row = stored["rows"][stored["answer"]]

    assert [(c["name"], c["arguments"], c["id"]) for c in json.loads(row["tool_calls_json"])] == [
        ("lookup_order", {"order_id": "A-1001"}, "call_1_37313")]
    assert (row["project"], row["prompt_tokens"], row["completion_tokens"]) == ("default", 140, 74)
    assert dict(row["metadata"])[run_steps.CALLS_METADATA] == stored["step"]


def test_another_projects_turn_naming_the_same_call_id_gets_no_call(stored):
    row = stored["rows"][stored["rival"]]

    assert row["project"] == "rival" and json.loads(row["tool_calls_json"]) == []
    assert (row["prompt_tokens"], row["completion_tokens"]) == (94, 74)
    assert run_steps.CALLS_METADATA not in dict(row["metadata"])
