"""Who may change a stored turn: a turn id (project, trace id, span id) means one turn, so a resend cannot replace it.

Ingest keeps, per turn id it stored, the digest of the turn as it came (``vigil.turn.<hash of the id>``, kept
``VIGIL_TURN_OWNED_S``). A turn that comes again under that id:

- with the same content (a producer's retry, a redelivery) is a no-op: not stored or scored again;
- with other content is a *conflict*: refused, the stored turn and its scores kept, a ``conflict`` stage in the
  funnel and a warning naming the sender's project and address;
- unless the trace's assembly sends it as an update (``updates``: a late span changed what a scorer reads of a turn
  of its own run, ``vigil.worker.assembly.late``): then it replaces the stored one, as assembly decided.

The digest is written once the turn's rows and score tasks are handed on, so a worker that dies before then leaves
the turn to its redelivery; a turn id seen after ``VIGIL_TURN_OWNED_S`` is taken as new.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from typing import Any

import redis
import structlog
from vigil.schemas import Turn
from vigil.schemas.rows import PipelineEvent

__all__ = ["Screened", "claim", "screen", "turn_key", "update_id"]

log = structlog.get_logger("vigil.tasks")

_PREFIX = "vigil.turn."


def turn_key(turn: Turn) -> str:
    """The Redis key of a turn id (hashed: ids are free text on ``/v1/turns``, and the key stays short)."""
    ident = json.dumps([turn.project, turn.trace_id, turn.span_id or ""], ensure_ascii=False)
    return _PREFIX + hashlib.sha256(ident.encode()).hexdigest()[:32]


def update_id(trace_id: str, span_id: str) -> str:
    """How assembly names a turn it sends as an update of a stored one."""
    return f"{trace_id}.{span_id}"


def _digest(raw: dict[str, Any]) -> str:
    text = json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Screened:
    """A batch's turns sorted by what their ids allow: ``keep`` (index, digest) go on, ``conflicts`` are refused
    (their funnel events), ``repeats`` are no-ops."""

    def __init__(self) -> None:
        self.keep: list[tuple[int, str]] = []
        self.conflicts: list[PipelineEvent] = []
        self.repeats = 0


def screen(client: redis.Redis, turns: Sequence[Turn], raws: Sequence[dict[str, Any]], *,
           updates: Collection[str] = (), sender: dict[str, Any] | None = None) -> Screened:
    """Sort a batch's turns by their ids' stored digests (one round trip)."""
    out = Screened()
    if not turns:
        return out
    stored = client.mget([turn_key(t) for t in turns])
    for i, (turn, raw, before) in enumerate(zip(turns, raws, stored, strict=True)):
        digest = _digest(raw)
        before = before.decode() if isinstance(before, bytes) else before
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


def claim(client: redis.Redis, turns: Sequence[Turn], digests: Sequence[str], *, ttl_s: int) -> None:
    """Write the digests of the turns now stored (after their rows and score tasks were handed on)."""
    if not turns:
        return
    pipe = client.pipeline(transaction=False)
    for turn, digest in zip(turns, digests, strict=True):
        pipe.set(turn_key(turn), digest, ex=ttl_s)
    pipe.execute()
