"""Who may change a stored turn: a turn id (project, trace id, span id) means one turn, so a resend cannot replace it.

Ingest keeps, per turn id it stored, the digest of the turn as it came, for at least ``VIGIL_TURN_OWNED_S`` (at
most twice that). A turn that comes again under that id:

- with the same content (a producer's retry, a redelivery) is a no-op: not stored or scored again;
- with other content is a *conflict*: refused, the stored turn and its scores kept, a ``conflict`` stage in the
  funnel and a warning naming the sender's project and address;
- unless the trace's assembly sends it as an update (``updates``: a late span changed what a scorer reads of a turn
  of its own run, ``vigil.worker.assembly.late``): then it replaces the stored one, as assembly decided.

The digest is written once the turn's rows and score tasks are handed on, so a worker that dies before then leaves
the turn to its redelivery; a turn id seen after ``VIGIL_TURN_OWNED_S`` is taken as new.

Every stored turn leaves one of these, so they are kept small: a turn id is hashed (ids are free text on
``/v1/turns``) into one of ``BUCKETS`` hashes of its period (``vigil.turn.<period>.<bucket>``, periods of
``VIGIL_TURN_OWNED_S``; a period's hashes expire at the end of the next one, and a lookup reads the current and the
previous period) as a 12-byte field holding the 8-byte digest: about 25 bytes a turn while a bucket stays small
enough for Redis's compact encoding (128 entries: half a million turns a period), instead of a key of ~165 bytes each
(a flood of 200,000 one-span traces left 33 MB of them).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Sequence
from typing import Any

import redis
import structlog
from vigil.schemas import Turn
from vigil.schemas.rows import PipelineEvent

__all__ = ["BUCKETS", "Screened", "claim", "screen", "update_id"]

log = structlog.get_logger("vigil.tasks")

_PREFIX = "vigil.turn."
BUCKETS = 4096  # 12 bits of the id's hash


def _slot(turn: Turn) -> tuple[int, bytes]:
    """A turn id's bucket and field (the id hashed: 12 bits pick the bucket, the next 12 bytes are the field)."""
    ident = json.dumps([turn.project, turn.trace_id, turn.span_id or ""], ensure_ascii=False)
    hashed = hashlib.sha256(ident.encode()).digest()
    return int.from_bytes(hashed[:2], "big") >> 4, hashed[2:14]


def _key(period: int, bucket: int) -> str:
    return f"{_PREFIX}{period}.{bucket:03x}"


def update_id(trace_id: str, span_id: str) -> str:
    """How assembly names a turn it sends as an update of a stored one."""
    return f"{trace_id}.{span_id}"


def _digest(raw: dict[str, Any]) -> bytes:
    text = json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).digest()[:8]


class Screened:
    """A batch's turns sorted by what their ids allow: ``keep`` (index, digest) go on, ``conflicts`` are refused
    (their funnel events), ``repeats`` are no-ops."""

    def __init__(self) -> None:
        self.keep: list[tuple[int, bytes]] = []
        self.conflicts: list[PipelineEvent] = []
        self.repeats = 0


def screen(client: redis.Redis, turns: Sequence[Turn], raws: Sequence[dict[str, Any]], *, ttl_s: int,
           updates: Collection[str] = (), sender: dict[str, Any] | None = None, now: float | None = None) -> Screened:
    """Sort a batch's turns by their ids' stored digests (one round trip)."""
    out = Screened()
    if not turns:
        return out
    period = int((time.time() if now is None else now) // ttl_s)
    pipe = client.pipeline(transaction=False)
    for turn in turns:
        bucket, field = _slot(turn)
        pipe.hget(_key(period, bucket), field)
        pipe.hget(_key(period - 1, bucket), field)
    found = pipe.execute()
    for i, (turn, raw) in enumerate(zip(turns, raws, strict=True)):
        digest, before = _digest(raw), found[2 * i] or found[2 * i + 1]
        if before is None or update_id(turn.trace_id, turn.span_id or "") in updates:
            out.keep.append((i, digest))
        elif before == digest:
            out.repeats += 1
        else:
            log.warning("a turn sent again with other content was refused; the stored turn and its scores are kept",
                        project=turn.project, agent=turn.agent, trace_id=turn.trace_id, span_id=turn.span_id,
                        sender=(sender or {}).get("address", "redis"),
                        sender_project=(sender or {}).get("project", turn.project))
            out.conflicts.append(PipelineEvent(project=turn.project, agent=turn.agent, stage="conflict",
                                               trace_id=turn.trace_id, span_id=turn.span_id or ""))
    return out


def claim(client: redis.Redis, turns: Sequence[Turn], digests: Sequence[bytes], *, ttl_s: int,
          now: float | None = None) -> None:
    """Write the digests of the turns now stored (after their rows and score tasks were handed on)."""
    if not turns:
        return
    period = int((time.time() if now is None else now) // ttl_s)
    pipe = client.pipeline(transaction=False)
    for turn, digest in zip(turns, digests, strict=True):
        bucket, field = _slot(turn)
        pipe.hset(_key(period, bucket), field, digest)
        pipe.expireat(_key(period, bucket), (period + 2) * ttl_s)
    pipe.execute()
