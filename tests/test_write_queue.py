"""The write queue's byte budget on a real Redis: a push that does not fit is refused whole, the writer gives back
exactly the bytes it removes, and a count left wrong is set right once everything is empty."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import redis
from vigil.schemas import Score, ScoreStatus
from vigil.worker.sinks.write_queue import (
    WRITE_BYTES,
    WRITE_QUEUE,
    WriteQueueFull,
    depth,
    inflight_key,
    push,
    push_within,
    wait_for_room,
)
from vigil.worker.sinks.writer import Writer


def scores(*trace_ids: str) -> list[tuple[str, list[Score]]]:
    return [("scores", [Score(score_id=f"s-{t}", trace_id=t, project="p", agent="a", environment="prod",
                              monitor="m", scorer="answer_relevancy", scorer_version="1",
                              status=ScoreStatus.SCORED, score=0.5, trace_time=datetime.now(UTC))
                        for t in trace_ids])]


def queued_bytes(client: redis.Redis) -> int:
    return sum(len(entry) for entry in client.lrange(WRITE_QUEUE, 0, -1))


def test_the_byte_count_is_the_bytes_of_the_entries_queued(redis_url):
    client = redis.Redis.from_url(redis_url)
    push(client, scores("a"))
    push(client, scores("b", "c"))
    assert depth(client) == (2, queued_bytes(client))


def test_a_push_that_would_pass_the_budget_is_refused_whole_and_pushes_nothing(redis_url):
    client = redis.Redis.from_url(redis_url)
    push(client, scores("a"))
    budget = queued_bytes(client) + 10  # room for less than one more entry

    with pytest.raises(WriteQueueFull):
        push(client, [*scores("b"), ("judge_calls", [])], budget=budget)
    with pytest.raises(WriteQueueFull):
        push_within(client, scores("c"), budget=budget, wait_s=0.3, poll_s=0.05)
    assert client.llen(WRITE_QUEUE) == 1 and depth(client).bytes == queued_bytes(client)


def test_an_entry_larger_than_the_whole_budget_still_goes_onto_an_empty_queue(redis_url):
    client = redis.Redis.from_url(redis_url)
    push(client, scores("a", "b", "c"), budget=10)
    assert client.llen(WRITE_QUEUE) == 1


def test_waiting_for_room_gives_up_at_once_when_the_process_is_stopping(redis_url):
    client = redis.Redis.from_url(redis_url)
    push(client, scores("a"))
    with pytest.raises(WriteQueueFull):
        wait_for_room(client, budget=1, wait_s=3600, stopping=lambda: True)
    wait_for_room(client, budget=queued_bytes(client) + 1, wait_s=0)  # room: returns


def test_the_writer_gives_back_exactly_the_bytes_of_the_entries_it_inserted(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    push(client, scores("a"))
    push(client, scores("b"))
    writer = Writer(client, store, writer_id="w", batch_rows=1, batch_age_s=0.1)
    writer.beat()
    client.lmove(WRITE_QUEUE, inflight_key("w"), "LEFT", "RIGHT")  # "a" in flight, "b" still queued

    writer.flush_inflight()

    assert depth(client) == (1, queued_bytes(client))
    assert json.loads(client.lindex(WRITE_QUEUE, 0))["rows"][0]["trace_id"] == "b"


def test_a_byte_count_left_wrong_is_set_to_zero_once_the_queue_and_every_list_are_empty(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    client.set(WRITE_BYTES, 12345)  # e.g. entries an older writer removed without counting
    Writer(client, store, writer_id="w", batch_age_s=0.05).run_once()
    assert depth(client) == (0, 0)
