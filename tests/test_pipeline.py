"""The pipeline on real parts: Celery messages in a real Redis, a real `vigil worker` process, chDB read back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from vigil.schemas.broker import INGEST_QUEUE
from vigil.worker.pipeline.app import SCORE_QUEUE, app, configure
from vigil.worker.pipeline.sampling import sampled
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def expected_pairs(turns: list[dict]) -> set[tuple[str, str]]:
    """(trace_id, monitor) pairs the fixture config samples: `relevancy` takes all, `relevancy-half` half of one agent."""
    pairs = {(t["trace_id"], "relevancy") for t in turns}
    pairs |= {(t["trace_id"], "relevancy-half") for t in turns
              if t["agent"] == "support-bot" and sampled(t["trace_id"], 0.5)}
    return pairs


@pytest.fixture
def worker(redis_url, tmp_path):
    process = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG, VIGIL_VISIBILITY_TIMEOUT="4",
                            VIGIL_RESTORE_INTERVAL="1")
    yield process
    if process.process is not None:
        process.stop()


def test_every_sampled_turn_is_scored_with_a_reason_and_read_back_from_clickhouse(redis_url, worker):
    turns = [make_turn(i, agent="support-bot" if i % 3 else "travel-assistant") for i in range(60)]
    for start in range(0, len(turns), 20):
        send(redis_url, turns[start:start + 20])
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    rows = store.query("SELECT trace_id, monitor, status, score, reason, judge_calls FROM scores FINAL").result_rows
    assert {(r[0], r[1]) for r in rows} == expected_pairs(turns)
    assert all(r[2] == "scored" and 0.0 <= r[3] <= 1.0 and r[4] for r in rows)
    assert store.query("SELECT count() FROM traces FINAL").result_rows[0][0] == len(turns)
    funnel = dict(store.query(  # the counters are per minute: a run that crosses a minute has two rows per stage
        "SELECT stage, sum(count) FROM pipeline_counters WHERE monitor = 'relevancy-half' GROUP BY stage"
    ).result_rows)
    assert funnel["sampled"] == funnel["scored"] == len({p for p in expected_pairs(turns) if p[1] != "relevancy"})
    assert funnel["filtered"] == 20


def test_a_worker_killed_mid_batch_loses_nothing_and_duplicates_nothing(redis_url, worker):
    """Given a backlog, SIGKILL the worker while it scores; a restarted worker finishes: one row per sampled pair."""
    turns = [make_turn(i) for i in range(400)]
    for start in range(0, len(turns), 50):
        send(redis_url, turns[start:start + 50])
    client = redis.Redis.from_url(redis_url)
    worker.start()
    deadline = time.monotonic() + 120
    while client.llen("vigil.write") + client.hlen("unacked") == 0 or client.llen(INGEST_QUEUE) > 4:
        assert time.monotonic() < deadline, worker.output()[-3000:]
        time.sleep(0.01)
    worker.kill()
    assert client.hlen("unacked") + client.llen(SCORE_QUEUE) + client.llen(INGEST_QUEUE) > 0, "killed too late"

    worker.start()
    wait_drained(redis_url, worker, timeout=240)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    expected = expected_pairs(turns)
    final = store.query("SELECT trace_id, monitor FROM scores FINAL").result_rows
    assert len(final) == len(expected) and set(final) == expected
    store.command("OPTIMIZE TABLE scores FINAL")
    assert store.query("SELECT count() FROM scores").result_rows[0][0] == len(expected)


MALFORMED = {
    "missing_fields": {"trace_id": "t-missing", "input": [{"role": "user", "content": "hi"}]},
    "wrong_types": {"trace_id": "t-types", "agent": "support-bot", "input": "not a list", "output": 42},
    # over the turn's 2 MB limit, under the message's 8 MiB budget (a larger message is refused whole, unread)
    "five_megabytes": {"trace_id": "t-huge", "agent": "support-bot",
                       "input": [{"role": "user", "content": "hi"}], "output": "x" * 5_000_000},
    "invalid_utf8": {"trace_id": "t-utf8", "agent": "support-bot",
                     "input": [{"role": "user", "content": b"caf\xe9".decode("utf-8", "surrogateescape")}],
                     "output": "ok"},
    "not_an_object": "just a string",
}

REASONS = {
    "missing_fields": "agent: Field required",
    "wrong_types": "input: Input should be a valid list",
    "five_megabytes": "largest field output",
    "invalid_utf8": "field input[0].content: invalid UTF-8",
    "not_an_object": "turn must be a JSON object",
}


def test_malformed_payloads_are_dead_lettered_with_a_reason_and_the_turns_after_them_are_scored(redis_url, worker):
    good_before, good_after = make_turn(1), make_turn(2)
    send(redis_url, [good_before, *MALFORMED.values(), good_after])
    configure(redis_url)
    app.send_task("vigil.score", args=[make_turn(3), "no-such-monitor"], queue=SCORE_QUEUE)
    send(redis_url, [make_turn(4)])
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    dead = store.query("SELECT reason, error_type FROM dead_letters FINAL").result_rows
    reasons = [reason for reason, _ in dead]
    for case, expected in REASONS.items():
        assert any(expected in reason for reason in reasons), f"{case}: {expected!r} not in {reasons}"
    assert any("unknown monitor 'no-such-monitor'" in reason for reason in reasons)
    assert len(dead) == len(MALFORMED) + 1
    scored = {r[0] for r in store.query("SELECT trace_id FROM scores FINAL WHERE monitor = 'relevancy'").result_rows}
    assert {good_before["trace_id"], good_after["trace_id"]} <= scored


def test_each_turn_of_a_batch_is_scored_as_itself_even_beside_an_invalid_turn(redis_url, worker):
    """The fan-out carries each turn as it came: never another turn of the same batch (the last one, say)."""
    turns = [make_turn(i) for i in range(5)]
    send(redis_url, [*turns, {**make_turn(99), "output": {"not": "a string"}}])
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    rows = store.query("SELECT s.trace_id, s.status, t.question FROM scores AS s FINAL "
                       "JOIN traces AS t ON t.trace_id = s.trace_id WHERE s.monitor = 'relevancy'").result_rows
    assert sorted(r[0] for r in rows) == sorted(t["trace_id"] for t in turns)
    assert all(status == "scored" for _, status, _ in rows)
    assert store.query("SELECT count() FROM dead_letters FINAL").result_rows[0][0] == 1
