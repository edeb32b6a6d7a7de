"""Late roots: an agent's root span is exported last (the OTel SDK's batch processor sends finished spans every 5 s,
and the root finishes after its children), so a trace can settle before its root arrives.

- **Wait where the evidence says the trace is unfinished.** A span whose parent is in the same process (OTLP span
  flags; a remote parent is never waited for) and has not arrived: the trace is not assembled until the parent comes
  or ``VIGIL_INTAKE_PARENT_WAIT_S`` (at most ``VIGIL_INTAKE_KEEP_S``) has passed since its last span. Most late
  roots then cost no judge call at all. When the last span came is read from the trace's key: its TTL is reset to
  ``VIGIL_INTAKE_KEEP_S`` by every span.
- **Supersede what a later assembly replaces.** An earlier assembly's turns are those its compact record (below)
  makes; a turn of an earlier assembly that the new one does not make (a root arrived after the wait, under another span id) is superseded:
  marked in Redis (``vigil.superseded.<trace>.<span>``, so a score task still waiting for it scores nothing), its rows
  deleted by the writer, and a ``superseded`` stage in the funnel.
- **Keep only what a late span needs.** An assembly takes the spans it read out of the trace's list and keeps them in
  its record (``vigil.worker.assembly.traces.record_key``, kept as long as the trace's budget), compressed
  (``assembled``): whole for the spans its turns were made of, as a skeleton (ids, parent,
  name, times: where the span sits in the tree) for the others. A late span is assembled with them, so a late root
  still gathers the children its partial turns were made of, at a fraction of the bytes.
"""

from __future__ import annotations

import json
import time
import zlib
from typing import Any

import redis
from vigil.schemas.rows import PipelineEvent, Supersession
from vigil.schemas.spans import Assembly
from vigil.worker.assembly.traces import PENDING, PENDING_BYTES, Spans, assembly_of, record_key, trace_key

__all__ = ["compact", "defer", "is_superseded", "superseded_by", "waited_enough"]

_SUPERSEDED = "vigil.superseded."


def waited_enough(client: redis.Redis, trace_id: str, *, keep_s: float, wait_s: float,
                  now: float | None = None) -> tuple[bool, float]:
    """Whether a trace whose parent is missing has waited ``wait_s`` since its last span; and when it will have."""
    now = time.time() if now is None else now
    ttl_ms = client.pttl(trace_key(trace_id))
    last = now - keep_s + ttl_ms / 1000 if ttl_ms > 0 else now - keep_s
    due = last + min(wait_s, keep_s)
    return now >= due, due


def defer(client: redis.Redis, trace_id: str, due: float, settle_s: float) -> None:
    """Put a claimed trace back in the pending set so it is claimed again at ``due`` (unless a span comes first);
    its claim's release then leaves it (its score is no longer the lease's)."""
    client.zadd(PENDING, {trace_id: due - settle_s})


_SKELETON = ("span_id", "parent_id", "name", "start", "end", "kind", "parent_remote")


def compact(spans: list[dict[str, Any]], used: set[str]) -> list[dict[str, Any]]:
    """What a later assembly of the trace needs of ``spans``: the spans (and log records) in ``used`` whole, the
    others' place in the tree only; a span id seen twice once (the last copy, as assembly reads them); no trace id
    (the record's key says it)."""
    by_id: dict[str, dict[str, Any]] = {}
    logs = []
    for span in spans:
        whole = {k: v for k, v in span.items() if k != "trace_id"}
        if span.get("log"):
            if span["span_id"] in used:
                logs.append(whole)
        elif span["span_id"] in used:
            by_id[span["span_id"]] = whole
        else:
            by_id[span["span_id"]] = {**{k: span[k] for k in _SKELETON if k in span}, "attributes": {}}
    return [*by_id.values(), *logs]


def superseded_by(client: redis.Redis, trace_id: str, spans: Spans, result: Assembly, *, keep_s: int,
                  mark_s: int) -> tuple[list[Supersession], list[PipelineEvent]]:
    """Record the compact spans a late span needs, taking the spans read out of the
    trace's list; return the earlier turns it replaces (marked superseded) and their funnel events."""
    turns, record = result.turns, record_key(trace_id)
    earlier = assembly_of(spans[: spans.earlier]).turns if spans.earlier else []
    now_ids = {t["span_id"] for t in turns}
    pipe = client.pipeline(transaction=True)
    pipe.ltrim(trace_key(trace_id), spans.listed, -1)
    pipe.hset(record, "assembled", zlib.compress(json.dumps(compact(spans, result.used), ensure_ascii=False,
                                                            separators=(",", ":")).encode(), 9))
    pipe.hincrby(record, "listed", -spans.listed_bytes)
    pipe.decrby(PENDING_BYTES, spans.listed_bytes)
    pipe.expire(record, keep_s)
    gone = [{"span_id": t["span_id"], "project": t.get("project", "default"), "agent": t.get("agent", "unknown")}
            for t in earlier if t["span_id"] not in now_ids]
    for turn in gone:
        pipe.set(f"{_SUPERSEDED}{trace_id}.{turn['span_id']}", 1, ex=mark_s)
    pipe.execute()
    by = turns[0]["span_id"] if turns else ""
    return ([Supersession(trace_id=trace_id, span_id=t["span_id"], by_span_id=by) for t in gone],
            [PipelineEvent(project=t["project"], agent=t["agent"], stage="superseded", trace_id=trace_id,
                           span_id=t["span_id"]) for t in gone])


def is_superseded(client: redis.Redis, trace_id: str, span_id: str | None) -> bool:
    return bool(span_id) and bool(client.exists(f"{_SUPERSEDED}{trace_id}.{span_id}"))
