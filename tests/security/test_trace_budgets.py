"""Budgets per trace and per sender, on a real `vigil intake` and a real `vigil worker`: a trace that gets more
spans than ``VIGIL_INTAKE_MAX_TRACE_SPANS`` keeps that many in Redis (the rest counted, its turn marked truncated,
never loaded whole), and a sender that opens more than ``VIGIL_INTAKE_MAX_OPEN_TRACES`` traces is answered 429 with
Retry-After, counted, while the traces already in are assembled as usual."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import redis
from vigil.worker.intake.publish import REFUSED
from vigil.worker.assembly.traces import (
    DROPPED,
    DROPPED_TOTAL,
    KEPT_BYTES,
    KEPT_OVERHEAD,
    OVER_OPEN,
    PENDING,
    PENDING_BYTES,
    claim_due,
    keep_record,
    record_key,
    store_spans,
    trace_key,
    trace_id_of,
    trace_spans,
)
from vigil.worker.store import connect

from tests.abuse import wait_until
from tests.pipeline import IntakeProcess, WorkerProcess, wait_drained
from tests.test_intake import post

CONFIG = Path(__file__).parent.parent / "fixtures" / "pipeline.yaml"
TOKEN = "budget-token-0123456789"


def _value(value) -> dict:
    return {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}


def span(trace_id: str, span_id: str, parent: str | None = None, **attributes) -> dict:
    return {"traceId": trace_id, "spanId": span_id, **({"parentSpanId": parent} if parent else {}), "name": "step",
            "kind": 1, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": k.replace("__", "."), "value": _value(v)} for k, v in attributes.items()]}


def root(trace_id: str, span_id: str) -> dict:
    said = [{"role": "user", "parts": [{"type": "text", "content": "Where is my parcel?"}]}]
    answered = [{"role": "assistant", "parts": [{"type": "text", "content": "It left the depot today."}]}]
    return span(trace_id, span_id, gen_ai__operation__name="chat", gen_ai__request__model="m",
                gen_ai__input__messages=json.dumps(said), gen_ai__output__messages=json.dumps(answered))


def export(intake: IntakeProcess, spans: list[dict]) -> int:
    body = json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "parcel-bot"}}]}, "scopeSpans": [{"spans": spans}]}]})
    return post(f"{intake.url}/v1/traces", body.encode(), "application/json", Authorization=f"Bearer {TOKEN}")[0]


@pytest.fixture
def pipeline(redis_url, tmp_path, request):
    env = {"VIGIL_INTAKE_TOKEN": TOKEN, "VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_MAX_TRACE_SPANS": "200",
           "VIGIL_INTAKE_MAX_OPEN_TRACES": "40", "VIGIL_INTAKE_RETRY_AFTER_S": "2", **getattr(request, "param", {})}
    intake = IntakeProcess(redis_url, tmp_path, **env).start()
    worker = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG, **env).start()
    yield intake, worker
    intake.stop()
    worker.stop()


def test_a_trace_flooded_with_spans_keeps_the_cap_counts_the_rest_and_its_turn_says_truncated(pipeline, redis_url):
    intake, worker = pipeline
    flooded, good = uuid.uuid4().hex, uuid.uuid4().hex
    root_id = uuid.uuid4().hex[:16]
    assert export(intake, [root(flooded, root_id)]) == 200
    for _ in range(5):  # 5,000 more spans into the same trace
        assert export(intake, [span(flooded, uuid.uuid4().hex[:16], root_id) for _ in range(1000)]) == 200
    assert export(intake, [root(good, uuid.uuid4().hex[:16])]) == 200

    client = redis.Redis.from_url(redis_url)
    wait_until(lambda: client.zcard(PENDING) == 0 and client.llen("vigil.ingest") == 0, timeout=120,
               what="both traces to be assembled")
    wait_drained(redis_url, worker)
    kept, dropped, total = int(client.hget(record_key(flooded), "spans")), client.hget(DROPPED, flooded), client.get(DROPPED_TOTAL)
    assert worker.stop() == 0

    assert kept <= 200 and int(dropped) == 5001 - kept and int(total) == 5001 - kept
    rows = dict(connect(worker.dsn).query("SELECT trace_id, truncated FROM traces FINAL").result_rows)
    assert "spans" in rows[flooded]
    assert good in rows and "spans" not in rows[good], "the good trace beside it is assembled whole"


@pytest.mark.parametrize("pipeline", [{"VIGIL_INTAKE_SETTLE_S": "3600"}], indirect=True)
def test_a_sender_opening_traces_past_the_cap_is_answered_429_with_retry_after_and_counted(pipeline, redis_url):
    intake, _ = pipeline
    client = redis.Redis.from_url(redis_url)
    for _ in range(40):
        assert export(intake, [span(uuid.uuid4().hex, uuid.uuid4().hex[:16])]) == 200
    wait_until(lambda: client.zcard(PENDING) >= 40, timeout=120, what="the worker to keep 40 open traces")

    answers = [post(f"{intake.url}/v1/traces", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        span(uuid.uuid4().hex, uuid.uuid4().hex[:16])]}]}]}).encode(), "application/json",
        Authorization=f"Bearer {TOKEN}") for _ in range(10)]

    assert {(status, headers.get("Retry-After")) for status, headers, _ in answers} == {(429, "2")}
    assert b"VIGIL_INTAKE_MAX_OPEN_TRACES (40)" in answers[0][2]
    assert int(client.hget(REFUSED, "open_traces")) == 10
    assert client.zcard(PENDING) == 40


def test_a_trace_keeps_at_most_its_byte_budget_of_span_records_and_counts_the_rest(redis_url):
    """Spans under the count cap but large: the bytes kept for one pending trace stop at VIGIL_INTAKE_MAX_TRACE_BYTES,
    so open traces times this bounds what pending traces hold in Redis."""
    client = redis.Redis.from_url(redis_url)
    trace_id = uuid.uuid4().hex
    big = [{"trace_id": trace_id, "span_id": uuid.uuid4().hex[:16], "name": "s", "start": 1, "end": 2,
            "attributes": {"blob": "x" * 10_000}} for _ in range(20)]

    _, first = store_spans(client, big[:10], keep_s=60, max_spans=2000, max_bytes=50_000)
    _, second = store_spans(client, big[10:], keep_s=60, max_spans=2000, max_bytes=50_000)
    kept = trace_spans(client, trace_id, 2000)

    assert len(kept) == 4 and (first, second) == (6, 10)
    assert sum(len(raw) for raw in client.lrange(trace_key(trace_id), 0, -1)) <= 50_000
    assert kept.dropped == 16 and int(client.get(DROPPED_TOTAL)) == 16


def test_a_sweep_at_its_limit_claims_the_rest_of_a_span_batch_and_nothing_of_the_next(redis_url):
    """One export of many one-span traces (a run whose model calls are traces of their own) is marked seen at one
    time: a sweep that reaches its limit inside it claims the rest of it too, so the run's steps and its answer settle
    in one sweep; a batch seen later waits for the next sweep."""
    client = redis.Redis.from_url(redis_url)
    first, later = [uuid.uuid4().hex for _ in range(7)], [uuid.uuid4().hex for _ in range(3)]

    def batch(trace_ids: list[str], now: float) -> None:
        store_spans(client, [{"trace_id": t, "span_id": "a" * 16, "name": "chat", "start": 1, "end": 2,
                              "attributes": {}} for t in trace_ids], keep_s=60, now=now)
    batch(first, 1000.0)
    batch(later, 1001.0)

    swept, _ = claim_due(client, settle_s=1, lease_s=30, limit=5, now=2000.0)
    next_sweep, _ = claim_due(client, settle_s=1, lease_s=30, limit=5, now=2000.0)

    assert sorted(map(trace_id_of, swept)) == sorted(first)
    assert sorted(map(trace_id_of, next_sweep)) == sorted(later)


def _held(client: redis.Redis, trace_id: str) -> int:
    """Redis bytes the intake holds for one trace."""
    return sum(client.memory_usage(key) or 0 for key in client.scan_iter(f"vigil.intake.*{trace_id}*"))


def test_an_assembled_trace_keeps_only_what_a_late_span_needs_not_its_spans(pipeline, redis_url):
    """A trace's spans leave its list once assembled: the spans its turn was made of stay, compressed, for a late
    span; a span the turn did not use keeps only its place in the tree, not its 20 kB of attributes."""
    intake, worker = pipeline
    client = redis.Redis.from_url(redis_url)
    traces = [uuid.uuid4().hex for _ in range(20)]
    for trace_id in traces:
        chat_id = uuid.uuid4().hex[:16]
        assert export(intake, [root(trace_id, chat_id),
                               span(trace_id, uuid.uuid4().hex[:16], gen_ai__note="x" * 20_000)]) == 200
    wait_until(lambda: client.zcard(PENDING) == 0 and client.llen("vigil.ingest") == 0, timeout=120,
               what="the traces to be assembled")
    wait_drained(redis_url, worker)

    assert not any(client.exists(trace_key(trace_id)) for trace_id in traces)
    assert max(_held(client, trace_id) for trace_id in traces) < 2_000
    assert int(client.get(PENDING_BYTES)) == 0
    assert worker.stop() == 0
    rows = connect(worker.dsn).query("SELECT trace_id FROM traces FINAL").result_rows
    assert {trace_id for (trace_id,) in rows} == set(traces), "every trace's turn recorded"


@pytest.mark.parametrize("pipeline", [{"VIGIL_INTAKE_SETTLE_S": "3600", "VIGIL_INTAKE_MAX_PENDING_BYTES": "60000"}],
                         indirect=True)
def test_a_sender_past_the_pending_bytes_cap_is_answered_429_with_retry_after_and_counted(pipeline, redis_url):
    intake, _ = pipeline
    client = redis.Redis.from_url(redis_url)
    for _ in range(3):  # 3 traces of ~20 kB: past 60,000 bytes, under the 40 open traces
        assert export(intake, [span(uuid.uuid4().hex, uuid.uuid4().hex[:16], gen_ai__note="x" * 20_000)]) == 200
    wait_until(lambda: int(client.get(PENDING_BYTES) or 0) >= 60_000, timeout=120,
               what="the worker to keep 60 kB of spans")

    answers = [post(f"{intake.url}/v1/traces", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        span(uuid.uuid4().hex, uuid.uuid4().hex[:16])]}]}]}).encode(), "application/json",
        Authorization=f"Bearer {TOKEN}") for _ in range(5)]

    assert {(status, headers.get("Retry-After")) for status, headers, _ in answers} == {(429, "2")}
    assert b"VIGIL_INTAKE_MAX_PENDING_BYTES (60000)" in answers[0][2]
    assert int(client.hget(REFUSED, "pending_bytes")) == 5
    assert client.zcard(PENDING) == 3


@pytest.mark.parametrize("pipeline", [{"VIGIL_INTAKE_SETTLE_S": "3600"}], indirect=True)
def test_the_open_trace_cap_holds_where_the_spans_are_stored(pipeline, redis_url):
    """One request of 100 one-span traces while none is open: the intake lets it through (it checks before the spans
    are stored), and the worker keeps 40, the cap, counting the other 60 spans instead of opening their traces."""
    intake, _ = pipeline
    client = redis.Redis.from_url(redis_url)

    assert export(intake, [span(uuid.uuid4().hex, uuid.uuid4().hex[:16]) for _ in range(100)]) == 200
    wait_until(lambda: client.zcard(PENDING) + int(client.get(OVER_OPEN) or 0) >= 100, timeout=120,
               what="the worker to store the spans")

    assert client.zcard(PENDING) == 40
    assert int(client.get(OVER_OPEN)) == 60


@pytest.mark.parametrize("pipeline", [{"VIGIL_INTAKE_MAX_KEPT_BYTES": "20000", "VIGIL_INTAKE_MAX_OPEN_TRACES": "0"}],
                         indirect=True)
def test_what_assembled_traces_keep_stays_within_its_byte_budget_oldest_first_out(pipeline, redis_url):
    """200 one-span traces, assembled: what they keep for late spans stops at VIGIL_INTAKE_MAX_KEPT_BYTES (their
    records' Redis bytes), the oldest dropped first; every trace's turn is still recorded."""
    intake, worker = pipeline
    client = redis.Redis.from_url(redis_url)
    traces = [uuid.uuid4().hex for _ in range(200)]
    for start in range(0, 200, 20):
        assert export(intake, [root(trace_id, uuid.uuid4().hex[:16]) for trace_id in traces[start:start + 20]]) == 200
    wait_until(lambda: client.zcard(PENDING) == 0 and client.llen("vigil.ingest") == 0, timeout=120,
               what="the traces to be assembled")
    wait_drained(redis_url, worker)

    kept = [trace_id for trace_id in traces if client.exists(record_key(trace_id))]
    assert 0 < len(kept) < 200
    assert sum(client.memory_usage(record_key(trace_id), samples=0) for trace_id in kept) <= 20_000
    assert int(client.get(KEPT_BYTES)) <= 20_000
    assert worker.stop() == 0
    rows = connect(worker.dsn).query("SELECT trace_id FROM traces FINAL").result_rows
    assert {trace_id for (trace_id,) in rows} == set(traces), "every trace's turn recorded"


def test_kept_records_leave_oldest_first_and_expired_ones_are_forgotten(redis_url):
    client = redis.Redis.from_url(redis_url)
    names = [uuid.uuid4().hex for _ in range(6)]
    for i, name in enumerate(names):
        client.hset(record_key(name), "assembled", "x" * 100)
        keep_record(client, name, 100, budget=3 * (100 + KEPT_OVERHEAD), keep_s=3600, now=1000 + i)

    assert [name for name in names if client.exists(record_key(name))] == names[-3:]
    assert int(client.get(KEPT_BYTES)) == 3 * (100 + KEPT_OVERHEAD)
    keep_record(client, "later", 100, budget=3 * (100 + KEPT_OVERHEAD), keep_s=3600, now=1005 + 3600)
    assert int(client.get(KEPT_BYTES)) == 100 + KEPT_OVERHEAD, "records past the keep time no longer count"
