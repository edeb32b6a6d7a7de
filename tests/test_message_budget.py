"""Memory bounded in bytes per message (VIGIL_MAX_MESSAGE_BYTES), on real parts: a real `vigil worker` and a real
Redis. A message over the budget is never decoded (decoding multiplied a 101 MB message into +456 MB of worker
memory): it becomes a dead letter naming its size and the limit, is acked, and the turns behind it are scored. The
intake refuses to publish what the workers would refuse (413), and the SDK sends an over-budget batch in parts."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis
from vigil.producers import Monitor
from vigil.producers._sender import CelerySender
from vigil.schemas.broker import INGEST_QUEUE, JOURNAL, MIN_MESSAGE_BYTES
from vigil.worker.store import connect

from tests.pipeline import IntakeProcess, WorkerProcess, make_turn, send, wait_drained
from tests.test_sdk import turns as queued_turns

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"
LIMIT = MIN_MESSAGE_BYTES  # the smallest budget the settings accept keeps the messages here small


def big_turn(i: int, chars: int) -> dict:
    """A valid turn carrying ``chars`` characters of metadata-free output (the worker truncates, not refuses)."""
    return {**make_turn(i), "output": "x" * chars}


def test_a_message_over_the_budget_is_dead_lettered_unread_with_its_size_and_the_turns_behind_it_are_scored(
        redis_url, tmp_path):
    client = redis.Redis.from_url(redis_url)
    # Published as the SDK publishes (journaled), by a sender that does not know the workers' budget.
    oversize = [big_turn(i, 1_000_000) for i in range(6)]
    CelerySender(redis_url, max_message_bytes=2**40).send(oversize)
    [size] = [len(item) for item in client.lrange(INGEST_QUEUE, 0, -1)]
    assert size > LIMIT and client.hlen(JOURNAL) == 1
    good = [make_turn(100 + i) for i in range(3)]
    send(redis_url, good)

    worker = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG, VIGIL_MAX_MESSAGE_BYTES=str(LIMIT)).start()
    try:
        wait_drained(redis_url, worker)
        assert worker.process.poll() is None, "the worker stopped"
    finally:
        assert worker.stop() == 0

    store = connect(worker.dsn)
    dead = store.query("SELECT queue, reason, error_type, length(payload) FROM dead_letters FINAL").result_rows
    assert [(q, r, kind) for q, r, kind, _ in dead] == [
        (INGEST_QUEUE, f"message is {size} bytes, over the limit of {LIMIT} bytes (VIGIL_MAX_MESSAGE_BYTES)",
         "undeliverable_message")]
    assert dead[0][3] <= 100_000  # the payload kept is the message's head, as for every dead letter
    scored = {r[0] for r in store.query("SELECT trace_id FROM scores FINAL WHERE monitor = 'relevancy'").result_rows}
    assert {t["trace_id"] for t in good} <= scored
    assert not {t["trace_id"] for t in oversize} & scored
    assert client.hlen(JOURNAL) == 0, "the oversize message's journal entry would bring it back"
    assert client.llen(INGEST_QUEUE) == 0


def test_the_sdk_sends_a_batch_over_the_budget_in_parts_each_within_it_and_loses_none(redis_url, tmp_path):
    monitor = Monitor(redis_url, agent="big", spool_path=tmp_path / "spool.jsonl", max_message_bytes=LIMIT,
                      batch_size=64)
    turns = [big_turn(i, 1_000_000) for i in range(8)]  # ~11 MB as one message
    for turn in turns:
        assert monitor.capture(turn)
    assert monitor.flush(timeout=60)
    counters = monitor.counters()
    monitor.shutdown()

    items = redis.Redis.from_url(redis_url).lrange(INGEST_QUEUE, 0, -1)
    assert len(items) >= 2 and all(len(item) <= LIMIT for item in items)
    assert counters.shipped == len(turns) and counters.dropped_total == 0
    assert sorted(t["trace_id"] for t in queued_turns(redis_url)) == sorted(t["trace_id"] for t in turns)


def test_the_intake_answers_413_naming_the_budget_for_a_batch_whose_message_would_be_over_it(redis_url, tmp_path):
    intake = IntakeProcess(redis_url, tmp_path, VIGIL_MAX_MESSAGE_BYTES=str(LIMIT),
                           VIGIL_INTAKE_MAX_BYTES=str(4 * LIMIT)).start()
    try:
        body = json.dumps([big_turn(i, 1_000_000) for i in range(6)]).encode()
        assert LIMIT < len(body) * 4 / 3 and len(body) < 4 * LIMIT  # read whole, but over budget once published
        request = urllib.request.Request(f"{intake.url}/v1/turns", data=body,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 413
        answer = json.loads(refused.value.read())
        assert f"over the limit of {LIMIT} bytes (VIGIL_MAX_MESSAGE_BYTES)" in answer["message"]
        assert redis.Redis.from_url(redis_url).llen(INGEST_QUEUE) == 0
    finally:
        intake.stop()


def test_the_intakes_body_limit_defaults_to_the_message_budget(monkeypatch):
    from vigil.worker.intake.settings import IntakeSettings
    from vigil.worker.settings import get_settings

    monkeypatch.setenv("VIGIL_MAX_MESSAGE_BYTES", str(LIMIT + 1))
    monkeypatch.delenv("VIGIL_INTAKE_MAX_BYTES", raising=False)
    get_settings.cache_clear()
    try:
        assert IntakeSettings().max_bytes == LIMIT + 1
    finally:
        get_settings.cache_clear()


def test_the_sdk_sends_a_batch_the_intake_refuses_as_too_large_in_parts_and_loses_none(redis_url, tmp_path):
    intake = IntakeProcess(redis_url, tmp_path, VIGIL_INTAKE_MAX_BYTES="300000").start()
    monitor = Monitor(intake_url=intake.url, agent="big", spool_path=tmp_path / "spool.jsonl", batch_size=64)
    try:
        turns = [big_turn(i, 100_000) for i in range(8)]  # ~800 kB in one body: 413
        for turn in turns:
            assert monitor.capture(turn)
        assert monitor.flush(timeout=60)
        counters = monitor.counters()
    finally:
        monitor.shutdown()
        intake.stop()

    assert counters.shipped == len(turns) and counters.dropped_total == 0 and counters.spooled == 0
    assert redis.Redis.from_url(redis_url).llen(INGEST_QUEUE) == 4  # 8 -> 4 + 4 -> 2 + 2 + 2 + 2 turns a request
    assert sorted(t["trace_id"] for t in queued_turns(redis_url)) == sorted(t["trace_id"] for t in turns)
