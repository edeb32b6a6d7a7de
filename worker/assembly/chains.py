"""The worker's side of conversations chained by response ids (the rule is ``vigil.schemas.chains``): the links
runs leave, a run's last response id to its session, kept in Redis so that a run in another trace that names that
response as its conversation id joins the session.

- **Per project.** A link is its project's (the trace's project: the sender's key, ``traces.split_name``): a run
  looks up and leaves links only in its own project, so a sender of another project can neither join a project's
  sessions nor overwrite its links by stating the same response ids.
- **A response id names one model call.** The first link of a response id is kept (a trace assembled again leaves
  the same one; a run stating another run's response id as its own changes nothing).
- **Kept as long as a session is.** A link lives ``VIGIL_SESSION_KEEP_S`` (a day) after it was written (forgotten by
  the next link written after that, or with the keys once none was written for that long), the time a session's
  turns are kept (``sessions``): a session that closed after ``VIGIL_SESSION_IDLE_S`` still takes a run that
  continues it, and closes again with it. Not the idle window: a user who answers after five minutes is still in the
  conversation.
- **Bounded.** Every link, all projects, counts ``len(member) + len(session) + LINK_OVERHEAD`` bytes within
  ``VIGIL_SESSION_MAX_CHAIN_BYTES`` (16 MiB); over it the oldest are dropped, counted (``vigil.chains.evicted``). A run
  that names a dropped (or expired) link starts its session under the response id it names (the rule's stated id).
- **In the order runs started.** A sweep joins the runs of the traces it assembled in the order they started (an
  exporter may send several runs of a conversation in one request, so they settle together), after the links of
  the sweeps before it. A run is joined before the run it continues only when that run's trace settles in a later
  sweep (it waits for a late root, ``late``): for the first two runs of a conversation both name the session the
  same way (the first run's last response id), so they agree either way; a third or later run joined before the run
  it continues starts the session again under the id it names, and the runs after it follow it.

Keys: ``vigil.chains``, a hash of ``[project, response id]`` (JSON) to the session id; ``vigil.chains.by_time``, the
same members by when they were written; ``vigil.chains.bytes``, their total.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import structlog
from vigil.schemas.chains import MAX_ID, join, named
from vigil.schemas.spans import Assembly
from vigil.worker.logs import Every

if TYPE_CHECKING:
    import redis

__all__ = ["BOUND", "EVICTED", "LINKS", "LINKS_BYTES", "LINKS_BY_TIME", "LINK_OVERHEAD", "chain_sessions", "links_of"]

log = structlog.get_logger("vigil.intake")

LINKS = "vigil.chains"
LINKS_BY_TIME = "vigil.chains.by_time"
LINKS_BYTES = "vigil.chains.bytes"
EVICTED = "vigil.chains.evicted"
LINK_OVERHEAD = 220  # Redis bytes a link costs beyond its member and session (a hash field, a sorted-set entry: 218 measured)

# The end of a script that keeps members of a hash (KEYS[1]) by when they were written (KEYS[2], a sorted set) within a
# byte total (KEYS[3]), with ``total``, ``now``, ``keep``, ``budget`` and ``overhead`` set: forget the members older
# than the keep time, drop the oldest over the budget, store the total, refresh the keys' time to live; returns how
# many were dropped for the budget. A member costs ``#member + #value + overhead`` bytes.
BOUND = """
local function forget(member)
  local value = redis.call('HGET', KEYS[1], member)
  if value then total = total - #member - #value - overhead end
  redis.call('HDEL', KEYS[1], member)
  redis.call('ZREM', KEYS[2], member)
end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - keep, 'LIMIT', 0, 1000)) do
  forget(member)
end
local evicted = 0
while budget > 0 and total > budget do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #oldest == 0 then break end
  forget(oldest[1])
  evicted = evicted + 1
end
redis.call('SET', KEYS[3], math.max(total, 0))
for _, key in ipairs(KEYS) do redis.call('EXPIRE', key, keep) end
return evicted
"""

# Keep new links (the first link of a member wins), forget links past the keep time, drop the oldest over the
# budget. KEYS: LINKS, LINKS_BY_TIME, LINKS_BYTES; ARGV: now, keep seconds, budget, overhead, member, session, ...
# Returns how many were dropped for the budget.
_RECORD = """
local now, keep, budget, overhead = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
for i = 5, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('ZADD', KEYS[2], now, ARGV[i])
    total = total + #ARGV[i] + #ARGV[i + 1] + overhead
  end
end
""" + BOUND
_evicted_line = Every(60)


def _member(project: str, response_id: str) -> str:
    return json.dumps([project, response_id])


def links_of(client: redis.Redis, wanted: list[tuple[str, str]]) -> dict[str, dict[str, str]]:
    """The sessions of the runs whose last response ids are ``wanted`` (``(project, response id)`` each), those
    Redis holds, by project: ``{project: {response id: session}}``."""
    found = client.hmget(LINKS, [_member(*key) for key in wanted]) if wanted else []
    out: dict[str, dict[str, str]] = {}
    for (project, response_id), session in zip(wanted, found, strict=True):
        if session is not None:
            out.setdefault(project, {})[response_id] = session.decode() if isinstance(session, bytes) else session
    return out


def chain_sessions(client: redis.Redis, assembled: list[tuple[str, Assembly]], *, keep_s: int, budget: int,
                   now: float | None = None) -> dict[str, str]:
    """Set the sessions of the chained runs of a sweep's traces (``(project, assembly)`` each;
    ``vigil.schemas.chains.join``) from their projects' links, the traces in the order their runs started, and keep the
    links they leave; returns why each changed session is what it is, by span id. One lookup and one write for the
    whole sweep; none for traces whose runs state no conversation id with a response id."""
    assembled = sorted(((p, r) for p, r in assembled if r.chains), key=lambda item: item[1].turns[0]["started_at"])
    if not assembled:
        return {}
    known = links_of(client, list(dict.fromkeys((project, i) for project, result in assembled
                                                for i in named(result.chains))))
    args: list[str] = []
    why: dict[str, str] = {}
    for project, result in assembled:  # a run sees the links of the runs that started before it, in its project
        links, said = join(result.turns, result.chains, known.setdefault(project, {}))
        why.update(said)
        for response_id, session in links.items():
            if response_id not in known[project] and len(response_id) <= MAX_ID:
                known[project][response_id] = session
                args += [_member(project, response_id), session]
    if args:
        evicted = int(client.register_script(_RECORD)(keys=[LINKS, LINKS_BY_TIME, LINKS_BYTES], args=[
            time.time() if now is None else now, keep_s, budget, LINK_OVERHEAD, *args]))
        if evicted:
            client.incrby(EVICTED, evicted)
            if _evicted_line():
                log.warning("conversation links over VIGIL_SESSION_MAX_CHAIN_BYTES: the oldest dropped (a run that "
                            "continues one starts its session under the response id it names)", dropped=evicted,
                            budget=budget)
    return why
