"""GenAI content sent as OpenTelemetry log events, on real parts: the OTel SDK's `OTLPLogExporter` and
`OTLPSpanExporter` (HTTP/protobuf) -> a real `vigil intake` (`POST /v1/logs`, `POST /v1/traces`) -> Redis -> a real
`vigil worker` (attach the events to their spans, settle, assemble, ingest, score, write) -> chDB.

Current GenAI instrumentations may keep message content off the span and emit it as log records carrying the span's
trace and span ids: the older per-message events (`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.choice`)
or one `gen_ai.client.inference.operation.details` event per call. One scenario runs once for the module; each test
reads its own trace's turn back from chDB.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from vigil.worker.store import connect

from tests.pipeline import intake_and_worker, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


class Agent:
    """An instrumented agent whose spans say what was called and whose log events say what was said."""

    def __init__(self, intake_url: str) -> None:
        resource = Resource.create({"service.name": "helpdesk"})
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"{intake_url}/v1/traces")))
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(
            endpoint=f"{intake_url}/v1/logs")))
        self.tracer = self.tracer_provider.get_tracer("agent")
        self.logger = self.logger_provider.get_logger("agent")

    def event(self, name: str, **fields) -> None:
        """A log event in the current span's context (its trace and span ids)."""
        self.logger.emit(event_name=name, **fields)


def ids(span) -> tuple[str, str]:
    context = span.get_span_context()
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def older_events(agent: Agent) -> tuple[str, str]:
    with agent.tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat",
                                                                  "gen_ai.request.model": "m"}) as span:
        agent.event("gen_ai.system.message", body={"content": "Answer in one sentence."})
        agent.event("gen_ai.user.message", body={"content": "How long does a refund take?"})
        agent.event("gen_ai.choice", body={"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": "About five days."}})
    return ids(span)


def details_event(agent: Agent) -> tuple[str, str]:
    with agent.tracer.start_as_current_span("chat gpt-4o-mini", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}) as span:
        agent.event("gen_ai.client.inference.operation.details", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": [{"type": "text", "content": "Quote the policy."}],
            "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text",
                                                                  "content": "Can I change my delivery address?"}]}],
            "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text",
                                        "content": "Yes, until the parcel ships."}]}],
        })
    return ids(span)


def logs_only(agent: Agent) -> tuple[str, str]:
    """The log events of a span this exporter never sends (sampled out, or sent elsewhere)."""
    unseen = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    context = trace.set_span_in_context(NonRecordingSpan(unseen))
    agent.event("gen_ai.user.message", body={"content": "Do you ship to Norway?"}, context=context)
    agent.event("gen_ai.choice", body={"index": 0, "message": {"role": "assistant", "content": "Yes, in 5 days."}},
                context=context)
    return format(unseen.trace_id, "032x"), format(unseen.span_id, "016x")


SCENARIO = {"older_events": older_events, "details_event": details_event, "logs_only": logs_only}


@pytest.fixture(scope="module")
def scenario(redis_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("intake-logs")
    with intake_and_worker(redis_server.url, home, CONFIG, VIGIL_INTAKE_SETTLE_S="1") as (intake, worker):
        agent = Agent(intake.url)
        sent = {name: make(agent) for name, make in SCENARIO.items()}
        agent.logger_provider.shutdown()
        agent.tracer_provider.shutdown()
        wait_drained(redis_server.url, worker)
        assert redis.Redis.from_url(redis_server.url).zcard("vigil.intake.pending") == 0
    store = connect(worker.dsn)
    yield sent, store
    store.close()


def turn_of(store, trace_id: str) -> dict:
    result = store.query("SELECT span_id, agent, system, question, output, model, input_json FROM traces FINAL "
                         "WHERE trace_id = {t:String}", parameters={"t": trace_id})
    [row] = result.result_rows
    return dict(zip(result.column_names, row, strict=True))


def scores_of(store, trace_id: str) -> int:
    return store.query("SELECT count() FROM scores FINAL WHERE trace_id = {t:String}",
                       parameters={"t": trace_id}).result_rows[0][0]


def test_the_older_message_events_sent_as_logs_give_a_content_free_span_its_turn(scenario):
    sent, store = scenario
    trace_id, span_id = sent["older_events"]

    turn = turn_of(store, trace_id)

    assert turn["span_id"] == span_id
    assert (turn["system"], turn["question"], turn["output"]) == ("Answer in one sentence.",
                                                                  "How long does a refund take?", "About five days.")
    assert (turn["agent"], turn["model"]) == ("helpdesk", "m")
    assert scores_of(store, trace_id) > 0, "the turn was scored"


def test_an_inference_details_event_sent_as_a_log_gives_its_span_the_structured_messages(scenario):
    sent, store = scenario
    trace_id, span_id = sent["details_event"]

    turn = turn_of(store, trace_id)

    assert turn["span_id"] == span_id
    assert (turn["system"], turn["question"], turn["output"]) == ("Quote the policy.",
                                                                  "Can I change my delivery address?",
                                                                  "Yes, until the parcel ships.")
    assert [m["role"] for m in json.loads(turn["input_json"])] == ["user"]
    assert scores_of(store, trace_id) > 0


def test_a_trace_whose_span_never_arrived_becomes_a_turn_from_its_log_events_alone(scenario):
    sent, store = scenario
    trace_id, span_id = sent["logs_only"]

    turn = turn_of(store, trace_id)

    assert turn["span_id"] == span_id
    assert (turn["question"], turn["output"], turn["agent"]) == ("Do you ship to Norway?", "Yes, in 5 days.",
                                                                 "helpdesk")
