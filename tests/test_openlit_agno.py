"""Agno through OpenLIT, as the corpus's ``agno_openlit/`` records it: hand-made spans in its shape for the rules its
recordings showed (``schemas/spans.py``, *a failed run is a turn*)."""

from __future__ import annotations

import json
from typing import Any

from vigil.schemas.spans import assembly

TRACE = "0" * 31 + "1"
QUESTION = "What is the status of order A-1001?"
OVERLOADED = "The model server is overloaded"
RAISED = f"openai.InternalServerError: Error code: 500 - {OVERLOADED}"


def span(span_id: str, parent: str | None, name: str, start: int, **attributes: Any) -> dict[str, Any]:
    return {"trace_id": TRACE, "span_id": span_id.rjust(16, "0"), "parent_id": parent and parent.rjust(16, "0"),
            "name": name, "start": start, "end": start + 10, "attributes": attributes}


def messages(role: str, said: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": said}]}])


def agno_run() -> list[dict[str, Any]]:
    """``agent.run`` whose model call failed: Agno catches the error and returns a ``RunOutput`` with ``status=error``
    and the error's text as its content; OpenLIT's ``invoke_agent`` span ends OK with that text as its output, the
    ``chat`` span under it failed, and so did the HTTP client's span under that (a status with no message)."""
    agent = span("1", None, "invoke_agent support_bot", 0, **{
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_bot",
        "gen_ai.input.messages": messages("user", QUESTION), "gen_ai.output.messages": messages("assistant", OVERLOADED)})
    agent["status"] = {"code": 1}
    chat = span("2", "1", "chat gpt-4o-mini", 1, **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                                    "gen_ai.input.messages": messages("user", QUESTION)})
    chat["status"] = {"code": 2, "message": RAISED}
    post = span("3", "2", "POST", 2, **{"http.method": "POST", "http.url": "http://model/v1/chat/completions"})
    post["status"] = {"code": 2}
    post["end"] = chat["end"] - 1
    return [agent, chat, post]


def test_a_run_whose_last_model_call_failed_and_none_answered_failed_whatever_its_roots_status():
    """No model said the agent span's output: it is the failure's text, so the run failed, with no answer."""
    [turn] = assembly(agno_run()).turns

    assert turn["metadata"]["vigil.run"] == "failed"
    assert turn["output"] == ""
    assert turn["input"][-1]["content"] == QUESTION


def test_the_error_of_a_run_whose_root_states_none_is_the_one_that_says_why():
    """The HTTP client's span failed last (it ends inside the model call's) and says only that it failed: the run's
    error is the model call's, which names why."""
    [turn] = assembly(agno_run()).turns

    assert turn["metadata"]["vigil.error"] == RAISED


def test_a_root_that_states_an_answer_no_call_gave_is_kept_when_the_last_call_did_not_fail():
    """Content off with its answer on the root: the calls carry no text and did not fail, the root's answer stands
    (recorded unscored, content missing): only a failed last call makes the root's text the failure's."""
    spans = agno_run()
    del spans[1]["attributes"]["gen_ai.input.messages"]
    spans[1]["status"] = {"code": 1}
    spans = spans[:2]
    spans[0]["attributes"]["gen_ai.output.messages"] = messages("assistant", "It has shipped.")

    [turn] = assembly(spans).turns

    assert turn["output"] == "It has shipped." and "vigil.run" not in turn["metadata"]
