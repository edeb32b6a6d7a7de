"""A turn whose message content was not captured (``metadata["vigil.content"] = "missing"``, set by assembly when no
LLM call carries text) has nothing a scorer could read: ingest records it unscored by every monitor that sampled it,
naming the setting, and queues no score task and stores no turn for one. On a real redis-server and a real `vigil
worker` that consumes only the ingest queue, so a score task queued would still be waiting."""

from __future__ import annotations

from pathlib import Path

import redis
from vigil.schemas.broker import INGEST_QUEUE, SCORE_QUEUE
from vigil.worker.pipeline.turn_store import TURN_PREFIX
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, make_turn, send, wait_while_alive

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def test_a_turn_without_content_is_recorded_unscored_at_ingest_and_queues_no_score_task(redis_url, tmp_path):
    silent = {**make_turn(1), "input": [{"role": "user", "content": ""}], "output": "",
              "metadata": {"vigil.content": "missing",
                           "vigil.content_setting": "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"}}
    spoken = make_turn(2)
    client = redis.Redis.from_url(redis_url)
    worker = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG).start("-Q", INGEST_QUEUE)
    try:
        send(redis_url, [silent, spoken])
        wait_while_alive(worker, lambda: client.llen(SCORE_QUEUE) >= 1 and not client.llen(INGEST_QUEUE)
                         and not client.hlen("unacked") and not int(client.get("vigil.write.bytes") or 0),
                         "the batch to be ingested and its rows written")
        queued, stored = client.llen(SCORE_QUEUE), len(list(client.scan_iter(f"{TURN_PREFIX}*")))
    finally:
        assert worker.stop() == 0

    assert (queued, stored) == (1, 1)  # the turn with content alone waits to be scored
    store = connect(worker.dsn)
    scores = store.query("SELECT monitor, status, reason FROM scores FINAL WHERE trace_id = {t:String}",
                         parameters={"t": silent["trace_id"]}).result_rows
    sampled = store.query("SELECT monitor FROM pipeline_events WHERE trace_id = {t:String} AND stage = 'sampled'",
                          parameters={"t": silent["trace_id"]}).result_rows
    assert "relevancy" in {m for m, in sampled}  # it samples every turn
    assert sorted(m for m, _, _ in scores) == sorted(m for m, in sampled)
    assert all(status == "unscored" and "CAPTURE_MESSAGE_CONTENT" in reason for _, status, reason in scores)
