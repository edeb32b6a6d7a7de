"""Google ADK through openinference-instrumentation-google-adk, as the corpus's ``google_adk_openinference/`` records
it: hand-made spans in its shape for the rules its recordings showed, each stated in the docstring of the module that
applies it (``schemas/conventions/_parse.py``)."""

from __future__ import annotations

import json
from typing import Any

from vigil.schemas.spans import assembly

TRACE = "0" * 31 + "1"
QUESTION = "What is the status of order A-1001?"
ORDER = json.dumps({"order_id": "A-1001", "status": "shipped"})
ERROR = {"code": 2, "message": "InternalServerError: The model server is overloaded"}


def span(span_id: str, parent: str | None, name: str, start: int, **attributes: Any) -> dict[str, Any]:
    return {"trace_id": TRACE, "span_id": span_id.rjust(16, "0"), "parent_id": parent and parent.rjust(16, "0"),
            "name": name, "start": start, "end": start + 10, "attributes": attributes}


def run(question_said: dict[str, Any]) -> list[dict[str, Any]]:
    """``Runner.run_async`` as the instrumentation states it: its CHAIN span's input the call's keyword arguments."""
    return [span("1", None, "invocation [shop]", 0, **{
        "openinference.span.kind": "CHAIN", "input.mime_type": "application/json",
        "input.value": json.dumps({"user_id": "u1", "session_id": "s1", "invocation_id": None, **question_said,
                                   "state_delta": None, "run_config": {"streaming_mode": "NONE"}})}),
            span("2", "1", "agent_run [support_bot]", 1, **{"openinference.span.kind": "AGENT",
                                                             "agent.name": "support_bot"})]


def test_a_keyword_argument_that_is_a_message_is_the_users_words_of_a_run_whose_model_call_failed():
    """A failed model call leaves the LLM span without messages (the instrumentation writes them from ADK's
    ``trace_call_llm``, which a raising model never reaches): the only statement of the question is the run's
    ``new_message``, a ``Content`` (``role`` and ``parts``) among ``Runner.run_async``'s keyword arguments."""
    spans = run({"new_message": {"parts": [{"text": QUESTION}], "role": "user"}})
    spans.append(span("3", "2", "invoke_agent support_bot", 2, **{  # ADK's own span, where the model call is recorded
        "gen_ai.operation.name": "generate_content", "gen_ai.agent.name": "support_bot", "gen_ai.request.model": "m"}))
    for s in spans:
        s["status"] = ERROR

    [turn] = assembly(spans).turns

    assert turn["metadata"]["vigil.run"] == "failed"
    assert turn["input"][-1]["content"] == QUESTION


def test_keyword_arguments_with_no_message_among_them_still_say_nothing():
    """The rule reads a message, not any object: an argument without a role (``state_delta``, a run config) is a
    framework's state and the run's question stays the LLM call's."""
    spans = run({"new_message": None, "state_delta": {"content": {"x": 1}}})
    for s in spans:
        s["status"] = ERROR

    [turn] = assembly(spans).turns

    assert [m["content"] for m in turn["input"]] == [""]


def test_a_tool_result_stated_as_the_response_part_sent_back_to_the_model_is_what_it_carries():
    """The TOOL span's ``output.value`` is ADK's ``FunctionResponse`` (``id``, ``name``, ``response``), its ``response``
    ADK's ``{"result": <the function's return>}``: the result is the function's return."""
    spans = run({"new_message": {"parts": [{"text": QUESTION}], "role": "user"}})
    spans.append(span("3", "2", "invoke_agent support_bot", 2, **{
        "openinference.span.kind": "LLM", "llm.model_name": "m",
        "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": QUESTION,
        "llm.output_messages.0.message.role": "model",
        "llm.output_messages.0.message.contents.0.message_content.type": "text",
        "llm.output_messages.0.message.contents.0.message_content.text": "It has shipped."}))
    spans.append(span("4", "3", "execute_tool lookup_order", 3, **{
        "openinference.span.kind": "TOOL", "tool.name": "lookup_order", "tool.id": "call_1",
        "input.value": json.dumps({"order_id": "A-1001"}), "input.mime_type": "application/json",
        "output.value": json.dumps({"id": "call_1", "name": "lookup_order", "response": {"result": ORDER}}),
        "output.mime_type": "application/json"}))

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", {"order_id": "A-1001"}, ORDER)]
