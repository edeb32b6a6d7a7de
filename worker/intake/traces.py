"""Spans kept by trace in Redis until the trace settles, then assembled into turns (``vigil.schemas.spans``).

Keys: ``vigil.intake.trace.<trace id>``, a list of span records (JSON), kept ``VIGIL_INTAKE_KEEP_S`` after the
trace's last span; ``vigil.intake.pending``, a sorted set of trace ids scored by when their last span arrived.

- ``vigil.spans(spans)`` (published by ``vigil intake``) appends each span to its trace's list and marks the trace
  seen now, in one transaction, then schedules a sweep ``VIGIL_INTAKE_SETTLE_S`` later (a Celery countdown; at most
  one per second of due time, however many span batches arrive: ``schedule_sweep``).
- ``vigil.assemble_traces()`` (the sweep; also run by ``vigil beat`` as a backstop) claims each trace whose last
  span is at least the settle delay old, by moving its score a lease into the future (atomically, so two workers
  never claim the same trace), assembles its spans into turns, publishes them as one ``vigil.ingest`` task, and
  releases the claim only if no span arrived meanwhile. A worker that dies holding a claim leaves the trace to be
  claimed again after the lease.
- A span that arrives after its trace was assembled (within the keep time) puts the trace back in the pending set:
  it is assembled again, whole, under the same turn ids (trace id and root span id), so the trace row and every score
  are replaced, not duplicated. After the keep time the spans are gone, and a late span is assembled alone.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import redis
import structlog
from vigil.schemas.spans import Assembly, assembly

__all__ = ["PENDING", "assembly_of", "claim_due", "release", "schedule_sweep", "store_spans", "trace_key", "trace_spans",
           "turns_of"]

log = structlog.get_logger("vigil.intake")

PENDING = "vigil.intake.pending"
_REQUIRED = {"trace_id": str, "span_id": str, "name": str, "start": int, "end": int, "attributes": dict}

# Due traces -> a lease in the future, atomically: returns the claimed ids.
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
return ids
"""
# Forget a claimed trace unless a span arrived since (which moved its score off the lease).
_RELEASE = """
local n = 0
for i, id in ipairs(ARGV) do
  if i > 1 and tonumber(redis.call('ZSCORE', KEYS[1], id)) == tonumber(ARGV[1]) then n = n + redis.call('ZREM', KEYS[1], id) end
end
return n
"""


def trace_key(trace_id: str) -> str:
    return f"vigil.intake.trace.{trace_id}"


def invalid_reason(span: Any) -> str | None:
    """Why a span record cannot be kept (naming the field), or None."""
    if not isinstance(span, dict):
        return f"span must be an object, got {type(span).__name__}"
    for name, kind in _REQUIRED.items():
        if not isinstance(span.get(name), kind):
            return f"{name}: expected {kind.__name__}, got {type(span.get(name)).__name__}"
    if len(span["trace_id"]) != 32 or len(span["span_id"]) != 16:
        return "trace_id/span_id: expected 32 and 16 hex digits"
    return None


def store_spans(client: redis.Redis, spans: list[dict[str, Any]], *, keep_s: int, now: float | None = None) -> int:
    """Append spans to their traces and mark the traces seen; returns how many traces they touched."""
    now = time.time() if now is None else now
    by_trace: dict[str, list[str]] = defaultdict(list)
    for span in spans:
        by_trace[span["trace_id"]].append(json.dumps(span, ensure_ascii=False))
    pipe = client.pipeline(transaction=True)
    for trace_id, lines in by_trace.items():
        key = trace_key(trace_id)
        pipe.rpush(key, *lines)
        pipe.expire(key, keep_s)
    if by_trace:
        pipe.zadd(PENDING, dict.fromkeys(by_trace, now))
    pipe.execute()
    return len(by_trace)


def schedule_sweep(client: redis.Redis, name: str, due_at: float, publish: Callable[[float], Any]) -> bool:
    """At most one sweep per second of due time: ``publish(countdown)`` schedules a sweep at the whole second after
    ``due_at`` unless one is already scheduled for that second (a marker key ``name.<second>`` says so). A failed
    publish removes the marker, so the retried task schedules it again. Returns whether this call scheduled it."""
    second = math.ceil(due_at)
    marker = f"{name}.{second}"
    if not client.set(marker, 1, nx=True, ex=max(int(second - time.time()), 0) + 300):
        return False
    try:
        publish(max(second - time.time(), 0.0))
    except BaseException:
        client.delete(marker)
        raise
    return True


def claim_due(client: redis.Redis, *, settle_s: float, lease_s: float, limit: int = 500, key: str = PENDING,
              now: float | None = None) -> tuple[list[str], float]:
    """Members of the sorted set ``key`` (trace ids by default) last seen ``settle_s`` ago or earlier, claimed for
    ``lease_s``; and the lease's score."""
    now = time.time() if now is None else now
    lease = repr(float(round(now + lease_s, 3)))
    ids = client.register_script(_CLAIM)(keys=[key], args=[now - settle_s, lease, limit])
    return [i.decode() if isinstance(i, bytes) else i for i in ids], float(lease)


def release(client: redis.Redis, members: list[str], lease: float, key: str = PENDING) -> int:
    """Forget claimed members unless they were seen again since the claim."""
    if not members:
        return 0
    return client.register_script(_RELEASE)(keys=[key], args=[repr(lease), *members])


def trace_spans(client: redis.Redis, trace_id: str) -> list[dict[str, Any]]:
    spans = []
    for raw in client.lrange(trace_key(trace_id), 0, -1):
        try:
            spans.append(json.loads(raw))
        except ValueError:
            log.warning("unreadable span record skipped", trace_id=trace_id)
    return spans


def turns_of(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns of one trace's spans, with the intake's defaults for what spans did not say."""
    return assembly_of(spans).turns


def assembly_of(spans: list[dict[str, Any]]) -> Assembly:
    """The turns (with the intake's defaults for what spans did not say) and unanswered steps of one trace."""
    result = assembly(spans)
    for turn in result.turns:
        turn.setdefault("agent", _service(spans) or "unknown")
        turn.setdefault("metadata", {})["source"] = "otlp"
    return result


def _service(spans: list[dict[str, Any]]) -> str | None:
    for span in spans:
        name = (span.get("resource") or {}).get("service.name")
        if isinstance(name, str) and name:
            return name
    return None
