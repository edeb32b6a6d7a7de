"""Every score becomes an OpenTelemetry span parented to the evaluated span, with the GenAI evaluation attributes."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from vigil.schemas import Score, ScoreStatus
from vigil.worker.sinks.otel import Telemetry

from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def a_score(**overrides) -> Score:
    fields = dict(score_id="s1", trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331",
                  project="shop", agent="support-bot", environment="prod", monitor="relevancy",
                  scorer="answer_relevancy", scorer_version="1", status=ScoreStatus.SCORED, score=0.75,
                  label="good", reason="3 of 4 statements answer the question", judge="offline",
                  judge_model="baseline", judge_calls=3, prompt_tokens=900, completion_tokens=60,
                  trace_time=datetime.now(UTC))
    return Score(**(fields | overrides))


@pytest.fixture
def telemetry():
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    t = Telemetry.create(span_exporter=spans, metric_reader=metrics)
    yield t, spans, metrics
    t.shutdown()


def emit(t: Telemetry, score: Score) -> None:
    now = time.time_ns()
    t.emit_score(score, start_ns=now - 1_000_000, end_ns=now, calls_latency_ms=[12.0, 30.0], lag_s=0.5)
    t.tracer_provider.force_flush()


def test_a_score_span_is_a_child_of_the_evaluated_span_with_the_genai_evaluation_attributes(telemetry):
    t, spans, _ = telemetry
    emit(t, a_score())
    (span,) = spans.get_finished_spans()
    assert span.context.trace_id == int("0af7651916cd43dd8448eb211c80319c", 16)
    assert span.parent.span_id == int("b7ad6b7169203331", 16) and span.parent.is_remote
    assert span.attributes["gen_ai.evaluation.name"] == "relevancy"
    assert span.attributes["gen_ai.evaluation.score.value"] == 0.75
    assert span.attributes["gen_ai.evaluation.score.label"] == "good"
    assert span.attributes["gen_ai.evaluation.explanation"] == "3 of 4 statements answer the question"
    assert "error.type" not in span.attributes
    assert [e.name for e in span.events] == ["gen_ai.evaluation.result"]


def test_a_failed_score_carries_its_error_type_and_an_error_status(telemetry):
    t, spans, _ = telemetry
    emit(t, a_score(status=ScoreStatus.FAILED, score=None, label="", reason="", error_type="timeout"))
    (span,) = spans.get_finished_spans()
    assert span.attributes["error.type"] == "timeout"
    assert "gen_ai.evaluation.score.value" not in span.attributes
    assert span.status.status_code.name == "ERROR"


def test_a_turn_without_otel_ids_gets_a_root_evaluation_span(telemetry):
    t, spans, _ = telemetry
    emit(t, a_score(trace_id="order-42", span_id=""))
    (span,) = spans.get_finished_spans()
    assert span.parent is None


def test_scores_and_judge_latency_are_counted_per_monitor_and_status(telemetry):
    t, _, metrics = telemetry
    emit(t, a_score())
    emit(t, a_score(status=ScoreStatus.UNSCORED, score=None))
    data = metrics.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
    by_name = {m.name: m for m in data}
    statuses = {p.attributes["status"]: p.value for p in by_name["vigil.scores"].data.data_points}
    assert statuses == {"scored": 1, "unscored": 1}
    (latency,) = by_name["vigil.judge.latency"].data.data_points
    assert latency.count == 4 and latency.sum == 84.0


class _Collector(BaseHTTPRequestHandler):
    spans: list = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    type(self).spans.extend(scope.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_the_worker_exports_evaluation_spans_over_otlp_parented_to_the_agents_spans(redis_url, tmp_path):
    """A real `vigil worker` process with OTEL_EXPORTER_OTLP_ENDPOINT set, and a local OTLP/HTTP collector."""
    _Collector.spans = []
    collector = HTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    turns = [make_turn(i, agent="travel-assistant") for i in range(5)]
    send(redis_url, turns)
    worker = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG,
                           OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.server_address[1]}",
                           OTEL_BSP_SCHEDULE_DELAY="100", OTEL_METRIC_EXPORT_INTERVAL="500").start()
    try:
        wait_drained(redis_url, worker)
        deadline = time.monotonic() + 30
        while len(_Collector.spans) < len(turns) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.stop()
        collector.shutdown()
    parents = {(span.trace_id.hex(), span.parent_span_id.hex()) for span in _Collector.spans}
    assert parents == {(t["trace_id"], t["span_id"]) for t in turns}
    names = {a.key for span in _Collector.spans for a in span.attributes}
    assert {"gen_ai.evaluation.name", "gen_ai.evaluation.score.value", "gen_ai.evaluation.explanation"} <= names


@pytest.fixture
def events():
    """Telemetry whose log records (the spec's events) land in memory."""
    logs = InMemoryLogRecordExporter()
    t = Telemetry.create(span_exporter=InMemorySpanExporter(), metric_reader=InMemoryMetricReader(), log_exporter=logs)
    yield t, logs
    t.shutdown()


def emitted(t: Telemetry, logs: InMemoryLogRecordExporter, score: Score, **kwargs) -> list:
    now = time.time_ns()
    t.emit_score(score, start_ns=now - 1_000_000, end_ns=now, calls_latency_ms=[], lag_s=None, **kwargs)
    t.logger_provider.force_flush()
    return [r.log_record for r in logs.get_finished_logs()]


def test_each_score_is_a_gen_ai_evaluation_result_event_in_the_evaluated_spans_context(events):
    t, logs = events

    [record] = emitted(t, logs, a_score(), response_id="chatcmpl-123")

    assert record.event_name == "gen_ai.evaluation.result"
    assert (record.trace_id, record.span_id) == (int("0af7651916cd43dd8448eb211c80319c", 16),
                                                 int("b7ad6b7169203331", 16))
    attributes = dict(record.attributes)
    assert {key: attributes[key] for key in (
        "gen_ai.evaluation.name", "gen_ai.evaluation.score.value", "gen_ai.evaluation.score.label",
        "gen_ai.evaluation.explanation", "gen_ai.response.id", "vigil.scorer.version", "vigil.judge.model")} == {
        "gen_ai.evaluation.name": "relevancy", "gen_ai.evaluation.score.value": 0.75,
        "gen_ai.evaluation.score.label": "good", "gen_ai.evaluation.explanation": "3 of 4 statements answer the question",
        "gen_ai.response.id": "chatcmpl-123", "vigil.scorer.version": "1", "vigil.judge.model": "baseline"}
    assert "error.type" not in attributes


def test_a_failed_scores_event_carries_its_error_type(events):
    t, logs = events

    [record] = emitted(t, logs, a_score(status=ScoreStatus.FAILED, score=None, label="", reason="",
                                        error_type="timeout"))

    assert record.attributes["error.type"] == "timeout"
    assert "gen_ai.evaluation.score.value" not in record.attributes
    assert "gen_ai.response.id" not in record.attributes
