"""Spans kept by trace in Redis until the trace settles, then assembled into turns (``vigil.schemas.spans``).

Keys, by the trace's name (its project and id, ``trace_name``): ``vigil.intake.trace.<name>``, a list of the span
records (JSON) not yet assembled; ``vigil.intake.record.<name>``, a hash: the trace's budget so far (``spans``,
``bytes``), the bytes in its list (``listed``), how often it was assembled (``assemblies``) and, once assembled, what
late spans need (``assembled``: the spans the assembly read, compact; ``turns``: the turns it stored and their
content digests; ``vigil.worker.assembly.late``), kept ``VIGIL_INTAKE_KEEP_S`` after the trace's last span;
``vigil.intake.pending``, a sorted set of trace names scored by when their last span arrived;
``vigil.intake.pending.bytes``, the bytes of span records in every list (``VIGIL_INTAKE_MAX_PENDING_BYTES``);
``vigil.intake.kept*``, the assembled traces' records by age and size, within ``VIGIL_INTAKE_MAX_KEPT_BYTES`` (oldest
first out), so a flood of one-span traces leaves at most that much behind once assembled.

- ``vigil.spans(spans)`` (published by ``vigil intake``) appends each span to its trace's list and marks the trace
  seen now, in one transaction, then schedules a sweep ``VIGIL_INTAKE_SETTLE_S`` later (a Celery countdown; at most
  one per second of due time, however many span batches arrive: ``schedule_sweep``).
- ``vigil.assemble_traces()`` (the sweep; also run by ``vigil beat`` as a backstop) claims each trace whose last
  span is at least the settle delay old, by moving its score a lease into the future (atomically, so two workers
  never claim the same trace; at most 500 a sweep, but never part of one span batch: ``claim_due``), assembles its spans into turns, publishes them as one ``vigil.ingest`` task, and
  releases the claim only if no span arrived meanwhile. A worker that dies holding a claim leaves the trace to be
  claimed again after the lease.
- A span that arrives after its trace was assembled (within the keep time) puts the trace back in the pending set:
  it is assembled again with the compact record of the spans the last assembly read, under the same turn ids (trace
  id and root span id), so a turn that changed for a scorer has its row and scores replaced, not duplicated
  (``vigil.worker.assembly.late`` says which turns change, and which never do). After the keep time the spans are
  gone, and a late span is assembled alone: its turn never replaces a stored one (``vigil.worker.pipeline.ownership``).
"""

from __future__ import annotations

import json
import math
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from vigil.schemas.config import DEFAULT_PROJECT
from vigil.schemas.json_text import loads
from vigil.schemas.spans import PROJECT_RESOURCE, Assembly, assembly
from vigil.schemas.steps import service
from vigil.worker.logs import Every

if TYPE_CHECKING:
    import redis

__all__ = ["DROPPED", "DROPPED_TOTAL", "KEPT", "KEPT_BYTES", "OVER_OPEN", "PENDING", "PENDING_BYTES", "Spans",
           "assembly_of", "claim_due", "keep_record", "project_of", "record_key", "recount_pending", "release",
           "schedule_sweep", "service_of", "split_name", "store_spans", "trace_id_of", "trace_key", "trace_name",
           "trace_spans", "turns_of"]

log = structlog.get_logger("vigil.intake")

PENDING = "vigil.intake.pending"
PENDING_BYTES = "vigil.intake.pending.bytes"  # bytes of span records waiting in the traces' lists, all traces
DROPPED = "vigil.intake.dropped"  # a hash: trace id -> spans over VIGIL_INTAKE_MAX_TRACE_SPANS not kept
DROPPED_TOTAL = "vigil.intake.dropped.total"  # every span over the cap ever, for the funnel and a dashboard
OVER_OPEN = "vigil.intake.over_open"  # spans of new traces not kept: VIGIL_INTAKE_MAX_OPEN_TRACES were pending
KEPT = "vigil.intake.kept"  # assembled traces' records, by when they were written (oldest first out)
KEPT_SIZES = "vigil.intake.kept.sizes"  # trace id -> the bytes its record is counted for
KEPT_BYTES = "vigil.intake.kept.bytes"  # their total (VIGIL_INTAKE_MAX_KEPT_BYTES)
KEPT_EVICTED = "vigil.intake.kept.evicted"  # records dropped for the budget, ever
JOINED = "joined"  # a trace's record field once its work joined a run of another trace: [host name, linked span id]
_REQUIRED = {"trace_id": str, "span_id": str, "name": str, "start": int, "end": int, "attributes": dict}

# Due traces -> a lease in the future, atomically: returns the claimed ids.
_CLAIM = """
local limit = tonumber(ARGV[3])
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, limit)
local ids = {}
for i = 1, #found, 2 do ids[#ids + 1] = found[i] end
if #ids == limit and limit > 0 then
  local taken = {}
  for _, id in ipairs(ids) do taken[id] = true end
  local last = found[#found]
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], last, last)) do
    if not taken[id] then ids[#ids + 1] = id end
  end
end
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
return ids
"""
# Append a trace's spans up to its caps (spans and bytes, kept in its record so they outlast the assembly that empties
# its list; none once it was assembled again more than the re-assembly cap allows); count the rest (per trace, and in
# total) and the bytes now waiting; mark the trace pending only when a span was kept, so spans over a cap never
# schedule an assembly. KEYS: the trace's list, DROPPED, DROPPED_TOTAL, the trace's record, PENDING_BYTES, PENDING, OVER_OPEN;
# ARGV: max spans, max bytes, keep seconds, trace id, max re-assemblies, now, max open, records... A trace neither
# pending nor kept is refused whole while ``max open`` traces are pending (OVER_OPEN counts its spans; {-1, n}).
_APPEND = """
local max_open = tonumber(ARGV[7])
if max_open > 0 and not redis.call('ZSCORE', KEYS[6], ARGV[4]) and redis.call('EXISTS', KEYS[4]) == 0
   and redis.call('ZCARD', KEYS[6]) >= max_open then
  redis.call('INCRBY', KEYS[7], #ARGV - 7)
  return {-1, #ARGV - 7}
end
local room = tonumber(ARGV[1]) - tonumber(redis.call('HGET', KEYS[4], 'spans') or '0')
if tonumber(redis.call('HGET', KEYS[4], 'assemblies') or '0') > tonumber(ARGV[5]) then room = 0 end
local bytes = tonumber(redis.call('HGET', KEYS[4], 'bytes') or '0')
local added = 0
local keep = {}
for i = 8, #ARGV do
  if #keep >= room or bytes + #ARGV[i] > tonumber(ARGV[2]) then break end
  bytes = bytes + #ARGV[i]
  added = added + #ARGV[i]
  keep[#keep + 1] = ARGV[i]
end
if #keep > 0 then
  for i = 1, #keep, 5000 do
    redis.call('RPUSH', KEYS[1], unpack(keep, i, math.min(i + 4999, #keep)))
  end
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
  redis.call('HSET', KEYS[4], 'bytes', bytes)
  redis.call('HINCRBY', KEYS[4], 'spans', #keep)
  redis.call('HINCRBY', KEYS[4], 'listed', added)
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[3]))
  redis.call('INCRBY', KEYS[5], added)
  redis.call('ZADD', KEYS[6], ARGV[6], ARGV[4])
end
local dropped = #ARGV - 7 - #keep
if dropped > 0 then
  redis.call('HINCRBY', KEYS[2], ARGV[4], dropped)
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3]))
  redis.call('INCRBY', KEYS[3], dropped)
end
return {#keep, dropped}
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


def trace_name(project: str, trace_id: str) -> str:
    """A trace's name in Redis, which every key above is made from: trace ids are the project's own, so the same id
    in two projects is two traces. ``<project>/<trace id>``, a '/' in the project escaped (a configured project
    name has none; an open intake takes what a span says); the default project's traces by their id alone, unless
    it has a '/'."""
    if project == DEFAULT_PROJECT and "/" not in trace_id:
        return trace_id
    return f"{project.replace('%', '%25').replace('/', '%2F')}/{trace_id}"


def split_name(name: str) -> tuple[str, str]:
    """(project, trace id) of a trace's name (``trace_name``)."""
    project, slash, trace_id = name.partition("/")
    return (project.replace("%2F", "/").replace("%25", "%"), trace_id) if slash else (DEFAULT_PROJECT, name)


def trace_id_of(name: str) -> str:
    """The trace id in a trace's name (``trace_name``)."""
    return split_name(name)[1]


def project_of(span: dict[str, Any]) -> str:
    """A span's project: its resource's ``vigil.project`` (set by the intake from the sender's key)."""
    project = (span.get("resource") or {}).get(PROJECT_RESOURCE)
    return str(project) if project else DEFAULT_PROJECT


def trace_key(name: str) -> str:
    return f"vigil.intake.trace.{name}"


def record_key(name: str) -> str:
    return f"vigil.intake.record.{name}"


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


_over_open_line = Every(10)


def store_spans(client: redis.Redis, spans: list[dict[str, Any]], *, keep_s: int, max_spans: int = 2000,
                max_bytes: int = 4 * 2**20, max_reassemblies: int = 20, max_open: int = 0,
                now: float | None = None) -> tuple[int, int]:
    """Append spans to their traces (at most ``max_spans`` spans and ``max_bytes`` of records kept per trace, in
    arrival order, and none for a trace assembled more than ``max_reassemblies`` times after its first: the others
    are counted in ``DROPPED``) and mark the traces that kept a span pending; returns how many traces kept a span
    and how many spans were over a cap. With ``VIGIL_INTAKE_MAX_OPEN_TRACES`` this bounds the Redis bytes pending
    traces can hold, and with the re-assembly cap the judge calls late spans can cause. A new trace while
    ``max_open`` traces are pending is not kept at all (its spans counted in ``OVER_OPEN``): the open-trace cap holds
    here, where spans are stored, however many requests the intakes let through before they saw it."""
    now = time.time() if now is None else now
    by_trace: dict[str, list[str]] = defaultdict(list)
    for span in spans:
        by_trace[trace_name(project_of(span), span["trace_id"])].append(json.dumps(span, ensure_ascii=False))
    append = client.register_script(_APPEND)
    pipe = client.pipeline(transaction=True)
    for trace_id, lines in by_trace.items():
        append(keys=[trace_key(trace_id), DROPPED, DROPPED_TOTAL, record_key(trace_id), PENDING_BYTES, PENDING,
                     OVER_OPEN], args=[max_spans, max_bytes, keep_s, trace_id, max_reassemblies, now, max_open, *lines],
               client=pipe)
    results = [(int(kept), int(n)) for kept, n in (pipe.execute() if by_trace else [])]
    touched = sum(1 for kept, _ in results if kept > 0)
    dropped = sum(n for kept, n in results if kept >= 0)
    refused = sum(n for kept, n in results if kept < 0)
    if dropped:
        log.warning("spans over the per-trace caps were not kept; their turns are marked truncated",
                    dropped=dropped, max_spans=max_spans, max_bytes=max_bytes, max_reassemblies=max_reassemblies,
                    traces=len(by_trace))
    if refused and _over_open_line():
        log.warning("spans of new traces not kept: VIGIL_INTAKE_MAX_OPEN_TRACES traces are waiting to settle",
                    spans=refused, max_open=max_open)
    return touched, dropped + refused


# Keep an assembled trace's record within the byte budget of every kept record: register its size, forget records
# that expired on their own, then drop the oldest until the total fits (a trace with spans waiting in its list keeps
# its budget fields and loses only what it kept for late spans). KEYS: KEPT, KEPT_SIZES, KEPT_BYTES; ARGV: trace name,
# size, now, keep seconds, budget, record key prefix. Returns how many records were dropped for the budget.
_KEEP = """
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local total = tonumber(redis.call('GET', KEYS[3]) or '0') + tonumber(ARGV[2]) - old
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[4]), 'LIMIT', 0, 1000)
for _, id in ipairs(expired) do
  total = total - tonumber(redis.call('HGET', KEYS[2], id) or '0')
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
end
local evicted = 0
while total > tonumber(ARGV[5]) do
  local oldest = redis.call('ZPOPMIN', KEYS[1])
  if #oldest == 0 then break end
  local id = oldest[1]
  total = total - tonumber(redis.call('HGET', KEYS[2], id) or '0')
  redis.call('HDEL', KEYS[2], id)
  if tonumber(redis.call('HGET', ARGV[6] .. id, 'listed') or '0') > 0 then
    redis.call('HDEL', ARGV[6] .. id, 'assembled', 'turns')
  else
    redis.call('DEL', ARGV[6] .. id)
  end
  evicted = evicted + 1
end
redis.call('SET', KEYS[3], math.max(total, 0))
return evicted
"""
KEPT_OVERHEAD = 900  # Redis bytes a kept record costs beyond what it keeps: its key and fields (~720), bookkeeping
_evicted_line = Every(60)


def keep_record(client: redis.Redis, name: str, size: int, *, budget: int, keep_s: int,
                now: float | None = None) -> int:
    """Count an assembled trace's record (by its name; ``size`` bytes of what it keeps) in the budget of every kept
    record (``VIGIL_INTAKE_MAX_KEPT_BYTES``, 0: none), dropping the oldest records over it; returns how many it dropped.
    A late span for a dropped trace is assembled alone, as after the keep time."""
    if budget <= 0:
        return 0
    now = time.time() if now is None else now
    evicted = int(client.register_script(_KEEP)(keys=[KEPT, KEPT_SIZES, KEPT_BYTES], args=[
        name, size + KEPT_OVERHEAD, now, keep_s, budget, record_key("")]))
    if evicted:
        client.incrby(KEPT_EVICTED, evicted)
        if _evicted_line():
            log.warning("assembled traces' records over VIGIL_INTAKE_MAX_KEPT_BYTES: the oldest dropped (a late span "
                        "for one is assembled alone)", dropped=evicted, budget=budget)
    return evicted


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
    ``lease_s``; and the lease's score. At most ``limit``, earliest seen first, **but a batch is never split**: the
    traces of one span batch were marked seen at one time (``store_spans``: one transaction, one score), and the
    members seen at the same time as the last one claimed are claimed with it (ties are ordered by name, not by when
    the traces started). So a run whose model calls are traces of their own, exported together, settles in one
    sweep, where its steps are kept before its turn looks them up (``vigil.worker.assembly.steps``), never with its
    turn in one sweep and a step it took in the next (a stored turn is not rewritten by a later trace)."""
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
    stored: dict[str, str] | None = None  # the turns an earlier assembly stored: root span id -> content digest
    joined: tuple[str, str] | None = None  # the host its work joined and the linked span (``links``), if it did


def trace_spans(client: redis.Redis, name: str, max_spans: int | None = None) -> Spans:
    """The kept span records of a trace (by its name, ``trace_name``): never more than ``max_spans`` (the cap they
    were stored under) are read from its list."""
    trace_id = trace_id_of(name)
    spans = Spans()
    pipe = client.pipeline(transaction=False)
    pipe.lrange(trace_key(name), 0, -1 if max_spans is None else max_spans - 1)
    pipe.hget(DROPPED, name)
    pipe.hmget(record_key(name), "assembled", "turns", JOINED)
    raws, dropped, (assembled, stored, joined) = pipe.execute()
    if assembled:
        spans.extend({**record, "trace_id": trace_id} for record in loads(zlib.decompress(assembled)))
        spans.earlier = len(spans)
    if stored:
        spans.stored = json.loads(stored)
    if joined:
        spans.joined = tuple(json.loads(joined))
    for raw in raws:
        try:
            spans.append(loads(raw))
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
        turn.setdefault("agent", service_of(spans) or "unknown")
        turn.setdefault("metadata", {})["source"] = "otlp"
        if dropped:  # assembled from the spans under the cap: say so on the turn
            turn["truncated"] = [*turn.get("truncated", []), "spans"]
            turn["metadata"]["vigil.spans_dropped"] = str(dropped)
    return result


def service_of(spans: list[dict[str, Any]]) -> str | None:
    """The service that sent a trace (``vigil.schemas.steps.service``), ``None`` when no span states one."""
    return service(spans) or None
