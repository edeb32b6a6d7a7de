"""Late roots: an agent's root span is exported last (the OTel SDK's batch processor sends finished spans every 5 s,
and the root finishes after its children), so a trace can settle before its root arrives.

- **Wait where the evidence says the trace is unfinished.** A span whose parent is in the same process (OTLP span
  flags; a remote parent is never waited for) and has not arrived: the trace is not assembled until the parent comes
  or ``VIGIL_INTAKE_PARENT_WAIT_S`` (at most ``VIGIL_INTAKE_KEEP_S``) has passed since its last span. Most late
  roots then cost no judge call at all. When the last span came is read from the trace's key: its TTL is reset to
  ``VIGIL_INTAKE_KEEP_S`` by every span.
- **Supersede what a later assembly replaces.** Each assembly records its turns' ids (``vigil.intake.turns.<trace>``,
  kept as long as the spans); a turn of an earlier assembly that the new one does not make (a root arrived after the
  wait, under another span id) is superseded: marked in Redis (``vigil.superseded.<trace>.<span>``, so a score task
  still waiting for it scores nothing), its rows deleted by the writer, and a ``superseded`` stage in the funnel.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis
from vigil.schemas.rows import PipelineEvent, Supersession
from vigil.worker.intake.traces import PENDING, trace_key

__all__ = ["defer", "is_superseded", "superseded_by", "waited_enough"]

_TURNS = "vigil.intake.turns."
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


def superseded_by(client: redis.Redis, trace_id: str, turns: list[dict[str, Any]], *, keep_s: int,
                  mark_s: int) -> tuple[list[Supersession], list[PipelineEvent]]:
    """Record this assembly's turns; return the earlier turns it replaces (marked superseded) and their funnel
    events."""
    key = _TURNS + trace_id
    earlier = client.get(key)
    now_ids = {t["span_id"] for t in turns}
    pipe = client.pipeline(transaction=False)
    pipe.set(key, json.dumps([{"span_id": t["span_id"], "project": t.get("project", "default"),
                               "agent": t.get("agent", "unknown")} for t in turns]), ex=keep_s)
    gone = [t for t in (json.loads(earlier) if earlier else []) if t["span_id"] not in now_ids]
    for turn in gone:
        pipe.set(f"{_SUPERSEDED}{trace_id}.{turn['span_id']}", 1, ex=mark_s)
    pipe.execute()
    by = turns[0]["span_id"] if turns else ""
    return ([Supersession(trace_id=trace_id, span_id=t["span_id"], by_span_id=by) for t in gone],
            [PipelineEvent(project=t["project"], agent=t["agent"], stage="superseded", trace_id=trace_id,
                           span_id=t["span_id"]) for t in gone])


def is_superseded(client: redis.Redis, trace_id: str, span_id: str | None) -> bool:
    return bool(span_id) and bool(client.exists(f"{_SUPERSEDED}{trace_id}.{span_id}"))
