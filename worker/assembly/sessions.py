"""Sessions (conversations) scored as a whole: a session closes when it had no new turn for
``VIGIL_SESSION_IDLE_S`` (300 s), and then each monitor with ``target: session`` that samples it (on the session
id; its filters look at the first turn) scores the whole conversation once.

Keys: ``vigil.sessions.pending``, a sorted set of sessions (``[project, session id]`` as JSON) by when their last
turn was ingested; ``vigil.session.<hash>``, the session's turns (JSON), kept ``VIGIL_INTAKE_KEEP_S`` after the last.
Ingest records every live turn that has a session id (only when a session monitor is configured) and schedules a
close sweep the idle time later; ``vigil beat`` sweeps too, as a backstop. Claims work as for traces
(``vigil.worker.assembly.traces``): a session that gets a new turn after it closed closes again later and is scored again
under the same score ids (its first turn's trace and span ids), replacing the earlier scores.

The session as scored is one turn: the first turn's ids, agent, project, environment, system prompt and reference;
its input is the conversation (each turn's question and answer, in time order, ending with the last question), its
output the last answer, ``metadata["vigil.session_turns"]`` the number of turns.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from vigil.schemas import Turn

if TYPE_CHECKING:
    import redis

__all__ = ["CLOSE_SESSIONS_TASK", "SESSIONS", "SessionSettings", "session_settings", "session_turn",
           "session_turns", "track", "track_turns"]

SESSIONS = "vigil.sessions.pending"
CLOSE_SESSIONS_TASK = "vigil.close_sessions"


class SessionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VIGIL_SESSION_", extra="ignore")

    idle_s: float = Field(default=300.0, ge=0, description="a session closes this long after its last turn")
    keep_s: int = Field(default=86_400, gt=0, description="how long a session's turns are kept after its last")
    max_chain_bytes: int = Field(default=16 * 2**20, ge=0, description="bytes of the links that join runs chained by "
                                 "response ids into one session (all projects; ``chains``); over it the oldest are "
                                 "dropped (0: no bound)")


def session_settings() -> SessionSettings:
    return SessionSettings()


def _member(turn: Turn) -> str:
    return json.dumps([turn.project, turn.session_id])


def _key(member: str) -> str:
    return "vigil.session." + hashlib.sha256(member.encode()).hexdigest()[:32]


def track_turns(client: redis.Redis, turns: list[Turn], *, keep_s: int, now: float | None = None) -> int:
    """Record the live turns that belong to a session; returns how many sessions they touched."""
    now = time.time() if now is None else now
    sessions: dict[str, list[str]] = {}
    for turn in turns:
        if turn.session_id and turn.origin == "live":
            sessions.setdefault(_member(turn), []).append(turn.model_dump_json())
    if not sessions:
        return 0
    pipe = client.pipeline(transaction=True)
    for member, lines in sessions.items():
        pipe.rpush(_key(member), *lines)
        pipe.expire(_key(member), keep_s)
    pipe.zadd(SESSIONS, dict.fromkeys(sessions, now))
    pipe.execute()
    return len(sessions)


def session_turns(client: redis.Redis, member: str) -> list[Turn]:
    """The session's turns, each once (the last copy of a trace and span wins), in time order."""
    turns: dict[tuple[str, str | None], Turn] = {}
    for raw in client.lrange(_key(member), 0, -1):
        turn = Turn.model_validate_json(raw)
        turns[(turn.trace_id, turn.span_id)] = turn
    return sorted(turns.values(), key=lambda t: t.started_at)


def session_turn(turns: list[Turn]) -> dict[str, Any]:
    """The whole session as one turn dict (see the module's docstring)."""
    first, last = turns[0], turns[-1]
    conversation: list[dict[str, str]] = []
    for turn in turns[:-1]:
        conversation += [{"role": "user", "content": turn.question}, {"role": "assistant", "content": turn.output}]
    conversation.append({"role": "user", "content": last.question})
    session: dict[str, Any] = {
        "trace_id": first.trace_id, "span_id": first.span_id, "session_id": first.session_id,
        "project": first.project, "agent": first.agent, "environment": first.environment,
        "started_at": first.started_at.isoformat(), "ended_at": (last.ended_at or last.started_at).isoformat(),
        "input": conversation, "output": last.output, "tags": first.tags,
        "metadata": {**first.metadata, "vigil.session_turns": str(len(turns))},
    }
    for key, value in (("system", first.system), ("reference", next((t.reference for t in turns if t.reference),
                                                                      None))):
        if value:
            session[key] = value
    return session


def track(client: redis.Redis, turns: list[Turn]) -> None:
    """Called by ingest: record the turns and schedule the close sweep once the idle time has passed."""
    from vigil.schemas.broker import INGEST_QUEUE
    from vigil.worker.assembly.traces import schedule_sweep
    from vigil.worker.pipeline.app import app

    settings = session_settings()
    if track_turns(client, turns, keep_s=settings.keep_s):
        schedule_sweep(client, "vigil.sessions.sweep", time.time() + settings.idle_s,
                       lambda countdown: app.send_task(CLOSE_SESSIONS_TASK, countdown=countdown, queue=INGEST_QUEUE))
