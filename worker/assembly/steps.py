"""The worker's side of a run whose model calls are traces of their own (the rule is ``vigil.schemas.steps``): the
steps left open that a sweep's traces leave are kept in Redis, so that the turn that continues one, in a trace
assembled in this sweep or a later one, adds the step's usage to the run's.

- **Per project.** A step is kept under its trace's project (the sender's key, ``traces.split_name``), and a turn
  looks up only its own project's: a sender of another project that sends the same conversation and tool calls
  neither joins a project's step (its usage stays its own) nor takes it from the turn it belongs to.
- **Per service.** A key is the conversation as one service sent it (``vigil.schemas.steps``: a run is one
  application's), so another application's steps of the same conversation neither join a run nor push its own out of
  ``MAX_PER_KEY``.
- **One step, one run; decided at the turn's first assembly.** A step records the trace that took it (``taken``):
  another turn never takes it again, and the same turn, assembled again for late spans, takes it again, so its
  usage does not change back. A stored turn is never removed or rewritten by a later trace: a step whose trace
  settles after the turn that continues it stays a counted step (``step`` in the funnel) and the turn keeps its own
  usage (usage is nothing a scorer reads: the turn is not scored again either way).
- **Kept as long as a trace is.** A key's steps live ``VIGIL_INTAKE_KEEP_S`` after they were written (the time a
  trace's spans are kept for late ones), at most ``MAX_PER_KEY`` a key (the latest by start).
- **Bounded.** Every key's steps, all projects, count their JSON's bytes plus ``STEP_OVERHEAD`` within
  ``VIGIL_INTAKE_MAX_STEP_BYTES`` (16 MiB); over it the oldest keys are dropped, counted (``vigil.steps.evicted``).
  A turn that continues a dropped (or expired) step keeps its own usage.
- **In the order traces started.** A sweep keeps the steps its traces leave before its turns look them up (a run's
  step and its answer often settle together), with one write, one lookup and one take for the whole sweep; none for
  a sweep with no open step and no turn whose conversation holds tool calls, and no take when none of the keys its
  turns want is kept (a trace's own calls are read for what they asked only then).

A step's calls that have an id are kept the same way (``vigil.schemas.steps``: a tool message answers the tool call
whose id it names), per project and service under each call's ``id_key``, in the same write as the steps, within the
same keep time, bytes and ``MAX_PER_KEY``; a turn whose tool messages name ids it does not state (``unasked``) looks
them up in the same read as the steps it continues, among its own project's only, and takes them in the same atomic
take (a call is one run's: another turn never takes it; the same turn assembled again takes it again), then is given
the calls and the asking steps' usage (each step once). A stored turn is not changed by a step that settles after it
(assembled again, it takes only what it took: its tool calls are what a scorer reads, and stay as they were scored). A sender of another project that names the same id neither
gets the call nor takes it from the turn whose run asked it.

One model call written by two instrumentations, each in a trace of its own (``vigil.schemas.steps.once``), is
decided here before the steps are (``one_call_once``), so a wrapper's turn takes no step:

- **Per project, kept with the steps.** A trace that is one model call is kept under its project and its call's key
  (service, conversation, answer), in the steps' hash, within their keep time and bytes (``MAX_PER_KEY`` a key, the
  latest): a sender of another project that sends the same words and answer at the same time neither removes a
  project's turn nor is removed by it.
- **Decided once, atomically.** One script decides a sweep's calls, inner first, against the calls kept before them
  (two workers never both keep, or both drop, one call's two traces): a call decided before decides as it did; a
  trace whose turn was stored before its call was kept never yields. A trace that yields makes no turn (the spans
  it read are kept for late spans as ever) and is counted ``joined`` once, when it yields, with a line logged.
- **A stored turn is never removed**: a call whose twin was kept in an earlier sweep yields to it, whichever wrapped
  the other.

A tool call that failed in a trace of its own (``vigil.schemas.steps.failure``) is kept the same way, per project,
and given to the turn of a later sweep (or of its own) whose call it is (``tell_failures``, after the steps): the
take is atomic (a failure is one call's), a turn assembled again takes what it took, and a stored turn is not
changed by a failure that settles after it (assembled again, it takes only what it took: what a scorer reads
stays as it was scored).

Keys: ``vigil.steps``, a hash of ``[project, key]`` (JSON) to the key's steps (a JSON list of ``{"trace", "start",
"prompt_tokens", "completion_tokens", "taken"}``, the start in milliseconds), of ``[project, "id", id_key]`` to the calls asked
with that id (``{"trace", "start", "name", "arguments", "id", "prompt_tokens", "completion_tokens", "taken"}``), of
``[project, "call", key]`` to the
key's calls (``{"trace", "span", "scope", "start", "end", "yielded", "to", "took"}``: ``vigil.schemas.steps.decide``,
times in milliseconds), and of ``[project, "tool", key]`` to the key's failures (``{"trace", "span", "name",
"call_id", "error", "said", "start", "end", "taken"}``: ``vigil.schemas.steps.Failure``); ``vigil.steps.by_time``, the same members by when they were written; ``vigil.steps.bytes``,
their total.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import structlog
from vigil.schemas import steps
from vigil.schemas.rows import PipelineEvent
from vigil.worker.assembly.chains import BOUND
from vigil.worker.assembly.links import Trace
from vigil.worker.assembly.traces import split_name
from vigil.worker.logs import Every

if TYPE_CHECKING:
    import redis

__all__ = ["EVICTED", "MAX_PER_KEY", "MS", "STEPS", "STEPS_BYTES", "STEPS_BY_TIME", "STEP_OVERHEAD", "continue_runs",
           "kept_named", "kept_steps", "one_call_once", "tell_failures"]

log = structlog.get_logger("vigil.intake")

STEPS = "vigil.steps"
STEPS_BY_TIME = "vigil.steps.by_time"
STEPS_BYTES = "vigil.steps.bytes"
EVICTED = "vigil.steps.evicted"
MAX_PER_KEY = 8  # steps kept under one key: the same question asked again and again, its latest steps
MS = 1_000_000  # steps start in milliseconds in Redis: Lua's cjson writes 14 digits, a nanosecond time has 19
STEP_OVERHEAD = 220  # Redis bytes a key costs beyond its member and value (a hash field, a sorted-set entry)

# The start of a script that keeps lists of entries (steps, calls) under members of STEPS: its arguments (now, keep
# seconds, budget, overhead, max per key), the bytes kept, and ``put``: an entry added to a member's list (``old``:
# its value before, ``list``: decoded), at most ``most`` a member (the latest by start), written and counted.
_KEEP = """
local now, keep, budget, overhead, most = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5])
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
local function put(member, old, list, entry)
  table.insert(list, entry)
  table.sort(list, function(a, b) return a.start > b.start end)
  while #list > most do table.remove(list) end
  local value = cjson.encode(list)
  redis.call('HSET', KEYS[1], member, value)
  redis.call('ZADD', KEYS[2], now, member)
  total = total + #value - (old and #old or 0) + (old and 0 or (#member + overhead))
end
"""

# Keep new steps (a step of a trace already kept under the key is not added twice), at most MAX_PER_KEY a key (the
# latest by start), forget keys past the keep time, drop the oldest over the budget.
# KEYS: STEPS, STEPS_BY_TIME, STEPS_BYTES; ARGV: now, keep seconds, budget, overhead, max per key, member, step, ...
# Returns how many keys were dropped for the budget.
_RECORD = _KEEP + """
for i = 6, #ARGV, 2 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  local list = old and cjson.decode(old) or {}
  local step = cjson.decode(ARGV[i + 1])
  local seen = false
  for _, s in ipairs(list) do if s.trace == step.trace then seen = true end end
  if not seen then put(ARGV[i], old, list, step) end
end
""" + BOUND

# Decide each call of a sweep (``schemas.steps.decide``, inner first) against its key's calls, keep it, and bound the
# hash as ``_RECORD`` does. KEYS: STEPS, STEPS_BY_TIME, STEPS_BYTES; ARGV: now, keep seconds, budget, overhead, max
# per key, then (member, call, fixed) triples. Returns {dropped for the budget, per call '' (its own turn) or the JSON
# [trace, span, 1 when decided now] of the call it is one with}.
_ONCE = _KEEP + """
local out = {}
for i = 6, #ARGV, 3 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  local list = old and cjson.decode(old) or {}
  local call = cjson.decode(ARGV[i + 1])
  local said = nil
  for _, e in ipairs(list) do
    if e.trace == call.trace then said = e.yielded ~= '' and cjson.encode({e.yielded, e.to, 0}) or '' end
  end
  if said == nil then
    local found = nil
    if ARGV[i + 2] ~= '1' then
      for _, e in ipairs(list) do
        if found == nil and e.yielded == '' and e.scope ~= call.scope and e.start <= call['end']
            and call.start <= e['end'] then
          local taken = false
          for _, scope in ipairs(e.took) do if scope == call.scope then taken = true end end
          if not taken then found = e end
        end
      end
    end
    if found then table.insert(found.took, call.scope) end
    call.yielded = found and found.trace or ''
    call.to = found and found.span or ''
    put(ARGV[i], old, list, call)
    said = found and cjson.encode({found.trace, found.span, 1}) or ''
  end
  table.insert(out, said)
end
local evicted = (function()
""" + BOUND + """
end)()
return {evicted, out}
"""
# Take, for each (member, taker, fitting traces) triple, the entry of the member's list that ``schemas.steps.pick``
# (a step) or ``schemas.steps.tell`` (a failure) chooses among the fitting ones, read before: one the taker took
# already, else the latest no other trace took (checked again here: another worker may have taken it since); none
# given twice under one member by one call of the script (a turn's two calls of the same arguments). KEYS: STEPS, STEPS_BYTES. Returns,
# per triple, the entry taken (JSON) or ''.
_TAKE = """
local out, given = {}, {}
local delta = 0
for i = 1, #ARGV, 3 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  local found = ''
  if old then
    local list = cjson.decode(old)
    local fits = {}
    for _, trace in ipairs(cjson.decode(ARGV[i + 2])) do fits[trace] = true end
    local best, mine = nil, false
    for _, e in ipairs(list) do
      if fits[e.trace] and not given[ARGV[i] .. ' ' .. e.trace] and (e.taken == ARGV[i + 1] or e.taken == '') then
        local own = e.taken == ARGV[i + 1]
        if best == nil or (own and not mine) or (own == mine and e.start > best.start) then best, mine = e, own end
      end
    end
    if best then
      given[ARGV[i] .. ' ' .. best.trace] = true
      if not mine then
        best.taken = ARGV[i + 1]
        local value = cjson.encode(list)
        redis.call('HSET', KEYS[1], ARGV[i], value)
        delta = delta + #value - #old
      end
      found = cjson.encode(best)
    end
  end
  table.insert(out, found)
end
if delta ~= 0 then redis.call('INCRBY', KEYS[2], delta) end
return out
"""
_evicted_line = Every(60)
_joined_line = Every(60)
_once_line = Every(60)
_told_line = Every(60)


def _member(project: str, *key: str) -> str:
    return json.dumps([project, *key])


def kept_entries(client: redis.Redis, project: str, keys: Iterable[str],
                 *kind: str) -> dict[str, list[dict[str, Any]]]:
    """A project's kept entries under ``keys``, as the worker wrote them: its steps, or (``kind``) its ``call`` or
    ``tool`` entries; what ``vigil explain-trace`` reads for a stored trace."""
    keys = list(dict.fromkeys(keys))
    found = client.hmget(STEPS, [_member(project, *kind, k) for k in keys]) if keys else []
    return {k: json.loads(value) for k, value in zip(keys, found, strict=True) if value}


def kept_steps(client: redis.Redis, project: str, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
    """A project's kept steps under ``keys``, as ``vigil.schemas.steps.keep`` pools them (starts in nanoseconds)."""
    return {k: [{**step, "start": step["start"] * MS, "trace_id": step["trace"]} for step in entries]
            for k, entries in kept_entries(client, project, keys).items()}


def kept_named(client: redis.Redis, project: str, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
    """A project's kept calls under ``keys`` (``id_key``s), as ``vigil.schemas.steps.keep`` names them (starts in
    nanoseconds)."""
    return {k: [{**call, "start": call["start"] * MS, "trace_id": call["trace"]} for call in entries]
            for k, entries in kept_entries(client, project, keys, "id").items()}


def continue_runs(client: redis.Redis, traces: Iterable[Trace], *, keep_s: int, budget: int,
                  now: float | None = None) -> dict[str, str]:
    """Keep the open steps of a sweep's traces and add to each turn that continues steps of other traces their usage
    (``vigil.schemas.steps``), in place; returns why, by the turn's span id (for ``vigil explain-trace`` and the
    log)."""
    traces = sorted(traces, key=lambda t: min((s["start"] for s in t.spans), default=0))
    args: list[Any] = []
    for trace in traces:
        project, trace_id = split_name(trace.name)
        for step in steps.left(trace.spans, trace.result.steps):
            usage = {"trace": trace_id, "start": step.start // MS, "prompt_tokens": step.prompt_tokens,
                     "completion_tokens": step.completion_tokens, "taken": ""}
            args += [_member(project, step.key), json.dumps(usage)]
            sender = steps.service(trace.spans) if step.calls else ""
            for call in step.calls:
                args += [_member(project, "id", steps.id_key(sender, call["id"])), json.dumps({**call, **usage})]
    if args:
        evicted = int(client.register_script(_RECORD)(keys=[STEPS, STEPS_BY_TIME, STEPS_BYTES], args=[
            time.time() if now is None else now, keep_s, budget, STEP_OVERHEAD, MAX_PER_KEY, *args]))
        if evicted:
            client.incrby(EVICTED, evicted)
            if _evicted_line():
                log.warning("open steps over VIGIL_INTAKE_MAX_STEP_BYTES: the oldest dropped (a turn continuing one "
                            "keeps its own usage)", dropped=evicted, budget=budget)
    wanted = [(trace, turn, k, _member(split_name(trace.name)[0], k))
              for trace in traces for turn in trace.result.turns
              for k in steps.wanted(turn, sender=steps.service(trace.spans))]
    named = [(trace, turn, ids, [_member(split_name(trace.name)[0], "id", steps.id_key(steps.service(trace.spans), i))
                                 for i, _ in ids])
             for trace in traces for turn in trace.result.turns if (ids := steps.unasked(turn))]
    if not wanted and not named:
        return {}
    members = list(dict.fromkeys([*(member for *_, member in wanted), *(m for *_, found in named for m in found)]))
    kept = {member: json.loads(value) for member, value in zip(members, client.hmget(STEPS, members), strict=True)
            if value}
    here: dict[str, set[str]] = {}  # a trace's own calls' keys, read only when a turn of it may take a kept step
    taking: list[tuple[dict[str, Any], str, list[str]]] = []
    for trace, turn, k, member in wanted:
        if member in kept:
            if trace.name not in here:
                here[trace.name] = steps.asked_here(trace.spans)
            fits = steps.fitting(kept[member], turn["trace_id"], steps.start_ns(turn) // MS)
            if k not in here[trace.name] and fits:
                taking.append((turn, member, [c["trace"] for c in fits]))
    asking = len(taking)  # the triples after these are calls named by id
    results: dict[str, dict[str, str]] = {}  # by the turn's span id: its tool messages' texts by call id
    for trace, turn, ids, found in named:
        stored = turn["span_id"] in (getattr(trace.spans, "stored", None) or {})  # stored: it takes what it took
        for member in found:
            fits = steps.fitting(kept.get(member, ()), turn["trace_id"], steps.start_ns(turn) // MS)
            if fits := [c for c in fits if not stored or c.get("taken") == turn["trace_id"]]:
                results[turn["span_id"]] = dict(ids)
                taking.append((turn, member, [c["trace"] for c in fits]))
    if not taking:
        return {}
    taken = client.register_script(_TAKE)(keys=[STEPS, STEPS_BYTES], args=[
        x for turn, member, fits in taking for x in (member, turn["trace_id"], json.dumps(fits))])
    joined: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    given: dict[str, list[dict[str, Any]]] = {}
    for index, ((turn, _, _), found) in enumerate(zip(taking, taken, strict=True)):
        if found:
            entry = json.loads(found)
            if index >= asking:
                given.setdefault(turn["span_id"], []).append(entry)
            joined.setdefault(turn["span_id"], (turn, []))[1].append({**entry, "trace_id": entry["trace"]})
    why = {}
    for span_id, (turn, found) in joined.items():
        if span_id in given:
            steps.give_calls(turn, results[span_id], given[span_id])
        why[span_id] = steps.add_usage(turn, found)  # each step once, whatever it asked
        if _joined_line():
            log.info("a turn continues a run whose earlier model calls are traces of their own: their usage is the "
                     "run's, and the calls its tool messages name by id are its calls", trace_id=turn["trace_id"],
                     steps=list(dict.fromkeys(s["trace"] for s in found)), named=len(given.get(span_id, ())))
    return why


def one_call_once(client: redis.Redis, traces: Iterable[Trace], *, keep_s: int, budget: int, monitors: list[str],
                  now: float | None = None) -> list[PipelineEvent]:
    """Of a sweep's traces that are one model call each (``vigil.schemas.steps.lone``), those whose call is already
    another trace's turn make none (in place); returns their ``joined`` stage, once per trace, per turn monitor in
    ``monitors``. No Redis call for a sweep with no such trace."""
    calls = []
    for trace in traces:
        call = steps.lone(trace.spans, trace.result)
        if call is not None:
            calls.append((trace, call))
    if not calls:
        return []
    by_trace = {call.trace_id: trace for trace, call in calls}
    ordered = steps.inner_first(call for _, call in calls)
    args: list[Any] = []
    for call in ordered:
        trace = by_trace[call.trace_id]
        fixed = call.span_id in (getattr(trace.spans, "stored", None) or {})  # its turn is stored: it stays
        args += [_member(split_name(trace.name)[0], "call", call.key), json.dumps({
            "trace": call.trace_id, "span": call.span_id, "scope": call.scope, "start": call.start // MS,
            "end": -(-call.end // MS), "yielded": "", "to": "", "took": []}), "1" if fixed else "0"]
    evicted, decided = client.register_script(_ONCE)(keys=[STEPS, STEPS_BY_TIME, STEPS_BYTES], args=[
        time.time() if now is None else now, keep_s, budget, STEP_OVERHEAD, MAX_PER_KEY, *args])
    if int(evicted):
        client.incrby(EVICTED, int(evicted))
    events: list[PipelineEvent] = []
    for call, said in zip(ordered, decided, strict=True):
        if not said:
            continue
        trace = by_trace[call.trace_id]
        other, span, now_decided = json.loads(said)
        agent = str(trace.result.turns[0].get("agent") or "unknown")[:128]
        steps.drop(trace.result)
        if not now_decided:
            continue
        project = split_name(trace.name)[0]
        events += [PipelineEvent(project=project[:128], agent=agent, monitor=monitor, stage="joined",
                                 trace_id=call.trace_id, span_id=span) for monitor in monitors or [""]]
        if _once_line():
            log.info("a model call written by two instrumentations in traces of their own is one call: the wrapper's "
                     "trace makes no turn", trace_id=call.trace_id, call_of=other, scope=call.scope)
    return events


def tell_failures(client: redis.Redis, traces: Iterable[Trace], *, keep_s: int, budget: int,
                  now: float | None = None) -> dict[str, list[str]]:
    """Keep the failed tool calls a sweep's traces are (``vigil.schemas.steps.failure``) and give each turn's calls
    the errors of the kept failures they are (``vigil.schemas.steps.tell``), in place; returns the failures' traces
    by the turn's span id. One write for a sweep with a failure; one lookup and one take for a sweep with a turn whose
    calls may have failed in a trace of their own."""
    traces = sorted(traces, key=lambda t: min((s["start"] for s in t.spans), default=0))
    args: list[Any] = []
    for trace in traces:
        found = steps.failure(trace.spans, trace.result)
        if found is not None:
            args += [_member(split_name(trace.name)[0], "tool", found.key), json.dumps({
                "trace": found.trace_id, "span": found.span_id, "name": found.name, "call_id": found.call_id,
                "error": found.error, "said": list(found.said), "start": found.start // MS,
                "end": -(-found.end // MS), "taken": ""})]
    if args:
        evicted = int(client.register_script(_RECORD)(keys=[STEPS, STEPS_BY_TIME, STEPS_BYTES], args=[
            time.time() if now is None else now, keep_s, budget, STEP_OVERHEAD, MAX_PER_KEY, *args]))
        if evicted:
            client.incrby(EVICTED, evicted)
    wanted = [(turn, index, _member(split_name(trace.name)[0], "tool", k),
               turn["span_id"] in (getattr(trace.spans, "stored", None) or {}))  # stored: it takes what it took
              for trace in traces for turn in trace.result.turns
              for index, k in steps.failed_here(turn, steps.service(trace.spans))]
    if not wanted:
        return {}
    members = list(dict.fromkeys(member for _, _, member, _ in wanted))
    kept = {member: json.loads(value) for member, value in zip(members, client.hmget(STEPS, members), strict=True)
            if value}
    taking = []
    for turn, index, member, stored in wanted:
        fits = [e["trace"] for e in kept.get(member, ()) if e["taken"] in (turn["trace_id"],) + (() if stored else ("",))
                and steps.evidence(turn, index, e, steps.start_ns(turn) // MS)]
        if fits:
            taking.append((turn, index, member, fits))
    if not taking:
        return {}
    taken = client.register_script(_TAKE)(keys=[STEPS, STEPS_BYTES], args=[
        x for turn, _, member, fits in taking for x in (member, turn["trace_id"], json.dumps(fits))])
    given: dict[str, tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]] = {}
    for (turn, index, _, _), found in zip(taking, taken, strict=True):
        if found:
            entry = json.loads(found)
            given.setdefault(turn["span_id"], (turn, []))[1].append((index, {**entry, "trace_id": entry["trace"]}))
    out = {span_id: steps.give(turn, found) for span_id, (turn, found) in given.items()}
    if out and _told_line():
        log.info("a tool that failed in a trace of its own failed in the run whose model was told so: its error is "
                 "the run's call's", traces=sorted({t for found in out.values() for t in found}))
    return out
