"""The existing-spans path: finished GenAI spans become turns, keeping their own trace and span ids."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from vigil.producers import GenAISpanProcessor, Monitor
from vigil.producers.otel import span_record
from vigil.schemas import Turn, conventions

from tests.test_sdk import make_monitor, turns  # noqa: F401 - the fixture is shared

SEMCONV = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.conversation.id": "conv-7",
    "gen_ai.agent.name": "billing-bot",
    "gen_ai.usage.input_tokens": 120,
    "gen_ai.usage.output_tokens": 30,
    "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Answer from the invoice only."}]),
    "gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "Why was I charged twice?"}]},
    ]),
    "gen_ai.output.messages": json.dumps([
        {"role": "assistant", "finish_reason": "stop",
         "parts": [{"type": "text", "content": "The second charge is a pending hold."},
                   {"type": "tool_call", "id": "c1", "name": "refund", "arguments": {"invoice": "A-1"}}]},
    ]),
    "gen_ai.retrieval.documents": json.dumps([{"id": "inv-A-1", "score": 0.9, "content": "Hold released in 3 days."}]),
}
LEGACY = {"gen_ai.system": "openai", "gen_ai.request.model": "m", "gen_ai.prompt": "What is 2+2?",
          "gen_ai.completion": "4", "gen_ai.usage.prompt_tokens": 5, "gen_ai.usage.completion_tokens": 1}
INDEXED = {"gen_ai.request.model": "m",
           "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be brief.",
           "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Capital of France?",
           "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Paris."}


def traced(monitor: Monitor, attributes: dict[str, Any]) -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(GenAISpanProcessor(monitor))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("agent").start_as_current_span("chat gpt-4o-mini", attributes=attributes) as span:
        pass
    return span, exporter


def test_a_semconv_chat_span_becomes_a_turn_with_the_spans_own_ids(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    span, exporter = traced(monitor, SEMCONV)
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    turn = Turn.model_validate(wire)
    context = span.get_span_context()
    assert (turn.trace_id, turn.span_id) == (format(context.trace_id, "032x"), format(context.span_id, "016x"))
    assert (turn.agent, turn.session_id, turn.model) == ("billing-bot", "conv-7", "gpt-4o-mini-2024-07-18")
    assert turn.system == "Answer from the invoice only."
    assert turn.question == "Why was I charged twice?"
    assert turn.output == "The second charge is a pending hold."
    assert [(call.name, call.arguments) for call in turn.tool_calls] == [("refund", {"invoice": "A-1"})]
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (120, 30)
    assert [(doc.id, doc.text) for doc in turn.contexts] == [("inv-A-1", "Hold released in 3 days.")]
    assert turn.metadata["operation"] == "chat" and turn.ended_at is not None
    assert len(exporter.get_finished_spans()) == 1  # the span itself still goes wherever it went


@pytest.mark.parametrize(
    ("attributes", "question", "output", "system"),
    [
        pytest.param(LEGACY, "What is 2+2?", "4", None, id="gen_ai.prompt and gen_ai.completion as text"),
        pytest.param(INDEXED, "Capital of France?", "Paris.", "Be brief.", id="indexed prompt and completion"),
        pytest.param({"gen_ai.prompt": json.dumps([{"role": "user", "content": "Hi"}]),
                      "gen_ai.completion": json.dumps([{"role": "assistant", "content": "Hello!"}])},
                     "Hi", "Hello!", None, id="gen_ai.prompt and gen_ai.completion as JSON messages"),
    ],
)
def test_older_genai_conventions_become_turns_too(redis_url, make_monitor, attributes, question, output, system):
    monitor = make_monitor(redis_url)

    traced(monitor, attributes)
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    turn = Turn.model_validate(wire)
    assert (turn.question, turn.output, turn.system) == (question, output, system)


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"http.request.method": "GET"}, id="not a GenAI span"),
        pytest.param({"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "e"}, id="GenAI without text"),
    ],
)
def test_spans_without_an_input_and_an_output_are_not_turns(redis_url, make_monitor, attributes):
    monitor = make_monitor(redis_url)

    traced(monitor, attributes)
    assert monitor.flush(timeout=10)

    assert turns(redis_url) == []
    assert monitor.counters().captured == 0


def test_an_llm_span_without_message_content_is_a_turn_that_names_the_setting_to_turn_it_on(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    traced(monitor, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": "[]"})
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    assert (wire["output"], wire["metadata"]["vigil.content"]) == ("", "missing")
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in wire["metadata"]["vigil.content_setting"]


def test_malformed_message_json_still_reaches_the_worker_as_text(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    traced(monitor, {"gen_ai.input.messages": "{not json", "gen_ai.output.messages": "also [not json"})
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    assert (wire["input"], wire["output"]) == ([{"role": "user", "content": "{not json"}], "also [not json")


def test_an_exception_recorded_by_a_span_that_ended_ok_is_no_failure_and_one_that_ended_in_error_is():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for status in (StatusCode.OK, StatusCode.ERROR):  # a pause raised on purpose (LangGraph's interrupt), a failure
        with provider.get_tracer("agent").start_as_current_span(
                "execute_tool lookup_order", attributes={"gen_ai.operation.name": "execute_tool"},
                record_exception=False, set_status_on_exception=False) as span:
            span.record_exception(RuntimeError("waiting for a human"))
            span.set_status(status)
    ended_ok, failed = (span_record(s) for s in exporter.get_finished_spans())

    assert conventions.error(ended_ok) is None
    assert conventions.error(failed) == "RuntimeError: waiting for a human"
