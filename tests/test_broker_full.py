"""A full broker on real parts: a real redis-server at ``maxmemory`` with ``noeviction`` refuses every write with an
OOM error. A real `vigil worker` must never take that for a clean stop (it used to exit with status 0): it keeps
running, says so loudly, retries, and scores the waiting turns once the broker has room again."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from vigil.schemas.broker import INGEST_QUEUE, JOURNAL, SCORE_QUEUE
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.store import connect

from tests.pipeline import (
    WorkerProcess,
    make_turn,
    ship,
    wait_drained,
    wait_while_alive,
)

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"
FULL = "REDIS IS OUT OF MEMORY"


@pytest.fixture
def full_redis():
    with EmbeddedRedis(options=("--maxmemory-policy", "noeviction")) as server:
        yield server


def test_a_worker_on_a_broker_out_of_memory_keeps_running_says_so_and_scores_the_turns_once_there_is_room(
        full_redis, tmp_path):
    client = redis.Redis.from_url(full_redis.url)
    turns = [make_turn(i) for i in range(3)]
    ship(full_redis.url, turns)
    client.config_set("maxmemory", 1)  # from now on every write is refused: "OOM command not allowed"
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("probe", "x")

    worker = WorkerProcess(full_redis.url, tmp_path / "vigil", CONFIG).start()
    try:
        wait_while_alive(worker, lambda: FULL in worker.output(), f"{FULL!r} in the worker's log")
        assert worker.process.poll() is None
        client.config_set("maxmemory", 0)
        wait_drained(full_redis.url, worker)
        assert worker.process.poll() is None, "the worker stopped"
    finally:
        client.config_set("maxmemory", 0)
        status = worker.stop()
    assert status == 0  # stopped by us, cleanly

    scored = {r[0] for r in connect(worker.dsn).query(
        "SELECT trace_id FROM scores FINAL WHERE monitor = 'relevancy'").result_rows}
    assert {t["trace_id"] for t in turns} <= scored



def test_work_the_broker_refused_while_full_resumes_once_memory_is_freed_not_after_the_visibility_timeout(
        full_redis, tmp_path):
    """Given a worker that was consuming when the broker filled up, and keeps reconnecting to it (each attempt pops a
    message, BRPOP being allowed, and is then refused the write that records it as unacked, so only the delivery
    journal still holds it), when memory is freed, then every turn is scored well inside the visibility timeout (an
    hour): the worker puts back what it had popped, instead of leaving it to the journal's hourly sweep."""
    client = redis.Redis.from_url(full_redis.url)
    turns = [make_turn(i) for i in range(60)]
    batches = [turns[start:start + 3] for start in range(0, len(turns), 3)]
    for batch in batches:
        ship(full_redis.url, batch)

    worker = WorkerProcess(full_redis.url, tmp_path / "vigil", CONFIG, VIGIL_VISIBILITY_TIMEOUT="3600").start()
    try:
        wait_while_alive(worker, lambda: client.llen(INGEST_QUEUE) < len(batches), "the worker to start consuming")
        client.config_set("maxmemory", client.info("memory")["used_memory"])  # full from here on
        wait_while_alive(worker, lambda: _popped(client) > 0, "a message popped and refused its unacked record")
        client.config_set("maxmemory", 0)
        wait_drained(full_redis.url, worker, timeout=120)  # before: stuck until the hourly sweep (3600 s)
    finally:
        client.config_set("maxmemory", 0)
        status = worker.stop()
    assert status == 0

    scored = {r[0] for r in connect(worker.dsn).query(
        "SELECT trace_id FROM scores FINAL WHERE monitor = 'relevancy'").result_rows}
    assert {t["trace_id"] for t in turns} <= scored


def _popped(client: redis.Redis) -> int:
    """Journaled messages in no queue and not unacked: popped, then refused the record that would find them."""
    waiting = sum(client.llen(q) for q in (INGEST_QUEUE, SCORE_QUEUE))
    return client.hlen(JOURNAL) - waiting - client.hlen("unacked")
