"""OpenTelemetry out, per score: the GenAI conventions' ``gen_ai.evaluation.result`` event, an evaluation span, and
the pipeline's metrics.

The event is what the conventions define: a log record named ``gen_ai.evaluation.result``, emitted through the
OpenTelemetry Logs API in the evaluated span's context (its trace id and span id), with
``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label``,
``gen_ai.evaluation.explanation``, ``gen_ai.response.id`` when the turn named one, ``error.type`` when the scorer
failed, and vigil's ``vigil.scorer.version`` and ``vigil.judge.model``. The evaluation span, a child of the evaluated
span, carries the same attributes (and the same event as a span event) for trace views that do not show logs.

Export goes over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the SDK reads the standard OTEL_*
variables, per signal too); tests pass in-memory exporters to ``Telemetry``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from vigil.schemas import Score, ScoreStatus

__all__ = ["EVALUATION_EVENT", "Telemetry", "parent_context"]

EVALUATION_EVENT = "gen_ai.evaluation.result"

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")


def parent_context(trace_id: str, span_id: str | None):
    """A context whose current span is the evaluated span (remote), or None when the ids are not OTel ids."""
    if not (_TRACE_ID.match(trace_id) and span_id and _SPAN_ID.match(span_id)):
        return None
    parent = SpanContext(trace_id=int(trace_id, 16), span_id=int(span_id, 16), is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


@dataclass
class Telemetry:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider

    @classmethod
    def create(cls, *, span_exporter: SpanExporter | None = None, metric_reader: MetricReader | None = None,
               log_exporter: LogRecordExporter | None = None, service_name: str = "vigil-worker") -> Telemetry:
        resource = Resource.create({"service.name": service_name})
        tracer_provider = TracerProvider(resource=resource)
        readers: list[MetricReader] = []
        otlp = bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
        if span_exporter is None and otlp:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )

            span_exporter = OTLPSpanExporter()
        if span_exporter is not None:
            tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        logger_provider = LoggerProvider(resource=resource)
        if log_exporter is None and (otlp or os.environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")):
            from opentelemetry.exporter.otlp.proto.http._log_exporter import (
                OTLPLogExporter,
            )

            log_exporter = OTLPLogExporter()
        if log_exporter is not None:
            logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
        if metric_reader is None and otlp:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )

            metric_reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        if metric_reader is not None:
            readers.append(metric_reader)
        meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        telemetry = cls(tracer_provider, meter_provider, logger_provider)
        telemetry._instruments()
        return telemetry

    def _instruments(self) -> None:
        self.tracer = self.tracer_provider.get_tracer("vigil")
        self.events = self.logger_provider.get_logger("vigil")
        meter = self.meter_provider.get_meter("vigil")
        self.pipeline = meter.create_counter("vigil.pipeline.turns", description="turns per monitor and stage")
        self.scores = meter.create_counter("vigil.scores", description="scores per monitor, scorer and status")
        self.score_value = meter.create_histogram("vigil.score.value", description="score values")
        self.judge_latency = meter.create_histogram("vigil.judge.latency", unit="ms",
                                                    description="judge call latency")
        self.judge_tokens = meter.create_counter("vigil.judge.tokens", description="judge tokens")
        self.judge_calls = meter.create_counter("vigil.judge.calls", description="judge calls")
        self.queue_lag = meter.create_histogram("vigil.queue.lag", unit="s",
                                                description="turn end to scoring start")
        self.dead_letters = meter.create_counter("vigil.dead_letters", description="dead-lettered messages")

    def observe_write_queue(self, read: Callable[[], tuple[int, int]]) -> None:
        """Gauges of the write queue (``vigil.write_queue.entries``, ``vigil.write_queue.bytes``, queued and in
        flight), read through ``read() -> (entries, bytes)`` at each collection."""
        def gauge(index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
            def observe(_: CallbackOptions) -> Iterable[Observation]:
                try:
                    return [Observation(read()[index])]
                except Exception:  # noqa: BLE001 (Redis unreachable: no value this time, never a failed export)
                    return []
            return observe

        meter = self.meter_provider.get_meter("vigil")
        meter.create_observable_gauge("vigil.write_queue.entries", callbacks=[gauge(0)],
                                      description="write queue entries waiting for the writer (queued, in flight)")
        meter.create_observable_gauge("vigil.write_queue.bytes", callbacks=[gauge(1)], unit="By",
                                      description="bytes waiting for the writer (VIGIL_WRITE_QUEUE_MAX_BYTES bounds it)")

    def stage(self, *, monitor: str, stage: str, count: int = 1) -> None:
        self.pipeline.add(count, {"monitor": monitor, "stage": stage})

    def emit_score(self, score: Score, *, start_ns: int, end_ns: int, calls_latency_ms: list[float],
                   lag_s: float | None, response_id: str | None = None) -> None:
        """The ``gen_ai.evaluation.result`` event and the evaluation span (both in the evaluated span's context, when
        the turn has OpenTelemetry ids), and the score's metrics."""
        attributes: dict[str, str | float | int] = {
            "gen_ai.evaluation.name": score.monitor,
            "vigil.scorer": score.scorer,
            "vigil.scorer.version": score.scorer_version,
            "vigil.score.status": str(score.status),
            "vigil.score_id": score.score_id,
            "vigil.trace_id": score.trace_id,
        }
        if score.judge_model:  # a user's check, tool policy or function calls no judge
            attributes.update({"gen_ai.request.model": score.judge_model,
                               "gen_ai.usage.input_tokens": score.prompt_tokens,
                               "gen_ai.usage.output_tokens": score.completion_tokens})
        if score.score is not None:
            attributes["gen_ai.evaluation.score.value"] = score.score
        if score.label:
            attributes["gen_ai.evaluation.score.label"] = score.label
        if score.reason:
            attributes["gen_ai.evaluation.explanation"] = score.reason[:4000]
        if score.status == ScoreStatus.FAILED:
            attributes["error.type"] = score.error_type or "unknown"
        evaluated = parent_context(score.trace_id, score.span_id or None)
        self.events.emit(event_name=EVALUATION_EVENT, context=evaluated, timestamp=end_ns,
                         severity_number=SeverityNumber.ERROR if "error.type" in attributes else SeverityNumber.INFO,
                         attributes=_event_attributes(score, attributes, response_id))
        span = self.tracer.start_span(f"evaluation {score.monitor}", context=evaluated, kind=SpanKind.INTERNAL,
                                      attributes=attributes, start_time=start_ns)
        span.add_event(EVALUATION_EVENT, attributes=attributes, timestamp=end_ns)
        if score.status == ScoreStatus.FAILED:
            span.set_status(trace.Status(trace.StatusCode.ERROR, score.error_type or ""))
        span.end(end_time=end_ns)

        labels = {"monitor": score.monitor, "scorer": score.scorer, "status": str(score.status)}
        self.scores.add(1, labels)
        self.stage(monitor=score.monitor, stage=str(score.status))
        if score.score is not None:
            self.score_value.record(score.score, {"monitor": score.monitor, "scorer": score.scorer})
        for latency in calls_latency_ms:
            self.judge_latency.record(latency, {"judge": score.judge, "model": score.judge_model})
        if score.judge:
            self.judge_calls.add(score.judge_calls, {"judge": score.judge})
            self.judge_tokens.add(score.prompt_tokens + score.completion_tokens, {"judge": score.judge})
        if lag_s is not None:
            self.queue_lag.record(max(lag_s, 0.0), {"monitor": score.monitor})

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def _event_attributes(score: Score, attributes: dict[str, str | float | int],
                      response_id: str | None) -> dict[str, str | float | int]:
    """The event's attributes: the conventions' evaluation attributes, then vigil's own."""
    event = {key: value for key, value in attributes.items() if key.startswith("gen_ai.evaluation.")}
    if response_id:
        event["gen_ai.response.id"] = response_id
    if "error.type" in attributes:
        event["error.type"] = attributes["error.type"]
    event.update({"vigil.scorer.version": score.scorer_version, "vigil.judge.model": score.judge_model,
                  "vigil.scorer": score.scorer, "vigil.score.status": str(score.status),
                  "vigil.score_id": score.score_id})
    return event
