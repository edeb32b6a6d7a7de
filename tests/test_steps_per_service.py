"""A run's steps are its application's (``vigil.schemas.steps``: the key is the conversation as one service sent it):
hand-made spans in LiteLLM's shape (``tests/test_run_steps.py``), each call a trace of its own, two services of one
project sending the same conversation; and the worker's bound on a key's steps on a real Redis."""

from __future__ import annotations

from typing import Any

from vigil.schemas.steps import CONTINUES_METADATA
from vigil.worker.assembly.steps import MAX_PER_KEY, continue_runs

from tests.test_run_steps import SECOND, run, swept, turns_of, usage


def sent_by(service: str, traces: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    for spans in traces:
        for span in spans:
            span["resource"] = {"service.name": service}
    return traces


def test_a_step_of_another_service_is_no_step_of_the_run():
    """The same scripted question through two applications: the one whose run left a step takes it, the other's
    answering call (whose own step was never exported) keeps its own usage."""
    theirs, _ = sent_by("billing-bot", run(0, "Where is order A-1001?"))
    _, ours = sent_by("support-bot", run(SECOND, "Where is order A-1001?"))

    turns = turns_of([theirs, ours])

    [turn] = turns.values()
    assert usage(turn) == (42, 17)


def test_the_steps_of_one_service_are_still_joined():
    step, answer = sent_by("support-bot", run(0, "Where is order A-1001?"))

    [turn] = turns_of([step, answer]).values()

    assert usage(turn) == (84, 34)


def test_another_services_steps_of_the_same_conversation_never_push_a_runs_own_out_of_the_bound(client):
    """More than ``MAX_PER_KEY`` later steps of one conversation from another application, kept in the same sweep as
    a run's own step: the run's turn takes its own step (before, they shared the key, the latest by start were kept
    and the run's own dropped, and the turn took another application's)."""
    question = "Where is order A-1001?"
    step, answer = sent_by("support-bot", run(0, question))
    others = [sent_by("billing-bot", run((n + 1) * SECOND // 100, question))[0] for n in range(MAX_PER_KEY + 1)]
    traces = swept("shop", step, *others, answer)

    continue_runs(client, traces, keep_s=600, budget=2**20)

    [turn] = traces[-1].result.turns
    assert usage(turn) == (84, 34)
    assert turn["metadata"][CONTINUES_METADATA] == step[0]["trace_id"]  # its own step, not another's
