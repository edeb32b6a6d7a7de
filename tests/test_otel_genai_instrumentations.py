"""The OpenTelemetry project's own GenAI instrumentations (``opentelemetry-instrumentation-genai-*`` on
``opentelemetry-util-genai``), as the corpus's ``openai_agents_otel/`` records them: hand-made spans in their shape for
the rules their recordings showed, each stated in the docstring of the module that applies it."""

from __future__ import annotations

from typing import Any

from vigil.schemas.spans import assembly

TRACE = "0" * 31 + "1"
SCOPE = "opentelemetry.instrumentation.genai.openai"  # the scope opentelemetry-instrumentation-genai-openai writes under


def span(span_id: str, parent: str | None, name: str, start: int, **attributes: Any) -> dict[str, Any]:
    return {"trace_id": TRACE, "span_id": span_id.rjust(16, "0"), "parent_id": parent and parent.rjust(16, "0"),
            "name": name, "start": start, "end": start + 10, "attributes": attributes, "scope": SCOPE}


def test_a_run_without_content_names_a_value_the_current_instrumentations_obey():
    """Content off (their default): a run's ``invoke_workflow`` / ``invoke_agent`` spans and ``chat`` spans with usage
    and no messages. The setting vigil names must turn content on for them: opentelemetry-util-genai reads only
    ``span_only`` / ``event_only`` / ``span_and_event`` and logs ``true is not a valid option … Defaulting to
    NO_CONTENT``, so ``=true`` (named first before) left the user's runs unscored after they followed it."""
    spans = [span("1", None, "invoke_workflow Agent workflow", 0,
                  **{"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "Agent workflow"}),
             span("2", "1", "invoke_agent support-bot", 1,
                  **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-bot"}),
             span("3", "2", "chat gpt-4o-mini", 2, **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                                      "gen_ai.usage.input_tokens": 42, "gen_ai.usage.output_tokens": 17})]

    [turn] = assembly(spans).turns

    assert turn["metadata"]["vigil.content"] == "missing"
    assert turn["metadata"]["vigil.content_setting"].startswith(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only")


def agent_run(finish_reason: str, said: str) -> list[dict[str, Any]]:
    """One ``agent.run`` as opentelemetry-instrumentation-genai-agno writes it: an ``invoke_agent`` span with the
    messages and no model call under it (it leaves those to the model client's instrumentation)."""
    import json

    return [span("1", None, "invoke_agent support_bot", 0, **{
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_bot",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Where is A-1?"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": said}],
                                               "finish_reason": finish_reason}])})]


def test_an_output_message_that_finished_in_error_is_a_failed_run_with_no_answer():
    """Agno ends a run whose model call failed with the error's text as its content and ``status=error``; the
    instrumentation writes it as the output message, its ``finish_reason`` ``error`` (the conventions'
    ``OutputMessage.finish_reason``), the span's status unset: the run failed, its error that text."""
    [turn] = assembly(agent_run("error", "The model server is overloaded")).turns

    assert turn["metadata"]["vigil.run"] == "failed" and turn["output"] == ""
    assert "The model server is overloaded" in turn["metadata"]["vigil.error"]


def test_an_answer_that_names_an_error_and_finished_normally_is_an_answer():
    [turn] = assembly(agent_run("stop", 'It says "error" on the label.')).turns

    assert turn["output"] == 'It says "error" on the label.' and "vigil.run" not in turn["metadata"]
