"""Late roots: an agent's root span is exported last (the OTel SDK's batch processor sends finished spans every 5 s,
and the root finishes after its children), so a trace can settle before its root arrives.

- **Wait where the evidence says the trace is unfinished.** A span whose parent is in the same process (OTLP span
  flags; a remote parent is never waited for) and has not arrived: the trace is not assembled until the parent comes
  or ``VIGIL_INTAKE_PARENT_WAIT_S`` (at most ``VIGIL_INTAKE_KEEP_S``) has passed since its last span. Most late
  roots then cost no judge call at all. When the last span came is read from the trace's key: its TTL is reset to
  ``VIGIL_INTAKE_KEEP_S`` by every span.
- **A turn changes only through its own run.** The record keeps the turns an assembly stored (``turns``: root span
  id -> the digest of what scorers read, ``content_digest``). A later assembly's turn under the same id replaces it
  only when that digest changed (a late span that changes nothing a scorer reads costs no judge call); a stored turn
  the new assembly does not make is *superseded* only when a span of the new assembly's turn is an ancestor of its
  root (a late root: marked in Redis, ``vigil.superseded.<trace name>.<span>``, so a score task still waiting for it
  scores nothing; its rows deleted by the writer; a ``superseded`` stage in the funnel; a log line naming the span
  that caused it). Any other stored turn is kept as it is: an unrelated span (a parentless agent span sent into the
  trace) is another run, or nothing, never a deletion.
- **A span id means one span.** The first copy of a span id wins (``reconcile``): a copy with the same content
  (an exporter's retry) is dropped, one with other content is a *conflict*: dropped, a ``conflict`` stage counted
  and a warning naming the sender's project and address (``sender``, set by the intake).
- **A span's log records come with it.** GenAI log records (``/v1/logs``) are part of their span, and arrive with it
  or before its trace is assembled. Once an assembly has read a span (it is in the trace's record, whole or as a
  skeleton), a later log record for it repeating one of its events (``schemas.spans.event_key``: an exporter's
  retry) is dropped, and any other is a *conflict* like a span resent with other content: dropped, counted and
  logged, so a log record can neither change what a stored turn says nor make a span above it a run that
  supersedes it. A late span's own records (a span id no assembly read) are attached as ever.
- **Keep only what a late span needs.** An assembly takes the spans it read out of the trace's list and keeps them in
  its record (``vigil.worker.assembly.traces.record_key``, kept as long as the trace's budget), compressed
  (``assembled``): whole for the spans its turns were made of, as a skeleton (ids, parent,
  name, times: where the span sits in the tree) for the others. A late span is assembled with them, so a late root
  still gathers the children its partial turns were made of, at a fraction of the bytes.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from vigil.schemas.rows import PipelineEvent, Supersession
from vigil.schemas.spans import Assembly, event_key
from vigil.worker.assembly.traces import (
    PENDING,
    PENDING_BYTES,
    Spans,
    assembly_of,
    keep_record,
    record_key,
    trace_id_of,
    trace_key,
    trace_name,
)

if TYPE_CHECKING:
    import redis

__all__ = ["Settled", "compact", "conflict_events", "content_digest", "defer", "is_superseded", "reconcile", "settle",
           "span_digest", "waited_enough"]

log = structlog.get_logger("vigil.intake")

_SUPERSEDED = "vigil.superseded."


def waited_enough(client: redis.Redis, name: str, *, keep_s: float, wait_s: float,
                  now: float | None = None) -> tuple[bool, float]:
    """Whether a trace (by its name, ``traces.trace_name``) whose parent is missing has waited ``wait_s`` since its
    last span; and when it will have."""
    now = time.time() if now is None else now
    ttl_ms = client.pttl(trace_key(name))
    last = now - keep_s + ttl_ms / 1000 if ttl_ms > 0 else now - keep_s
    due = last + min(wait_s, keep_s)
    return now >= due, due


def defer(client: redis.Redis, name: str, due: float, settle_s: float) -> None:
    """Put a claimed trace back in the pending set so it is claimed again at ``due`` (unless a span comes first);
    its claim's release then leaves it (its score is no longer the lease's)."""
    client.zadd(PENDING, {name: due - settle_s})


_SKELETON = ("span_id", "parent_id", "name", "start", "end", "kind", "parent_remote", "links", "links_more", "joined",
             "digest")
_NOT_CONTENT = frozenset({"trace_id", "sender", "digest"})  # where a span came from, not what it says


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def span_digest(span: dict[str, Any]) -> str:
    """What a span says, as a short digest (a skeleton keeps its whole span's): two copies of a span id with the
    same digest are one span sent twice."""
    return span.get("digest") or _digest({k: v for k, v in span.items() if k not in _NOT_CONTENT})


def content_digest(turn: dict[str, Any], metadata_keys: Collection[str] = ()) -> str:
    """What a scorer reads of a turn (question, answer, system, contexts, tool calls, reference, who and where it
    is, whether its content was captured, and the metadata ``metadata_keys`` a monitor's filter reads): a later
    assembly whose turn has the same digest has nothing new to score."""
    metadata = turn.get("metadata") or {}
    keys = {*metadata_keys, "vigil.content"}
    return _digest({**{k: turn.get(k) for k in ("input", "output", "system", "contexts", "tool_calls", "reference",
                                                "project", "agent", "environment", "tags", "origin")},
                    "metadata": {k: metadata[k] for k in sorted(keys) if k in metadata}})


def compact(spans: list[dict[str, Any]], used: set[str]) -> list[dict[str, Any]]:
    """What a later assembly of the trace needs of ``spans``: the spans (and log records) in ``used`` whole, the
    others' place in the tree and their digest only; a span id seen twice once (the first copy: ``reconcile``); no
    trace id (the record's key says it)."""
    by_id: dict[str, dict[str, Any]] = {}
    logs = []
    for span in spans:
        whole = {k: v for k, v in span.items() if k != "trace_id"}
        if span.get("log"):
            if span["span_id"] in used:
                logs.append(whole)
        elif span["span_id"] in by_id:
            continue
        elif span["span_id"] in used:
            by_id[span["span_id"]] = whole
        else:
            by_id[span["span_id"]] = {**{k: span[k] for k in _SKELETON if k in span}, "attributes": {},
                                      "digest": span_digest(span)}
    return [*by_id.values(), *logs]


def reconcile(spans: Spans) -> tuple[Spans, list[dict[str, Any]]]:
    """The trace's spans with each span id once, the first copy kept (an earlier assembly's come first), and the log
    records of spans no earlier assembly read; and what said something else of a span already there (conflicts):
    later copies of a span, log records with events an assembled span did not have."""
    kept, conflicts, seen = Spans(), [], {}
    assembled: dict[str, set[tuple[str, Any, str]]] = {}  # span id an earlier assembly read -> its events
    for index, span in enumerate(spans):
        if index < spans.earlier:
            assembled.setdefault(span["span_id"], set()).update(map(event_key, span.get("events") or ()))
        elif span.get("log") and span["span_id"] in assembled:
            if not set(map(event_key, span.get("events") or ())) <= assembled[span["span_id"]]:
                conflicts.append(span)
            continue  # the span's content was settled when it was assembled
        if span.get("log"):
            kept.append(span)
            continue
        first = seen.get(span["span_id"])
        if first is None:
            seen[span["span_id"]] = span
            kept.append(span)
        elif span_digest(first) != span_digest(span):
            conflicts.append(span)
    for name in ("dropped", "earlier", "listed", "listed_bytes", "stored", "joined"):
        setattr(kept, name, getattr(spans, name))
    return kept, conflicts


@dataclass
class Settled:
    """What one assembly of a trace does: the turns to ingest (new, or changed for a scorer: ``updates`` names the
    stored turns among them), the stored turns a late root replaced, and their funnel events."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    superseded: list[Supersession] = field(default_factory=list)
    events: list[PipelineEvent] = field(default_factory=list)


def _stored_turns(spans: Spans, metadata_keys: Collection[str]) -> dict[str, str]:
    """The turns stored for the trace (root span id -> content digest), as its record says; a record written before
    it said so: those its earlier spans make."""
    if spans.stored is not None:
        return spans.stored
    if not spans.earlier:
        return {}
    return {t["span_id"]: content_digest(t, metadata_keys) for t in assembly_of(spans[: spans.earlier]).turns}


def _ancestor_turn(span_id: str, parents: dict[str, str | None], roots: Collection[str]) -> list[str]:
    """The path from ``span_id`` up to the first of ``roots`` above it (that root last); empty when none is."""
    path, node, seen = [], parents.get(span_id), {span_id}
    while node and node not in seen:
        path.append(node)
        if node in roots:
            return path
        seen.add(node)
        node = parents.get(node)
    return []


def settle(client: redis.Redis, name: str, spans: Spans, result: Assembly, *, keep_s: int, mark_s: int,
           metadata_keys: Collection[str] = (), kept_bytes: int = 0) -> Settled:
    """Record what a late span needs (the compact spans, taking the spans read out of the trace's list, and the
    stored turns' digests) and decide what the assembly changes: its turns that are new or changed for a scorer,
    and the stored turns a late root replaced (marked superseded), each removal logged with the span that caused
    it."""
    out, record, trace_id = Settled(), record_key(name), trace_id_of(name)
    stored = _stored_turns(spans, metadata_keys)
    made = {t["span_id"]: (t, content_digest(t, metadata_keys)) for t in result.turns}
    for span_id, (turn, digest) in made.items():
        if span_id not in stored:
            out.turns.append(turn)  # a run not seen before
        elif stored[span_id] != digest:
            out.turns.append(turn)
            out.updates.append(span_id)
    parents = {s["span_id"]: s.get("parent_id") for s in spans if not s.get("log")}
    listed = {s["span_id"] for s in spans[spans.earlier:]}
    kept: dict[str, str] = {}
    for span_id, digest in stored.items():
        if span_id in made:
            continue
        path = _ancestor_turn(span_id, parents, made)
        if not path:  # nothing of the new assembly is above it: another run, or nothing, never a deletion
            kept[span_id] = digest
            continue
        turn, by = made[path[-1]][0], path[-1]
        cause = next((node for node in path if node in listed), by)
        project, agent = turn.get("project", "default"), turn.get("agent", "unknown")
        log.info("turn superseded by a late root: its rows and scores are deleted", reason="late root",
                 trace_id=trace_id, span_id=span_id, by_span_id=by, caused_by=cause, project=project)
        out.superseded.append(Supersession(project=project, trace_id=trace_id, span_id=span_id, by_span_id=by,
                                           caused_by=cause))
        out.events.append(PipelineEvent(project=project, agent=agent, stage="superseded", trace_id=trace_id,
                                        span_id=span_id))
    turns = {**kept, **{span_id: digest for span_id, (_, digest) in made.items()}}
    used = set(result.used) | {s["span_id"] for s in spans[: spans.earlier] if "digest" not in s}
    kept = {"assembled": zlib.compress(json.dumps(compact(spans, used), ensure_ascii=False,
                                              separators=(",", ":")).encode(), 9),
            "turns": json.dumps(turns, separators=(",", ":"))}
    pipe = client.pipeline(transaction=True)
    pipe.ltrim(trace_key(name), spans.listed, -1)
    pipe.hset(record, mapping=kept)
    pipe.hincrby(record, "listed", -spans.listed_bytes)
    pipe.hincrby(record, "assemblies", 1)  # the re-assembly cap (``traces.store_spans``) reads it
    pipe.decrby(PENDING_BYTES, spans.listed_bytes)
    pipe.expire(record, keep_s)
    for gone in out.superseded:
        pipe.set(f"{_SUPERSEDED}{name}.{gone.span_id}", 1, ex=mark_s)
    pipe.execute()
    keep_record(client, name, sum(map(len, kept.values())), budget=kept_bytes, keep_s=keep_s)  # oldest first out
    return out


def conflict_events(trace_id: str, conflicts: list[dict[str, Any]]) -> list[PipelineEvent]:
    """A ``conflict`` stage and a warning per span resent with other content, or log record with new events for an
    assembled span (what was assembled is kept)."""
    events = []
    for span in conflicts:
        resource = span.get("resource") or {}
        project = str(resource.get("vigil.project") or "default")[:128]
        agent = str(resource.get("service.name") or "unknown")[:128]
        what = ("a log record for a span already assembled said something new: refused; the assembled span is kept"
                if span.get("log") else "a span resent with other content was refused; the first copy is kept")
        log.warning(what, trace_id=trace_id, span_id=span["span_id"], project=project,
                    sender=span.get("sender", "unknown"))
        events.append(PipelineEvent(project=project, agent=agent, stage="conflict", trace_id=trace_id,
                                    span_id=span["span_id"]))
    return events


def is_superseded(client: redis.Redis, project: str, trace_id: str, span_id: str | None) -> bool:
    return bool(span_id) and bool(client.exists(f"{_SUPERSEDED}{trace_name(project, trace_id)}.{span_id}"))
