"""The write queue has a byte budget: while nothing can write the store, ingest and score tasks wait and go back on
their queues instead of piling rows up in Redis; the worker exports the queue's depth; when a writer comes back,
every row lands exactly once. A real `vigil worker`, a real Redis, chDB, the scripted judge, an OTLP collector."""

from __future__ import annotations

import time

import redis
import yaml
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from vigil.schemas.broker import INGEST_QUEUE, SCORE_QUEUE
from vigil.worker.sinks.write_queue import WRITE_QUEUE
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

BUDGET = 24_000  # bytes: a few batches' rows, far less than the 60 turns' rows
STATEMENTS = {"statements": ["Returns are accepted within 30 days."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers the question"}]}


def gauges(body: bytes) -> dict[str, int]:
    request = ExportMetricsServiceRequest.FromString(body)
    return {metric.name: int(metric.gauge.data_points[-1].as_int)
            for resource in request.resource_metrics for scope in resource.scope_metrics
            for metric in scope.metrics if metric.name.startswith("vigil.write_queue.") and metric.gauge.data_points}


def judge(body: dict) -> Reply:
    step = body["response_format"]["json_schema"]["name"]
    return Reply.json(STATEMENTS if step.endswith("preprocess") else VERDICTS)


def test_with_no_writer_the_write_queue_stops_at_its_budget_and_every_row_lands_once_when_one_returns(
        redis_url, tmp_path, otlp_collector):
    endpoint = otlp_collector.url

    def exports() -> list[bytes]:
        return otlp_collector.bodies("/v1/metrics")

    client = redis.Redis.from_url(redis_url)
    turns = [make_turn(i) for i in range(60)]
    with ScriptedJudge(judge) as server:
        config = tmp_path / "vigil.yaml"
        config.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "judge-model",
                        "api_key_env": "VIGIL_TEST_JUDGE_KEY", "rpm": 60000}],
            "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm", "reason": "template"}],
        }))
        for start in range(0, len(turns), 5):
            send(redis_url, turns[start:start + 5])
        env = {"VIGIL_TEST_JUDGE_KEY": "k", "VIGIL_WRITE_QUEUE_MAX_BYTES": str(BUDGET), "VIGIL_WRITE_WAIT": "1"}
        # The store cannot be written: this worker runs no writer.
        scoring = WorkerProcess(redis_url, tmp_path / "vigil", config, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
                                OTEL_METRIC_EXPORT_INTERVAL="300", **env).start("--no-writer", "-c", "4")
        try:
            deadline = time.monotonic() + 120
            while "write queue at its budget" not in scoring.output():
                assert scoring.process.poll() is None and time.monotonic() < deadline, scoring.output()[-3000:]
                queued = sum(len(entry) for entry in client.lrange(WRITE_QUEUE, 0, -1))
                assert queued <= BUDGET, f"the write queue grew to {queued} bytes past its budget of {BUDGET}"
                time.sleep(0.05)
            seen = len(exports())
            while len(exports()) < seen + 3:  # three more metric exports while the tasks keep trying
                assert scoring.process.poll() is None and time.monotonic() < deadline, scoring.output()[-3000:]
                queued = sum(len(entry) for entry in client.lrange(WRITE_QUEUE, 0, -1))
                assert queued <= BUDGET, f"the write queue grew to {queued} bytes past its budget of {BUDGET}"
                time.sleep(0.05)
        finally:
            stopped = scoring.stop()
        assert stopped == 0, scoring.output()[-3000:]

        entries = client.lrange(WRITE_QUEUE, 0, -1)
        assert 0 < sum(len(entry) for entry in entries) <= BUDGET
        assert client.llen(INGEST_QUEUE) + client.llen(SCORE_QUEUE) > 0, "the rest waits in the task queues"
        last = gauges(exports()[-1])  # the worker's final export, after its last push
        assert last == {"vigil.write_queue.entries": len(entries),
                        "vigil.write_queue.bytes": sum(len(entry) for entry in entries)}

        writing = WorkerProcess(redis_url, tmp_path / "vigil", config, **env).start()  # the store is back
        wait_drained(redis_url, writing, timeout=240)
        assert writing.stop() == 0

    store = connect(writing.dsn)
    ids = {t["trace_id"] for t in turns}
    for table in ("traces", "scores"):  # read without FINAL: inserted once, not merged into one
        rows = store.query(f"SELECT trace_id, count() FROM {table} GROUP BY trace_id").result_rows
        assert {trace_id for trace_id, _ in rows} == ids and {n for _, n in rows} == {1}, table
