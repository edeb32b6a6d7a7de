"""The SDK's queue is bounded in bytes as well as in turns, with the real SDK and a real Redis: a turn that would
take the queue past ``max_queue_bytes`` is dropped at once (never waited for), counted as ``queue_bytes`` and logged;
the turns within the budget arrive. (It used to hold 10,000 turns of any size: +351 MB for 300 turns of 1 MB.)"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from vigil.producers import Monitor
from vigil.producers.monitor import DropReason
from vigil.schemas.trace import Turn

from tests.test_sdk import turns

TEXT = 50_000  # characters in each of two places of a turn: its output and, nested, one retrieved context
BUDGET = 1_050_000  # room for ten such turns (~100 kB each), not eleven


@pytest.fixture
def monitor(redis_url, tmp_path: Path):
    """A monitor whose shipper sleeps (long interval, batches bigger than anything captured): the queue only fills
    until the test flushes."""
    made = Monitor(redis_url, agent="budget", spool_path=tmp_path / "spool.jsonl", flush_interval=3600,
                   batch_size=1_000, max_queue_bytes=BUDGET)
    yield made
    made.shutdown(timeout=10)


def big(i: int) -> dict:
    return {"trace_id": uuid.uuid4().hex, "input": f"question {i}", "output": "a" * TEXT,
            "contexts": ["c" * TEXT]}


def test_turns_past_the_byte_budget_are_dropped_and_counted_and_those_within_it_arrive(
        monitor, redis_url, caplog):
    captured = [big(i) for i in range(25)]
    with caplog.at_level(logging.WARNING):
        accepted = [monitor.capture(turn) for turn in captured]

    assert accepted == [True] * 10 + [False] * 15
    held = monitor.counters()
    assert held.dropped == {DropReason.QUEUE_BYTES: 15}
    assert 10 * 2 * TEXT <= held.queued_bytes <= BUDGET
    drops = [r for r in caplog.records if "vigil.turn_dropped" in r.getMessage()]
    assert 1 <= len(drops) <= 5, "logged, but not once per dropped turn"  # the 1st, 2nd, 4th, 8th of a reason

    assert monitor.flush(timeout=60)
    assert [t["trace_id"] for t in turns(redis_url)] == [t["trace_id"] for t in captured[:10]]
    assert monitor.counters().queued_bytes == 0


def test_the_budget_is_given_back_as_turns_ship(monitor, redis_url):
    for i in range(10):
        assert monitor.capture(big(i))
    assert not monitor.capture(big(10))

    assert monitor.flush(timeout=60)

    assert monitor.capture(big(11))
    assert monitor.counters().dropped == {DropReason.QUEUE_BYTES: 1}


def test_a_turn_given_as_a_model_counts_its_text_too(monitor):
    messages = [{"role": "user", "content": "m" * 30_000} for _ in range(33)]  # 990,000 characters in all
    model = Turn.model_validate({"trace_id": "t", "agent": "budget", "input": messages, "output": "a"})
    assert monitor.capture(model)
    assert not monitor.capture(big(1))  # the model's text already holds most of the budget
