"""An outage of Redis behind `vigil intake`: the intake answers 503 with Retry-After, the OpenTelemetry SDK's own
`OTLPSpanExporter` retries, and once Redis is back the spans go through to a real worker and chDB: nothing lost."""

from __future__ import annotations

import threading
import time

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.store import connect

from tests.pipeline import IntakeProcess, WorkerProcess, wait_drained
from tests.test_intake_pipeline import CONFIG, ids, turns_of


def test_with_redis_down_the_exporters_own_retry_delivers_the_spans_later_and_nothing_is_lost(tmp_path):
    recorded = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(recorded))
    with provider.get_tracer("agent").start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.prompt": "Do you ship to Norway?",
            "gen_ai.completion": "Yes, in five days."}) as span:
        pass
    trace_id, span_id = ids(span)

    server = EmbeddedRedis().start()
    intake = IntakeProcess(server.url, tmp_path, VIGIL_INTAKE_RETRY_AFTER_S="1").start()
    restarted, worker, outcome = None, None, []
    try:
        server.stop()
        exporter = OTLPSpanExporter(endpoint=f"{intake.url}/v1/traces", timeout=60)
        thread = threading.Thread(target=lambda: outcome.append(exporter.export(recorded.get_finished_spans())))
        thread.start()
        deadline = time.monotonic() + 60
        while "answered 503" not in intake.output():  # the exporter was refused at least once
            assert time.monotonic() < deadline, intake.output()
            time.sleep(0.05)
        restarted = EmbeddedRedis(port=server.port).start()
        thread.join(60)
        assert outcome == [SpanExportResult.SUCCESS]

        worker = WorkerProcess(server.url, tmp_path / "vigil", CONFIG, VIGIL_INTAKE_SETTLE_S="0.5").start()
        wait_drained(server.url, worker)
        assert worker.stop() == 0
    finally:
        intake.stop()
        if worker is not None:
            worker.stop()
        if restarted is not None:
            restarted.stop()
    store = connect(worker.dsn)
    [turn] = turns_of(store, trace_id)
    assert (turn["span_id"], turn["question"], turn["output"]) == (span_id, "Do you ship to Norway?",
                                                                   "Yes, in five days.")
