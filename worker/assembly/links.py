"""The worker's side of traces joined by span links (the rule is ``vigil.schemas.links``): a trace whose runs state no
user words, linked to a span of another trace that waited for it, joins the run that holds that span, which is
assembled again with its spans; the linked trace makes no turn of its own.

- **Per project.** A link names a trace of the linking trace's own project (``traces.trace_name`` of the linked id
  under the sender's project): trace ids are not secrets, and another project's trace with the same id is another
  trace, never read, re-assembled or re-scored through a link.
- **Decided once, at a trace's first assembly.** A trace whose runs were stored as turns of their own stays so (a
  stored turn is never removed by a join). A trace that joined a run keeps its host in its record (``joined``: the
  host's name and the linked span), and its spans that arrive later follow it there.
- **Only work the linked span waited for** (``links.waited``): the linked span is read from its trace's spans when
  this sweep holds it, else from the record of its last assembly (``late.compact`` keeps every span's times), and the
  linked trace's spans at hand are compared with it. A job a stored run started and left (its work ended after the
  span it is linked to) is assembled on its own, however late it comes: the stored turn is neither assembled nor
  scored again.
- **Only a run that is known.** The host is a trace this sweep assembles into a turn, or one whose record holds a
  stored turn; a host that itself joined another is followed to that one (``links.hosts``). A host still settling
  (its spans wait to be assembled, none stored as a turn yet: its root is often exported after the work it started)
  is waited for as a late parent is, up to ``VIGIL_INTAKE_PARENT_WAIT_S`` after the linked trace's last span. A link
  to a trace unknown, expired or evicted (``VIGIL_INTAKE_KEEP_S``, ``VIGIL_INTAKE_MAX_KEPT_BYTES``) joins nothing:
  the trace is assembled on its own, as if it had no link.
- **Within the host's caps.** The joined spans are appended to the host's list as late spans are, all or none,
  counted in the host's budget (``VIGIL_INTAKE_MAX_TRACE_SPANS``, ``VIGIL_INTAKE_MAX_TRACE_BYTES``) and refused once
  it was assembled more than ``VIGIL_INTAKE_MAX_REASSEMBLIES`` times: a refused trace is assembled on its own (nothing
  lost), and the later spans of a joined one are counted as dropped, like spans over a cap. A host this sweep
  assembles is read again with them before it settles (no second assembly); another is marked pending and assembled
  again after the settle delay, its stored turn replaced, and re-scored only if what a scorer reads changed
  (``late``).
- **Nothing silent.** The joined trace's funnel stage is ``joined``, once, when it joins (under the agent its own
  turn would have had, per turn monitor, so that agent's funnel row shows it, as ``no_turn`` does; its span id: the
  linked span), and a line is logged (at most one a minute).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from vigil.schemas import links
from vigil.schemas.json_text import loads
from vigil.schemas.rows import PipelineEvent
from vigil.schemas.spans import Assembly
from vigil.worker.assembly.traces import (
    DROPPED_TOTAL,
    JOINED,
    PENDING,
    PENDING_BYTES,
    Spans,
    assembly_of,
    record_key,
    split_name,
    trace_key,
    trace_name,
)
from vigil.worker.logs import Every

if TYPE_CHECKING:
    import redis

__all__ = ["MAX_HOPS", "Trace", "join_linked"]

log = structlog.get_logger("vigil.intake")

MAX_HOPS = 8  # stored hosts followed through the records of traces that joined others

# Append a linked trace's spans to its host's list, all or none, within the host's caps (spans, bytes, re-assemblies,
# counted as ``traces._APPEND`` counts late spans), and record the join in the linked trace's record. KEYS: the host's
# list, the host's record, PENDING_BYTES, PENDING, the linked trace's record; ARGV: max spans, max bytes, keep seconds,
# host name, max re-assemblies, now, mark pending (1/0), joined (the record's value), records... Returns 1 if appended.
_GRAFT = """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
if tonumber(redis.call('HGET', KEYS[2], 'assemblies') or '0') > tonumber(ARGV[5]) then return 0 end
local n = #ARGV - 8
local spans = tonumber(redis.call('HGET', KEYS[2], 'spans') or '0')
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
local added = 0
for i = 9, #ARGV do added = added + #ARGV[i] end
if spans + n > tonumber(ARGV[1]) or bytes + added > tonumber(ARGV[2]) then return 0 end
for i = 9, #ARGV, 5000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 4999, #ARGV)))
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
redis.call('HSET', KEYS[2], 'bytes', bytes + added)
redis.call('HINCRBY', KEYS[2], 'spans', n)
redis.call('HINCRBY', KEYS[2], 'listed', added)
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3]))
redis.call('INCRBY', KEYS[3], added)
if ARGV[7] == '1' then redis.call('ZADD', KEYS[4], ARGV[6], ARGV[4]) end
redis.call('HSET', KEYS[5], 'joined', ARGV[8])
redis.call('EXPIRE', KEYS[5], tonumber(ARGV[3]))
return 1
"""
_joined_line = Every(60)


@dataclass
class Trace:
    """A trace a sweep assembled: its name, its spans (reconciled), the conflicts found, and its assembly."""

    name: str
    spans: Spans
    conflicts: list[dict[str, Any]]
    result: Assembly


def join_linked(client: redis.Redis, traces: list[Trace], *, max_spans: int, max_bytes: int, max_reassemblies: int,
                keep_s: int, now: float, read: Callable[[str], tuple[Spans, list[dict[str, Any]]]],
                wait: Callable[[str], bool], monitors: list[str]) -> tuple[list[PipelineEvent], bool]:
    """Join the sweep's linked traces to the runs their work belongs to (the module's rule), in place: a joined
    trace's assembly makes no turn, a host of this sweep is read again (``read(name)``: its spans, reconciled, and
    the conflicts) and assembled again, and a trace whose host is still settling is offered to ``wait(name)`` (true:
    it was put back to be claimed later, and leaves ``traces``); returns the joined traces' funnel events (one per
    turn monitor in ``monitors``) and whether
    a host outside the sweep was marked pending (a sweep is then due after the settle delay). No Redis call for a
    sweep with no linked trace."""
    by_name = {t.name: t for t in traces}
    targets: dict[str, tuple[str, str]] = {}
    forward: dict[str, tuple[str, str]] = {}
    for trace in traces:
        project = split_name(trace.name)[0]
        if trace.spans.joined is not None:
            forward[trace.name] = trace.spans.joined
        elif trace.result.link is not None and not trace.spans.earlier and not trace.spans.stored:
            targets[trace.name] = (trace_name(project, trace.result.link[0]), trace.result.link[1])
    if not targets and not forward:
        return [], False
    stored = _stored_hosts(client, {host for host, _ in targets.values()} - set(by_name), targets)
    for name in [n for n, (host, _) in targets.items() if n in by_name and stored.get(host) == "settling"]:
        if wait(name):  # its host has spans but no turn yet: wait for it as for a late parent
            traces.remove(by_name.pop(name))
            del targets[name]
    linked = _linked_spans(client, targets, by_name)
    targets = {name: target for name, target in targets.items()
               if links.waited(linked.get(target), by_name[name].spans)}  # else work of its own: a background job
    joined = links.hosts(targets, lambda name: bool(by_name[name].result.turns) if name in by_name
                         else stored.get(name) == "run")
    events: list[PipelineEvent] = []
    reread: set[str] = set()
    pending = False
    moves = [(n, h) for n, h in joined.items() if n in by_name] + [(n, h) for n, (h, _) in forward.items()]
    for name, host in moves:
        trace = by_name[name]
        under = (targets.get(name) or forward[name])[1]
        spans = trace.spans[trace.spans.earlier:] if name in forward else trace.spans
        records = [json.dumps(s, ensure_ascii=False) for s in links.graft(
            (s for s in spans if not s.get("joined")), split_name(host)[1], under)]
        ok = bool(records) and bool(client.register_script(_GRAFT)(
            keys=[trace_key(host), record_key(host), PENDING_BYTES, PENDING, record_key(name)],
            args=[max_spans, max_bytes, keep_s, host, max_reassemblies, now, 0 if host in by_name else 1,
                  json.dumps([host, under]), *records]))
        if not ok and name not in forward:
            continue  # over the host's caps, or the host is gone: assembled on its own
        if not ok and records:
            client.incrby(DROPPED_TOTAL, len(records))
        if name not in forward:  # counted once, when it joined: its later spans only follow it
            events += _events(name, trace.result, under, monitors)
        trace.result = Assembly()
        if host in by_name:
            reread.add(host)
        else:
            pending = pending or ok
        if _joined_line():
            log.info("a trace whose runs state no user words joined the run its link names", trace=name, host=host,
                     linked_span_id=under)
    for host in reread:
        trace = by_name[host]
        trace.spans, trace.conflicts = read(host)
        trace.result = assembly_of(trace.spans)
    return events, pending


def _linked_spans(client: redis.Redis, targets: dict[str, tuple[str, str]], by_name: dict[str, Trace],
                  ) -> dict[tuple[str, str], dict[str, Any]]:
    """The spans the links name, by (trace name, span id): from their trace's spans when this sweep holds it, else
    from the record of its last assembly (``late.compact``: every span's place and times); a span not known is
    absent."""
    wanted = set(targets.values())
    outside = sorted({name for name, _ in wanted if name not in by_name})
    records = client.pipeline(transaction=False)
    for name in outside:
        records.hget(record_key(name), "assembled")
    spans = {name: by_name[name].spans for name, _ in wanted if name in by_name}
    spans.update((name, loads(zlib.decompress(raw))) for name, raw in zip(
        outside, records.execute() if outside else [], strict=True) if raw)
    return {(name, span["span_id"]): span for name, found in spans.items() for span in found
            if (name, span["span_id"]) in wanted and not span.get("log")}


def _stored_hosts(client: redis.Redis, names: set[str], targets: dict[str, tuple[str, str]]) -> dict[str, str]:
    """What each host outside the sweep is: ``run`` (its record holds a stored turn), ``settling`` (its spans wait in
    the pending set, never assembled into a turn yet), else nothing known; a host that joined another is added to
    ``targets`` and followed (at most ``MAX_HOPS`` records deep)."""
    out: dict[str, str] = {}
    for _ in range(MAX_HOPS):
        names = {n for n in names if n not in out}
        if not names:
            break
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.hmget(record_key(name), "turns", JOINED)
            pipe.zscore(PENDING, name)
        found = pipe.execute()
        follow = set()
        for name, (turns, joined), score in zip(names, found[::2], found[1::2], strict=True):
            out[name] = "run" if turns and json.loads(turns) else "settling" if score is not None and not turns else ""
            if joined:
                host, under = json.loads(joined)
                targets[name] = (host, under)
                follow.add(host)
        names = follow
    return out


def _events(name: str, result: Assembly, under: str, monitors: list[str]) -> list[PipelineEvent]:
    """The ``joined`` stage of a trace, under the agent its turn would have had (``result``: its own assembly)."""
    agent = str(next((t["agent"] for t in result.turns if t.get("agent")), "unknown"))[:128]
    return [PipelineEvent(project=split_name(name)[0][:128], agent=agent, monitor=monitor, stage="joined",
                          trace_id=split_name(name)[1], span_id=under) for monitor in monitors or [""]]
