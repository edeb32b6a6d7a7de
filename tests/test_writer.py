"""The batching writer: what ClickHouse refuses is dead-lettered without blocking the batch, and what a vanished
writer left in flight is taken back and written."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import redis

from schemas import JudgeCall, Score, ScoreStatus
from schemas.rows import JudgeCallRow
from worker.sinks.write_queue import WRITE_QUEUE, inflight_key, owner_key, push
from worker.sinks.writer import Writer


def a_score(trace_id: str) -> Score:
    return Score(score_id=f"s-{trace_id}", trace_id=trace_id, project="p", agent="a", environment="prod",
                 monitor="m", scorer="answer_relevancy", scorer_version="1", status=ScoreStatus.SCORED, score=0.5,
                 trace_time=datetime.now(UTC))


def test_a_row_clickhouse_refuses_is_dead_lettered_and_the_rest_of_the_batch_is_written(redis_url, store):
    """A token count beyond UInt32 passes the row model but not the column: only that row goes to dead letters."""
    client = redis.Redis.from_url(redis_url)
    score = a_score("t1")
    good = JudgeCallRow.of(JudgeCall(step="analyze", model="m", prompt_tokens=10), 0, score=score)
    bad = JudgeCallRow.of(JudgeCall(step="reason", model="m", prompt_tokens=5_000_000_000), 1, score=score)
    push(client, [("scores", [score]), ("judge_calls", [good, bad])])
    writer = Writer(client, store, writer_id="w1", batch_age_s=0.1)

    writer.run_once()

    assert store.query("SELECT count() FROM scores").result_rows == [(1,)]
    assert store.query("SELECT step FROM judge_calls").result_rows == [("analyze",)]
    (reason, error_type), = store.query("SELECT reason, error_type FROM dead_letters").result_rows
    assert error_type == "refused_row" and "judge_calls row refused by ClickHouse" in reason
    assert client.llen(inflight_key("w1")) == 0 and client.llen(WRITE_QUEUE) == 0


def test_an_in_flight_list_whose_writer_has_no_heartbeat_is_taken_back_and_written(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    entry = json.dumps({"table": "scores", "rows": [a_score("t2").model_dump(mode="json")]})
    client.rpush(inflight_key("vanished-pod-7f9c"), entry)  # left by a writer killed mid-batch, never restarted
    client.rpush(inflight_key("live-writer"), entry)
    client.set(owner_key("live-writer"), "alive", ex=60)
    writer = Writer(client, store, writer_id="w2", batch_age_s=0.1)

    writer.run_once()

    assert store.query("SELECT trace_id FROM scores").result_rows == [("t2",)]
    assert client.exists(inflight_key("vanished-pod-7f9c")) == 0
    assert client.llen(inflight_key("live-writer")) == 1, "a live writer's batch is its own"


def test_a_writer_holds_its_id_with_a_heartbeat_and_gives_it_up_when_it_stops(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    writer = Writer(client, store, writer_id="w3", batch_age_s=0.05)
    writer.claim()
    assert 0 < client.ttl(owner_key("w3")) <= writer.heartbeat_s
    writer.start().stop()
    assert client.exists(owner_key("w3")) == 0


def test_a_second_writer_with_a_live_writers_id_waits_instead_of_sharing_its_list(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    client.set(owner_key("w4"), "another process", ex=60)
    writer = Writer(client, store, writer_id="w4", batch_age_s=0.05)
    writer._stop.set()  # give up at the first wait instead of waiting for the other writer
    writer.claim()
    assert client.get(owner_key("w4")) == b"another process"


def test_a_later_failed_run_of_a_score_never_replaces_the_scored_row(redis_url, store):
    """A redelivered turn scored again while the judge is down fails; the good row stays the one FINAL reads."""
    client = redis.Redis.from_url(redis_url)
    scored = a_score("t5")
    failed = scored.model_copy(update={"status": ScoreStatus.FAILED, "score": None, "error_type": "timeout",
                                       "scored_at": datetime.now(UTC)})
    push(client, [("scores", [scored])])
    Writer(client, store, writer_id="w5", batch_age_s=0.05).run_once()
    push(client, [("scores", [failed])])
    Writer(client, store, writer_id="w5", batch_age_s=0.05).run_once()

    assert store.query("SELECT status, score FROM scores FINAL").result_rows == [("scored", 0.5)]
    store.command("OPTIMIZE TABLE scores FINAL")
    assert store.query("SELECT status FROM scores").result_rows == [("scored",)]
