"""``Monitor.feedback`` against a real redis-server: it rides the capture path (batches, spool, counters), never
raises, never waits, and counts bad arguments as dropped with the field named; the feedback model's id is
deterministic so a resend replaces."""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from vigil.producers import CelerySender, DropReason, Monitor
from vigil.schemas import Turn
from vigil.schemas.feedback import Feedback, is_feedback
from vigil.worker.demo.embedded_redis import EmbeddedRedis

from tests.test_sdk import ObservedSender, down_url, ingested


@pytest.fixture
def make_monitor(tmp_path: Path) -> Iterator:
    made: list[Monitor] = []

    def make(url: str, **settings: Any) -> Monitor:
        settings.setdefault("spool_path", tmp_path / f"spool-{len(made)}.jsonl")
        settings.setdefault("flush_interval", 3600)
        monitor = Monitor(url, agent="support-bot", **settings)
        made.append(monitor)
        return monitor

    yield make
    for monitor in made:
        monitor.shutdown(timeout=5)


@pytest.fixture
def private_redis() -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis().start()
    yield server
    if server.process is not None and server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGCONT)
    server.stop()


def items(url: str) -> list[dict[str, Any]]:
    return [item for batch in ingested(url) for item in batch]


def test_feedback_travels_in_the_same_ingest_batch_as_turns_and_is_told_apart(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    monitor.capture(input="Where is my parcel?", output="It left Lyon today.", trace_id="trace-1")
    assert monitor.feedback("trace-1", "thumbs", False, comment="it was lost", author="u42") is True
    assert monitor.flush(timeout=10)

    [batch] = ingested(redis_url)
    turn, feedback = batch
    assert not is_feedback(turn) and Turn.model_validate(turn).trace_id == "trace-1"
    assert is_feedback(feedback)
    item = Feedback.model_validate(feedback["feedback"])
    assert (item.trace_id, item.name, item.value, item.comment, item.source, item.author) == (
        "trace-1", "thumbs", 0.0, "it was lost", "user", "u42")
    assert item.negative
    counters = monitor.counters()
    assert (counters.captured, counters.shipped, counters.feedback, counters.dropped_total) == (2, 2, 1, 0)


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        pytest.param(("", "thumbs", 1), {}, "trace_id", id="an empty trace id"),
        pytest.param((123, "thumbs", 1), {}, "trace_id", id="a number as the trace id"),
        pytest.param(("t", "", 1), {}, "name", id="an empty name"),
        pytest.param(("t", "rating", 6), {"scale": 5}, "value", id="a value over the scale"),
        pytest.param(("t", "rating", -1), {}, "value", id="a negative value"),
        pytest.param(("t", "rating", float("nan")), {}, "value", id="NaN"),
        pytest.param(("t", "thumbs", "up"), {}, "value", id="a string as the value"),
        pytest.param(("t", "thumbs", None), {}, "value", id="no value"),
        pytest.param(("t", "thumbs", 1, None, "robot"), {}, "source", id="an unknown source"),
        pytest.param(("t", "thumbs", 1, 42), {}, "comment", id="a number as the comment"),
        pytest.param(("t", "rating", 1), {"scale": 0}, "scale", id="a zero scale"),
    ],
)
def test_bad_feedback_arguments_are_dropped_and_counted_naming_the_field_never_raised(
        redis_url, make_monitor, caplog, args, kwargs, field):
    monitor = make_monitor(redis_url)

    with caplog.at_level(logging.WARNING, logger="vigil.producers"):
        accepted = monitor.feedback(*args, **kwargs)
    monitor.feedback("t", "thumbs", True)
    assert monitor.flush(timeout=10)

    assert accepted is False
    assert monitor.counters().dropped == {DropReason.BAD_ARGUMENT: 1}
    [logged] = [json.loads(r.getMessage()) for r in caplog.records if "turn_dropped" in r.getMessage()]
    assert logged["reason"] == "bad_argument" and f"{field}:" in logged["detail"]
    assert [Feedback.model_validate(i["feedback"]).value for i in items(redis_url)] == [1.0]


def test_feedback_returns_while_the_shipper_is_stuck_in_a_network_call(private_redis, make_monitor):
    """Redis frozen (SIGSTOP), the shipper blocked inside a send: 500 feedback calls all return and are queued;
    after Redis thaws every one arrives."""
    transport = ObservedSender(CelerySender(private_redis.url, socket_timeout=120))
    monitor = make_monitor(private_redis.url, sender=transport, batch_size=100)
    os.kill(private_redis.process.pid, signal.SIGSTOP)
    monitor.feedback("first", "thumbs", True)
    monitor.flush(timeout=0)
    assert transport.entered.wait(timeout=60)

    accepted = [monitor.feedback(f"trace-{i}", "thumbs", i % 2 == 0) for i in range(500)]

    assert not transport.returned.is_set(), "the shipper's send came back before the agent loop ended"
    assert all(accepted) and monitor.counters().feedback == 501
    os.kill(private_redis.process.pid, signal.SIGCONT)
    assert monitor.flush(timeout=60)
    assert [i["feedback"]["trace_id"] for i in items(private_redis.url)] == ["first"] + [
        f"trace-{i}" for i in range(500)]


def test_feedback_given_while_redis_is_down_is_spooled_and_shipped_when_it_returns(make_monitor, tmp_path):
    port_url = down_url()
    monitor = make_monitor(port_url, backoff_initial=3600, backoff_max=3600)

    assert monitor.feedback("trace-9", "rating", 2, scale=5) is True
    assert monitor.flush(timeout=10) is False
    assert monitor.counters().spool_pending == 1

    port = int(port_url.rsplit(":", 1)[1].split("/")[0])
    server = EmbeddedRedis(port=port).start()
    try:
        assert monitor.flush(timeout=30)
        [item] = items(server.url)
    finally:
        server.stop()
    assert Feedback.model_validate(item["feedback"]).normalised == pytest.approx(0.4)


def test_the_same_persons_feedback_on_a_trace_has_one_id_and_another_persons_another():
    first = Feedback(trace_id="t1", name="thumbs", value=1, author="ana", created_at=datetime(2026, 1, 1, tzinfo=UTC))
    changed = Feedback(trace_id="t1", name="thumbs", value=0, author="ana")
    other = Feedback(trace_id="t1", name="thumbs", value=1, author="bo")
    reviewer = Feedback(trace_id="t1", name="thumbs", value=1, author="ana", source="reviewer")

    assert first.feedback_id == changed.feedback_id
    assert len({first.feedback_id, other.feedback_id, reviewer.feedback_id}) == 3
    assert Feedback(**{**first.model_dump(), "feedback_id": "forged"}).feedback_id == first.feedback_id


@pytest.mark.parametrize(("value", "scale", "negative"), [(0, 1, True), (0.49, 1, True), (0.5, 1, False),
                                                          (True, 1, False), (2, 5, True), (3, 5, False)])
def test_feedback_is_negative_below_half_its_scale(value, scale, negative):
    assert Feedback(trace_id="t", name="n", value=value, scale=scale).negative is negative
