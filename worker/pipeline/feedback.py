"""Feedback in the pipeline: scoring first what users complained about (``always_sample: {feedback: negative}``).

A monitor with that option scores every turn that got negative feedback, whatever its sampling rate, once. The
feedback may come before the turn, with it, or long after it:

Every key below names a turn by its project and trace id (``turn_ref``: a trace id is its project's own), so one
project's feedback never marks, claims or re-scores another project's turn of the same trace id. A turn's project
is the one it was ingested under; feedback's is its own (``""``, an older sender's: the default project's, as a turn
that names none).

- **before** (or while the turn is still on its way): negative feedback leaves a marker in Redis,
  ``vigil.feedback.negative.<turn>`` (kept ``NEGATIVE_MARK_TTL_S``). When the ingest task meets a turn its
  monitor would skip, it looks for the marker (one round trip per batch, only when some monitor asks);
- **after**: the ingest task that receives negative feedback also sends ``vigil.feedback_rescore(trace_id,
  project)`` to
  the queue only writer processes consume. The writer is the process that can read the ``traces`` table (on chDB
  the only one), so it reads the stored turn back and fans out the score task. A turn not stored yet (still in
  the write queue) is looked for again with a growing countdown for about a minute; a turn that has not been
  ingested yet is left to the marker.

What one sender can make this cost is bounded (``FeedbackSettings``): at most ``VIGIL_FEEDBACK_MAX_MARKS`` markers
are kept (the oldest go first; ``vigil.feedback.marks`` orders them), a trace gets one rescore task however much
negative feedback it gets (``vigil.feedback.rescore.<turn>``, ``SET NX`` for ``CLAIM_TTL_S``), at most
``VIGIL_FEEDBACK_MAX_RESCORES`` rescore tasks wait at once (``vigil.feedback.rescoring``; over it only the marker is
left, for the ingest path, and the skip is counted in ``vigil.feedback.skipped``), only for traces ingest has taken
in (looked up in ``vigil.worker.pipeline.seen``; the others are counted as skipped and left to the marker), and they
wait on a queue of their own (``vigil.feedback``), never in front of the alert checks.

Both paths may see the same turn, and more negative feedback may follow, so each task claims
``vigil.feedback.claim.<turn>.<span>.<monitor>`` first (``SET NX``, value: the path and the task's id). Only the
task that holds the claim sends the score task; a redelivery or retry of that same task (same id) sends it again,
which cannot add a row because the score id is deterministic. A turn the monitor samples anyway is never claimed:
its ordinary score is the one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import redis
import structlog
from celery.exceptions import Retry
from vigil.schemas import MonitorConfig, Turn, VigilConfig
from vigil.schemas.feedback import Feedback
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from vigil.schemas.broker import FEEDBACK_QUEUE
from vigil.worker.pipeline.app import SCORE_QUEUE, app
from vigil.worker.pipeline.filters import matches
from vigil.worker.pipeline import seen
from vigil.worker.pipeline.sampling import sampled

__all__ = [
    "CLAIM_TTL_S", "MARKS", "NEGATIVE_MARK_TTL_S", "RESCORE_TASK", "RESCORING", "SKIPPED", "FeedbackSettings",
    "always_monitors", "claim_key", "forced",
    "negative_key", "on_feedback", "rescore_on_feedback", "turn_from_row", "turn_ref",
]

log = structlog.get_logger("vigil.feedback")

NEGATIVE_MARK_TTL_S = 7 * 86400  # how long negative feedback waits for a turn that has not arrived
CLAIM_TTL_S = 30 * 86400  # how long a turn scored for its feedback stays "scored once"
RESCORE_TASK = "vigil.feedback_rescore"
RESCORE_MAX_TRIES = 6  # countdowns 1, 2, 4 ... 32 s: a minute for a turn already ingested to reach the store
MARKS = "vigil.feedback.marks"  # sorted set: turn_ref -> when its marker was set (oldest trimmed first)
RESCORING = "vigil.feedback.rescoring"  # sorted set: turn_ref -> when its rescore task was sent, until it ends
SKIPPED = "vigil.feedback.skipped"  # rescores not sent because RESCORING was full (the marker still stands)


class FeedbackSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VIGIL_FEEDBACK_", extra="ignore")

    max_marks: int = Field(default=100_000, gt=0, description="negative-feedback markers kept (oldest dropped)")
    max_rescores: int = Field(default=1000, gt=0, description="rescore tasks waiting at once")
    seen_s: int = Field(default=30 * 86400, gt=0, description="how long ingest remembers a trace it took in, for "
                        "feedback to look it up before asking for a rescore (vigil.worker.pipeline.seen)")


DEFAULT_PROJECT = Turn.model_fields["project"].default  # the project of feedback that names none


def turn_ref(project: str, trace_id: str) -> str:
    """A turn's name in these keys: its project and trace id (the project's length first, so no two pairs meet)."""
    project = project or DEFAULT_PROJECT
    return f"{len(project)}.{project}.{trace_id}"


def rescore_key(project: str, trace_id: str) -> str:
    return f"vigil.feedback.rescore.{turn_ref(project, trace_id)}"


def negative_key(project: str, trace_id: str) -> str:
    return f"vigil.feedback.negative.{turn_ref(project, trace_id)}"


def claim_key(project: str, trace_id: str, span_id: str | None, monitor: str) -> str:
    return f"vigil.feedback.claim.{turn_ref(project, trace_id)}.{span_id or ''}.{monitor}"


def always_monitors(config: VigilConfig) -> list[MonitorConfig]:
    """The turn monitors that score every turn with negative feedback (session monitors score sessions)."""
    return [m for m in config.monitors if m.always_sample.feedback == "negative" and m.target == "turn"]


def _candidates(config: VigilConfig, turns: Iterable[Turn]) -> list[tuple[Turn, MonitorConfig]]:
    """(turn, monitor) pairs a feedback-sampling monitor looks at but would not sample (vigil's own probe traffic
    is never sampled, feedback or not)."""
    monitors = always_monitors(config)
    return [(turn, m) for turn in turns for m in monitors
            if turn.origin == "live" and matches(turn, m.filters) and not sampled(turn.trace_id, m.sampling_rate)]


def _claim(client: redis.Redis, pairs: list[tuple[Turn, MonitorConfig]], by: str) -> list[tuple[Turn, MonitorConfig]]:
    """The pairs the claimant ``by`` holds the claim of (newly, or from an earlier delivery of the same task)."""
    if not pairs:
        return []
    pipe = client.pipeline(transaction=True)
    for turn, monitor in pairs:
        key = claim_key(turn.project, turn.trace_id, turn.span_id, monitor.name)
        pipe.set(key, by, nx=True, ex=CLAIM_TTL_S)
        pipe.get(key)
    holders = pipe.execute()[1::2]
    mine = by.encode()
    return [pair for pair, holder in zip(pairs, holders, strict=True) if holder == mine]


def forced(client: redis.Redis, config: VigilConfig, turns: list[Turn], *, claimant: str) -> set[tuple[str, str, str]]:
    """(trace_id, span_id, monitor) the ingest task ``claimant`` must sample because negative feedback came first.

    No Redis round trip when no monitor samples on feedback."""
    candidates = _candidates(config, turns)
    if not candidates:
        return set()
    turns_of = sorted({(turn.project, turn.trace_id) for turn, _ in candidates})
    pipe = client.pipeline(transaction=False)
    for project, trace_id in turns_of:
        pipe.exists(negative_key(project, trace_id))
    flagged = {turn for turn, found in zip(turns_of, pipe.execute(), strict=True) if found}
    held = _claim(client, [(t, m) for t, m in candidates if (t.project, t.trace_id) in flagged], claimant)
    return {(turn.trace_id, turn.span_id or "", monitor.name) for turn, monitor in held}


# Mark turns and trim the oldest marks over the cap. KEYS: MARKS; ARGV: max marks, ttl, now, turn_refs...
_MARK = """
for i = 4, #ARGV do
  redis.call('SET', 'vigil.feedback.negative.' .. ARGV[i], 1, 'EX', tonumber(ARGV[2]))
  redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[i])
end
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])
if over > 0 then
  for _, id in ipairs(redis.call('ZPOPMIN', KEYS[1], over)) do
    redis.call('DEL', 'vigil.feedback.negative.' .. id)
  end
end
return over
"""
# Which turns get a rescore task: not sent before (SET NX), and room among those waiting. KEYS: RESCORING, SKIPPED;
# ARGV: max waiting, claim ttl, now, turn_refs... Returns the turn_refs to send.
_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[3]) - 3600)  -- a task lost long ago frees its place
local room = tonumber(ARGV[1]) - redis.call('ZCARD', KEYS[1])
local out = {}
for i = 4, #ARGV do
  if redis.call('EXISTS', 'vigil.feedback.rescore.' .. ARGV[i]) == 0 then
    if room > 0 then
      redis.call('SET', 'vigil.feedback.rescore.' .. ARGV[i], 1, 'EX', tonumber(ARGV[2]))
      redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[i])
      room = room - 1
      out[#out + 1] = ARGV[i]
    else
      redis.call('INCR', KEYS[2])
    end
  end
end
return out
"""


def on_feedback(client: redis.Redis, config: VigilConfig, items: list[Feedback], producer: Any = None) -> int:
    """Mark negative feedback and ask the writer to score the turns it is about (each trace once, a bounded number
    waiting at once, on ``FEEDBACK_QUEUE``); returns the rescores sent."""
    if not always_monitors(config):
        return 0
    by_ref = {turn_ref(item.project, item.trace_id): (item.project or DEFAULT_PROJECT, item.trace_id)
              for item in items if item.negative}
    traces = sorted(by_ref)
    if not traces:
        return 0
    settings, now = FeedbackSettings(), time.time()
    client.register_script(_MARK)(keys=[MARKS], args=[settings.max_marks, NEGATIVE_MARK_TTL_S, now, *traces])
    found = seen.known(client, traces, window_s=settings.seen_s, now=now)
    if len(found) < len(traces):  # no turn ingested for them (yet): the marker waits for it, no rescore is asked
        client.incrby(SKIPPED, len(traces) - len(found))
    traces = [t for t in traces if t in found]
    admitted = client.register_script(_ADMIT)(keys=[RESCORING, SKIPPED],
                                              args=[settings.max_rescores, CLAIM_TTL_S, now, *traces]) if traces else []
    sent = [t.decode() if isinstance(t, bytes) else t for t in admitted]
    for ref in sent:
        project, trace_id = by_ref[ref]
        rescore_on_feedback.apply_async((trace_id, project), queue=FEEDBACK_QUEUE, producer=producer)
    if len(sent) < len(traces):
        log.info("negative feedback marked; some traces already had a rescore or too many wait",
                 traces=len(traces), rescores=len(sent), max_rescores=settings.max_rescores)
    return len(sent)


def turn_from_row(row: dict[str, Any]) -> Turn:
    """The ``Turn`` a ``traces`` row was stored from (``vigil.schemas.rows.trace_row`` the other way)."""
    usage = {"prompt_tokens": row["prompt_tokens"], "completion_tokens": row["completion_tokens"]}
    return Turn.model_validate({
        "trace_id": row["trace_id"], "span_id": row["span_id"] or None, "session_id": row["session_id"] or None,
        "project": row["project"], "agent": row["agent"], "environment": row["environment"],
        "started_at": row["started_at"], "ended_at": row["ended_at"], "system": row["system"] or None,
        "input": json.loads(row["input_json"]), "output": row["output"], "contexts": json.loads(row["contexts_json"]),
        "reference": row["reference"] or None, "tool_calls": json.loads(row["tool_calls_json"]),
        "model": row["model"] or None, "usage": usage if any(usage.values()) else None, "tags": list(row["tags"]),
        "metadata": dict(row["metadata"]), "truncated": list(row["truncated"]),
    })


def _stored_turns(trace_id: str, project: str | None) -> list[Turn] | None:
    """The stored turns of ``project``'s trace (None: a task sent before projects, every project's), read by this
    writer process; None when this process has no writer."""
    from vigil.worker.sinks.writer import current_writer
    from vigil.worker.store.queries import TRACE_ROWS

    writer = current_writer()
    if writer is None:
        return None
    with writer.lock:
        result = writer.store.query(TRACE_ROWS.sql, parameters={"trace_id": trace_id})
    turns = [turn_from_row(dict(zip(TRACE_ROWS.columns, row, strict=True))) for row in result.result_rows]
    return [t for t in turns if project is None or t.project == project]


@app.task(name=RESCORE_TASK, bind=True, max_retries=None)
def rescore_on_feedback(self, trace_id: Any, project: Any = None) -> int:
    """In a writer process: score the stored turn of ``project``'s ``trace_id`` for every feedback-sampling monitor
    that skipped it, once. Returns the score tasks sent."""
    from vigil.worker.pipeline.runtime import runtime
    from vigil.worker.pipeline.tasks import _event, score
    from vigil.worker.sinks.write_queue import push

    if not isinstance(trace_id, str) or not trace_id:
        log.warning("feedback rescore without a trace id; ignored", trace_id=repr(trace_id)[:200])
        return 0
    project = project if isinstance(project, str) and project else None
    ref = trace_id if project is None else turn_ref(project, trace_id)  # its place among the rescores waiting
    rt = runtime()
    try:
        sent = _rescore(self, rt, trace_id, project, _event, score, push)
    except Retry:
        raise  # looked for again later: it keeps its place among the rescores waiting
    except BaseException:
        rt.redis.zrem(RESCORING, ref)
        raise
    rt.redis.zrem(RESCORING, ref)
    return sent


def _rescore(self, rt: Any, trace_id: str, project: str | None, _event, score, push) -> int:
    turns = _stored_turns(trace_id, project)
    if turns is None:
        log.warning("feedback rescore received by a process without a writer; skipped", trace_id=trace_id)
        return 0
    if not turns:
        tries = self.request.retries
        if tries >= RESCORE_MAX_TRIES:
            log.info("turn with negative feedback not stored yet; it is scored when it arrives", trace_id=trace_id)
            return 0
        raise self.retry(countdown=min(60, 2**tries))
    held = _claim(rt.redis, _candidates(rt.config, turns), f"rescore:{self.request.id}")
    by_turn: dict[tuple[str, str], tuple[Turn, list[str]]] = {}
    for turn, monitor in held:
        by_turn.setdefault((turn.trace_id, turn.span_id or ""), (turn, []))[1].append(monitor.name)
    push(rt.redis, [("pipeline_events", [_event(turn, m, "sampled") for turn, names in by_turn.values()
                                         for m in names])])
    for _, names in by_turn.values():
        for name in names:
            rt.telemetry.stage(monitor=name, stage="sampled")
    enqueued_at = time.time()
    for turn, names in by_turn.values():
        score.apply_async((turn.model_dump(mode="json", exclude_none=True), names, enqueued_at), queue=SCORE_QUEUE)
    log.info("scoring a turn for its negative feedback", trace_id=trace_id,
             monitors=sorted({m for _, names in by_turn.values() for m in names}))
    return len(by_turn)
