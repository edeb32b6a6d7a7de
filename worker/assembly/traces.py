"""Spans kept by trace in Redis until the trace settles, then assembled into turns (``vigil.schemas.spans``).

Keys: ``vigil.intake.trace.<trace id>``, a list of the span records (JSON) not yet assembled;
``vigil.intake.record.<trace id>``, a hash: the trace's budget so far (``spans``, ``bytes``), the bytes in its list
(``listed``) and, once assembled, what late spans need (``assembled``: the spans the assembly read, compact,
``vigil.worker.assembly.late``), kept ``VIGIL_INTAKE_KEEP_S`` after the trace's last span;
``vigil.intake.pending``, a sorted set of trace ids scored by when their last span arrived;
``vigil.intake.pending.bytes``, the bytes of span records in every list (``VIGIL_INTAKE_MAX_PENDING_BYTES``).

- ``vigil.spans(spans)`` (published by ``vigil intake``) appends each span to its trace's list and marks the trace
  seen now, in one transaction, then schedules a sweep ``VIGIL_INTAKE_SETTLE_S`` later (a Celery countdown; at most
  one per second of due time, however many span batches arrive: ``schedule_sweep``).
- ``vigil.assemble_traces()`` (the sweep; also run by ``vigil beat`` as a backstop) claims each trace whose last
  span is at least the settle delay old, by moving its score a lease into the future (atomically, so two workers
  never claim the same trace), assembles its spans into turns, publishes them as one ``vigil.ingest`` task, and
  releases the claim only if no span arrived meanwhile. A worker that dies holding a claim leaves the trace to be
  claimed again after the lease.
- A span that arrives after its trace was assembled (within the keep time) puts the trace back in the pending set:
  it is assembled again with the compact record of the spans the last assembly read, under the same turn ids (trace
  id and root span id), so the trace row and every score are replaced, not duplicated. After the keep time the spans are gone, and a late span is assembled alone.
"""

from __future__ import annotations

import json
import math
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import redis
import structlog
from vigil.schemas.spans import Assembly, assembly

__all__ = ["DROPPED", "DROPPED_TOTAL", "PENDING", "PENDING_BYTES", "Spans", "assembly_of", "claim_due", "record_key",
           "recount_pending", "release", "schedule_sweep", "store_spans", "trace_key", "trace_spans", "turns_of"]

log = structlog.get_logger("vigil.intake")

PENDING = "vigil.intake.pending"
PENDING_BYTES = "vigil.intake.pending.bytes"  # bytes of span records waiting in the traces' lists, all traces
DROPPED = "vigil.intake.dropped"  # a hash: trace id -> spans over VIGIL_INTAKE_MAX_TRACE_SPANS not kept
DROPPED_TOTAL = "vigil.intake.dropped.total"  # every span over the cap ever, for the funnel and a dashboard
_REQUIRED = {"trace_id": str, "span_id": str, "name": str, "start": int, "end": int, "attributes": dict}

# Due traces -> a lease in the future, atomically: returns the claimed ids.
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
return ids
"""
# Append a trace's spans up to its caps (spans and bytes, kept in its record so they outlast the assembly that empties
# its list); count the rest (per trace, and in total) and the bytes now waiting. KEYS: the trace's list, DROPPED,
# DROPPED_TOTAL, the trace's record, PENDING_BYTES; ARGV: max spans, max bytes, keep seconds, trace id, records...
_APPEND = """
local room = tonumber(ARGV[1]) - tonumber(redis.call('HGET', KEYS[4], 'spans') or '0')
local bytes = tonumber(redis.call('HGET', KEYS[4], 'bytes') or '0')
local added = 0
local keep = {}
for i = 5, #ARGV do
  if #keep >= room or bytes + #ARGV[i] > tonumber(ARGV[2]) then break end
  bytes = bytes + #ARGV[i]
  added = added + #ARGV[i]
  keep[#keep + 1] = ARGV[i]
end
for i = 1, #keep, 5000 do
  redis.call('RPUSH', KEYS[1], unpack(keep, i, math.min(i + 4999, #keep)))
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
redis.call('HSET', KEYS[4], 'bytes', bytes)
redis.call('HINCRBY', KEYS[4], 'spans', #keep)
redis.call('HINCRBY', KEYS[4], 'listed', added)
redis.call('EXPIRE', KEYS[4], tonumber(ARGV[3]))
redis.call('INCRBY', KEYS[5], added)
local dropped = #ARGV - 4 - #keep
if dropped > 0 then
  redis.call('HINCRBY', KEYS[2], ARGV[4], dropped)
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3]))
  redis.call('INCRBY', KEYS[3], dropped)
end
return dropped
"""
# No trace pending, no bytes pending: what lists that expired unassembled had counted is forgotten.
_SETTLED = """
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('SET', KEYS[2], 0) end
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


def record_key(trace_id: str) -> str:
    return f"vigil.intake.record.{trace_id}"


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


def store_spans(client: redis.Redis, spans: list[dict[str, Any]], *, keep_s: int, max_spans: int = 2000,
                max_bytes: int = 4 * 2**20, now: float | None = None) -> tuple[int, int]:
    """Append spans to their traces (at most ``max_spans`` spans and ``max_bytes`` of records kept per trace, in
    arrival order: the others are counted in ``DROPPED``) and mark the traces seen; returns how many traces they
    touched and how many spans were over a cap. With ``VIGIL_INTAKE_MAX_OPEN_TRACES`` this bounds the Redis bytes
    pending traces can hold."""
    now = time.time() if now is None else now
    by_trace: dict[str, list[str]] = defaultdict(list)
    for span in spans:
        by_trace[span["trace_id"]].append(json.dumps(span, ensure_ascii=False))
    append = client.register_script(_APPEND)
    pipe = client.pipeline(transaction=True)
    for trace_id, lines in by_trace.items():
        append(keys=[trace_key(trace_id), DROPPED, DROPPED_TOTAL, record_key(trace_id), PENDING_BYTES],
               args=[max_spans, max_bytes, keep_s, trace_id, *lines], client=pipe)
    if by_trace:
        pipe.zadd(PENDING, dict.fromkeys(by_trace, now))
    results = pipe.execute()
    dropped = sum(int(n) for n in results[: len(by_trace)])
    if dropped:
        log.warning("spans over the per-trace caps were not kept; their turns are marked truncated",
                    dropped=dropped, max_spans=max_spans, max_bytes=max_bytes, traces=len(by_trace))
    return len(by_trace), dropped


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


def recount_pending(client: redis.Redis) -> None:
    """``PENDING_BYTES`` back to 0 once no trace is pending (atomically: a span batch is stored in one transaction)."""
    client.register_script(_SETTLED)(keys=[PENDING, PENDING_BYTES])


class Spans(list):
    """A trace's span records (those an earlier assembly read, compact, then those in its list), how many of its
    spans were over the cap and not kept (``dropped``), and how many list records were read and their bytes."""

    dropped: int = 0
    earlier: int = 0  # the first ``earlier`` records are the last assembly's compact ones
    listed: int = 0
    listed_bytes: int = 0


def trace_spans(client: redis.Redis, trace_id: str, max_spans: int | None = None) -> Spans:
    """The kept span records of a trace: never more than ``max_spans`` (the cap they were stored under) are read
    from its list."""
    spans = Spans()
    pipe = client.pipeline(transaction=False)
    pipe.lrange(trace_key(trace_id), 0, -1 if max_spans is None else max_spans - 1)
    pipe.hget(DROPPED, trace_id)
    pipe.hget(record_key(trace_id), "assembled")
    raws, dropped, assembled = pipe.execute()
    if assembled:
        spans.extend({**record, "trace_id": trace_id} for record in json.loads(zlib.decompress(assembled)))
        spans.earlier = len(spans)
    for raw in raws:
        try:
            spans.append(json.loads(raw))
        except ValueError:
            log.warning("unreadable span record skipped", trace_id=trace_id)
    spans.dropped = int(dropped or 0)
    spans.listed, spans.listed_bytes = len(raws), sum(len(raw) for raw in raws)
    return spans


def turns_of(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns of one trace's spans, with the intake's defaults for what spans did not say."""
    return assembly_of(spans).turns


def assembly_of(spans: list[dict[str, Any]]) -> Assembly:
    """The turns (with the intake's defaults for what spans did not say) and unanswered steps of one trace."""
    result = assembly(spans)
    dropped = getattr(spans, "dropped", 0)
    for turn in result.turns:
        turn.setdefault("agent", _service(spans) or "unknown")
        turn.setdefault("metadata", {})["source"] = "otlp"
        if dropped:  # assembled from the spans under the cap: say so on the turn
            turn["truncated"] = [*turn.get("truncated", []), "spans"]
            turn["metadata"]["vigil.spans_dropped"] = str(dropped)
    return result


def _service(spans: list[dict[str, Any]]) -> str | None:
    for span in spans:
        name = (span.get("resource") or {}).get("service.name")
        if isinstance(name, str) and name:
            return name
    return None
