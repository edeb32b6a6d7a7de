"""Poison messages on real parts: whatever anyone pushes onto vigil's queues, a real `vigil worker` dead-letters it
with its reason, acks it, and goes on scoring the turns behind it (it used to die in Celery's consumer, exit 0)."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
import redis
from vigil.schemas.broker import INGEST_QUEUE, INGEST_TASK, JOURNAL, SCORE_QUEUE
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def celery_envelope(body: bytes, task: str = INGEST_TASK, queue: str = INGEST_QUEUE, **headers) -> str:
    """A Celery protocol-2 message as the Redis transport stores it, with ``body`` as its (encoded) body."""
    task_id = str(uuid.uuid4())
    return json.dumps({
        "body": base64.b64encode(body).decode(), "content-encoding": "utf-8", "content-type": "application/json",
        "headers": {"lang": "py", "task": task, "id": task_id, "root_id": task_id, "retries": 0, **headers},
        "properties": {"correlation_id": task_id, "delivery_mode": 2, "priority": 0, "body_encoding": "base64",
                       "delivery_info": {"exchange": "", "routing_key": queue}, "delivery_tag": str(uuid.uuid4())},
    })


POISON_BODIES = {
    "an object": (b'{"a": 1}', "body must be [args, kwargs, embed], got dict"),
    "a list of one": (b"[1]", "body must be [args, kwargs, embed], got a list of 1"),
    "a number": (b"5", "body must be [args, kwargs, embed], got int"),
    "null": (b"null", "body must be [args, kwargs, embed], got NoneType"),
    "a string": (b'"abcd"', "body must be [args, kwargs, embed], got str"),
    "args not a list": (b'[5, {}, {}]', "body: args must be a list, got int"),
    "kwargs not an object": (b'[[], [], {}]', "body: kwargs must be an object, got list"),
    "too many arguments": (b'[[[], [], [], []], {}, {}]', "arguments: too many positional arguments"),
    "no arguments": (b'[[], {}, {}]', "arguments: missing a required argument: 'batch'"),
    "an unknown keyword": (b'[[[]], {"evil": 1}, {}]', "arguments: got an unexpected keyword argument 'evil'"),
    "not JSON": (b"{not json", "body does not decode: Expecting property name"),
    "invalid UTF-8 JSON": (b'[[[{"trace_id": "\xff\xfe"}]], {}, {}]', "body does not decode: 'utf-8' codec can't decode byte 0xff"),
}

RAW_ITEMS = {
    "a bare word": (b"hello", "envelope is not JSON"),
    "a JSON number": (b"42", "envelope must be a JSON object, got int"),
    "no properties": (b'{"body": "", "headers": {"task": "vigil.ingest"}}', "properties must be an object"),
    "no delivery tag": (b'{"body": "", "properties": {"delivery_info": {"exchange": "", "routing_key": "x"}}}',
                        "delivery_tag must be a non-empty string"),
    "a body that is not base64": (json.dumps({"body": "%%%", "properties": {
        "body_encoding": "base64", "delivery_tag": "t", "delivery_info": {"exchange": "", "routing_key": "x"}}}
    ).encode(), "body is not valid base64"),
    "invalid UTF-8": (b'\xff{"a"', "envelope is not JSON"),
}


@pytest.fixture
def worker(redis_url, tmp_path):
    process = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG)
    yield process
    if process.process is not None:
        process.stop()


def dead_letters(worker: WorkerProcess) -> list[tuple[str, str, str]]:
    return connect(worker.dsn).query("SELECT queue, reason, error_type FROM dead_letters FINAL").result_rows


def scored_traces(worker: WorkerProcess) -> set[str]:
    rows = connect(worker.dsn).query("SELECT trace_id FROM scores FINAL WHERE monitor = 'relevancy'").result_rows
    return {r[0] for r in rows}


def test_every_poison_body_is_dead_lettered_with_its_reason_and_the_turns_behind_it_are_scored(redis_url, worker):
    client = redis.Redis.from_url(redis_url)
    before, after = make_turn(1), make_turn(2)
    send(redis_url, [before])
    for body, _ in POISON_BODIES.values():
        client.lpush(INGEST_QUEUE, celery_envelope(body))
    send(redis_url, [after])
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.process.poll() is None, "the worker stopped"
    assert worker.stop() == 0

    dead = dead_letters(worker)
    for case, (_, reason) in POISON_BODIES.items():
        assert any(reason in r for _, r, _ in dead), f"{case}: {reason!r} not in {[r for _, r, _ in dead]}"
    assert len(dead) == len(POISON_BODIES)
    assert {q for q, _, _ in dead} == {INGEST_QUEUE}
    assert {before["trace_id"], after["trace_id"]} <= scored_traces(worker)
    assert client.hlen(JOURNAL) == 0 and client.llen(INGEST_QUEUE) == 0


def test_items_that_are_not_kombu_envelopes_are_dead_lettered_on_every_queue_the_worker_reads(redis_url, worker):
    client = redis.Redis.from_url(redis_url)
    for item, _ in RAW_ITEMS.values():
        client.lpush(INGEST_QUEUE, item)
        client.lpush(SCORE_QUEUE, item)
    turn = make_turn(3)
    send(redis_url, [turn])
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    dead = dead_letters(worker)
    for queue in (INGEST_QUEUE, SCORE_QUEUE):
        reasons = [r for q, r, kind in dead if q == queue and kind == "undeliverable_message"]
        for case, (_, reason) in RAW_ITEMS.items():
            assert any(reason in r for r in reasons), f"{queue}, {case}: {reason!r} not in {reasons}"
    # identical raw items on two queues are two dead letters; one per item, never a duplicate per delivery
    assert len(dead) == 2 * len(RAW_ITEMS)
    assert turn["trace_id"] in scored_traces(worker)


def test_a_score_message_with_the_wrong_arguments_is_dead_lettered_naming_them(redis_url, worker):
    client = redis.Redis.from_url(redis_url)
    client.lpush(SCORE_QUEUE, celery_envelope(b'[[1, 2, 3, 4, 5, 6], {}, {}]', task="vigil.score", queue=SCORE_QUEUE))
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.stop() == 0
    assert dead_letters(worker) == [(SCORE_QUEUE, "arguments: too many positional arguments", "malformed_message")]


def test_a_message_celery_itself_refuses_is_dead_lettered_and_acked(redis_url, worker):
    """A pickled body (content type not accepted) and a malformed ETA: Celery rejects both; each leaves a row."""
    client = redis.Redis.from_url(redis_url)
    pickled = json.loads(celery_envelope(b"\x80\x04K\x01."))
    pickled["content-type"] = "application/x-python-serialize"
    client.lpush(INGEST_QUEUE, json.dumps(pickled))
    client.lpush(INGEST_QUEUE, celery_envelope(b'[[[]], {}, {}]', eta="not a date"))
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.stop() == 0
    reasons = sorted(r for _, r, _ in dead_letters(worker))
    assert len(reasons) == 2
    assert "ContentDisallowed" in reasons[0] and "invalid ETA value" in reasons[1]


def test_a_worker_stopped_by_an_unrecoverable_error_exits_non_zero(redis_url, tmp_path):
    """An ACL user that may pop but not record the delivery: Celery stops the worker; a supervisor must see it."""
    client = redis.Redis.from_url(redis_url)
    client.execute_command("ACL", "SETUSER", "no-hset", "on", ">pw", "~*", "&*", "+@all", "-hset")
    try:
        send(redis_url, [make_turn(1)])
        port = client.connection_pool.connection_kwargs["port"]
        worker = WorkerProcess(f"redis://no-hset:pw@127.0.0.1:{port}/0", tmp_path / "vigil", CONFIG).start()
        assert worker.process.wait(120) != 0, worker.output()[-2000:]
        assert "Unrecoverable error" in worker.output()
    finally:
        client.execute_command("ACL", "DELUSER", "no-hset")
