"""Conversations chained by response ids: which session a run belongs to when its conversation id is a model
call's response id (the OpenAI Responses API's ``previous_response_id``, which an instrumentation such as Microsoft
Agent Framework's writes as ``gen_ai.conversation.id``: each call names the response it continues, and each run of a
conversation names the last response of the run before it, in another trace).

The rule, for a run whose spans state a conversation id (any convention's session id: ``conventions.identity``)
and whose model calls state response ids (``gen_ai.response.id``):

- **A conversation id that is the response id of a model call in the same run** is the Responses API chaining that
  run's own calls: it is not a session by itself. A run whose every stated conversation id is one of its own
  responses is a conversation's first run, and its session is named by its **last** response id: the very id the
  run that continues it names as its conversation id. So the first two runs of a conversation agree on the session
  whichever is assembled first, with no state at all, and the session's name is one the user's own telemetry shows
  (the second run's ``gen_ai.conversation.id``). Its first response id would need the first run to be assembled
  before the second to be found.
- **A conversation id that is a response id of a model call of an earlier run** names that run's conversation: the
  run joins the earlier run's session. Which runs came earlier, and their last response ids, are state across
  traces: ``earlier``, a mapping of a run's last response id to its session, per project (the worker keeps it in
  Redis: ``vigil.worker.assembly.chains``; a test or ``vigil explain-trace`` over a file keeps a dict). A stated
  conversation id the mapping does not hold is the session as stated (an ordinary conversation id, or the last
  response of a run not seen: the name that run's session takes, by the rule above).
- **A first run that states no conversation id** (one model call: nothing chained yet) has no session and leaves
  no link; the runs that continue it make the session, named by its response id (the name the rule would have given
  it), and it stays outside: a stored turn's session is never rewritten by a later run.
- **Every run with a session and a response id leaves a link**, its last response id to its session, so a run that
  names it joins it: ``join`` returns the links, and the caller keeps them (runs are joined in the order they are
  assembled; the links of one call's runs are seen by its later runs).

Pure given ``earlier``: ``assembly`` reads each run's ``Chain`` (``read``), and ``join`` decides the sessions.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from vigil.schemas.conventions.genai import RESPONSE_ID

__all__ = ["MAX_ID", "Chain", "join", "named", "read"]

_END = itemgetter("end")
MAX_ID = 256  # a session id's longest (``schemas.Turn.session_id``): a longer id is no link


@dataclass(frozen=True)
class Chain:
    """What a run says of its conversation: its model calls' response ids in the order the calls ended, and the
    conversation ids its spans state (the root's first, then in start order), each once."""

    responses: tuple[str, ...]
    stated: tuple[str, ...]

    @property
    def named(self) -> str | None:
        """The first stated conversation id that is none of the run's own responses: the conversation it continues
        (or its session, as stated); ``None`` when every one is its own (a conversation's first run)."""
        own = set(self.responses)
        return next((c for c in self.stated if c not in own), None)


def read(stated: Iterable[Any], calls: Iterable[dict[str, Any]]) -> Chain | None:
    """A run's ``Chain`` from the conversation id each of its spans states (the root's first, then in start order;
    ``None`` or ``""`` where a span states none) and its model calls (in the same order). ``None`` when it states
    none or no call has a response id."""
    said: dict[str, None] = {}
    for s in stated:
        if s not in (None, ""):
            said[str(s)] = None
    if not said:
        return None
    answered = []
    for s in calls:
        if s["attributes"].get(RESPONSE_ID) not in (None, ""):
            answered.append(s)
    if len(answered) > 1:
        answered.sort(key=_END)
    responses: dict[str, None] = {}
    for s in answered:
        responses[str(s["attributes"][RESPONSE_ID])] = None
    return Chain(tuple(responses), tuple(said)) if responses else None


def named(chains: Mapping[str, Chain]) -> list[str]:
    """The conversation ids the runs name that ``earlier`` may hold: what a caller looks up before ``join``."""
    return list(dict.fromkeys(c.named for c in chains.values() if c.named is not None and len(c.named) <= MAX_ID))


def join(turns: list[dict[str, Any]], chains: Mapping[str, Chain], earlier: Mapping[str, str],
         ) -> tuple[dict[str, str], dict[str, str]]:
    """Set the session of each turn with a chain (``chains``: by the turn's span id), by the module's rule, in the
    turns' order; returns the links the runs leave (last response id -> session) and, by span id, why a turn's
    session is not what its spans state (for ``vigil explain-trace``)."""
    links: dict[str, str] = {}
    why: dict[str, str] = {}
    known = ChainMap(links, earlier)  # a run sees the links of the runs before it in this call
    for turn in turns:
        chain = chains.get(turn["span_id"])
        if chain is None:
            continue
        continued = chain.named
        if continued is None:
            session = chain.responses[-1]
            why[turn["span_id"]] = ("a conversation's first run: its conversation ids are its own model calls' "
                                    "response ids (the Responses API chaining its calls), so its session is named by "
                                    "its last response id, the id a run that continues it names")
        elif continued in known:
            session = known[continued]
            why[turn["span_id"]] = (f"it continues an earlier run: its conversation id {continued} is that run's last "
                                    "response id, so it joins that run's session")
        else:
            session = continued
        if len(session) <= MAX_ID:
            turn["session_id"] = session
            if len(chain.responses[-1]) <= MAX_ID:
                links.setdefault(chain.responses[-1], session)
    return links, why
