"""The pipeline's tasks: ingest (validate, store, sample, fan out) and score (the sampled monitors on one turn).

Human feedback travels in the ingest batches too (``{"feedback": {...}}``): ingest stores it, and negative feedback
makes the monitors that ask for it score the turn (``vigil.worker.pipeline.feedback``).

A message that cannot be processed is dead-lettered with its reason (a ``dead_letters`` row, a log line, a
counter) and the worker goes on. When Redis itself fails (out of memory, a failover), the message is rejected
back onto its queue rather than acked, so nothing is lost. Rows go to the write queue, never straight to
ClickHouse.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import redis
import structlog
from celery.exceptions import Reject
from kombu.exceptions import BatchPublishError
from kombu.exceptions import OperationalError as BrokerError
from pydantic import BaseModel, ValidationError
from vigil.schemas import MonitorConfig, ScoreResult, ScoreStatus, Turn
from vigil.schemas.broker import INGEST_QUEUE, INGEST_TASK, SHIPPED_HEADERS
from vigil.schemas.feedback import Feedback, is_feedback, problems
from vigil.schemas.rows import (
    DeadLetter,
    JudgeCallRow,
    PipelineEvent,
    ProducerBatch,
    score_row,
    trace_row,
)
from vigil.schemas.spans import CONTENT_METADATA, RUN_METADATA, SETTING_METADATA
from vigil.worker.assembly import late, sessions
from vigil.worker.judge.base import JudgePaused
from vigil.worker.logs import Every
from vigil.worker.pipeline import budget, loop, ownership, parked, seen, turn_store
from vigil.worker.pipeline import feedback as feedback_sampling
from vigil.worker.pipeline.app import SCORE_QUEUE, app
from vigil.worker.pipeline.backpressure import push_rows, room_for_rows
from vigil.worker.pipeline.filters import matches
from vigil.worker.pipeline.parked import parked_queue
from vigil.worker.pipeline.runtime import Runtime, runtime
from vigil.worker.pipeline.sampling import sampled
from vigil.worker.pipeline.shedding import admitted_fraction
from vigil.worker.redact import redact
from vigil.worker.settings import get_settings
from vigil.worker.sinks.write_queue import push

__all__ = ["ingest", "score"]

log = structlog.get_logger("vigil.tasks")

_REDIS_FAILED = (redis.RedisError, BrokerError, BatchPublishError)


def _requeue_on_redis_failure(exc: Exception) -> Reject:
    log.error("redis refused the task's output; the message goes back on its queue", error=str(exc))
    return Reject(exc, requeue=True)


def validation_reason(exc: ValidationError) -> str:
    """One line per problem, each naming the field: ``input.0.content: Input should be a valid string``."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(turn)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def dead_letter(queue: str, payload: Any, reason: str, error_type: str) -> DeadLetter:
    try:
        text = payload if isinstance(payload, str) else json.dumps(payload, default=repr, ensure_ascii=False)
    except (RecursionError, ValueError):  # nested too deeply, or refers to itself
        text = f"<{type(payload).__name__} that cannot be serialised>"
    safe = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be stored
    dead_id = hashlib.sha256(f"{queue}\x1f{safe}".encode()).hexdigest()[:32]
    log.warning("dead-lettered", queue=queue, reason=reason[:500], error_type=error_type)
    runtime().telemetry.dead_letters.add(1, {"queue": queue, "error_type": error_type})
    return DeadLetter(dead_id=dead_id, queue=queue, reason=reason[:4000], error_type=error_type,
                      payload=safe[:100_000])


def _check_feedback(raw: dict[str, Any], queue: str) -> Feedback | DeadLetter:
    try:
        return Feedback.model_validate(raw["feedback"])
    except ValidationError as exc:
        return dead_letter(queue, raw, f"feedback: {problems(exc)}", "invalid_feedback")


def _check_turn(raw: Any, queue: str) -> Turn | DeadLetter:
    if not isinstance(raw, dict):
        return dead_letter(queue, raw, f"turn must be a JSON object, got {type(raw).__name__}", "invalid_turn")
    try:
        return Turn.model_validate(raw)
    except ValidationError as exc:
        return dead_letter(queue, raw, validation_reason(exc), "invalid_turn")
    except Exception as exc:  # noqa: BLE001 (RecursionError and the like: this turn is the problem, not the batch)
        return dead_letter(queue, raw, f"turn could not be validated: {type(exc).__name__}: {exc}", "invalid_turn")


@dataclass
class _Checked:
    """A batch after validation: the turns as they came (``raws``, what is fanned out) and as models, the feedback,
    and the dead letters for what could not be read."""

    raws: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    feedback: list[Feedback] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)


@dataclass
class _Stage:
    """What one monitor does with one turn: ``probe`` | ``filtered`` | ``skipped`` | ``budget`` | ``sampled`` |
    ``shed``; ``forced``: sampled because of negative feedback, whatever the rate (never shed nor paced); ``due``:
    the configured rate sampled it (the traffic a budget forecasts from); ``rate``: the rate it was sampled at, its
    inclusion probability."""

    monitor: MonitorConfig
    stage: str
    forced: bool = False
    due: bool = False
    rate: float = 1.0


@dataclass
class _Decision:
    raw: dict[str, Any]
    turn: Turn
    stages: list[_Stage]

    def wants_scoring(self) -> bool:
        """Sampled by some monitor at its rate, for a score task: what the score queue's bound may shed."""
        return self.queued() and any(s.stage == "sampled" and not s.forced for s in self.stages)

    def queued(self) -> bool:
        """Whether its sampled monitors score it in a score task: not when its content was not captured (nothing a
        scorer could read: each is recorded unscored at ingest, ``_unscored_now``)."""
        return self.turn.metadata.get(CONTENT_METADATA) != "missing"

    def sampled(self) -> list[str]:
        return [s.monitor.name for s in self.stages if s.stage == "sampled"]

    def inclusion(self) -> dict[str, float]:
        return {s.monitor.name: s.rate for s in self.stages if s.stage == "sampled"}


def _check_batch(batch: Any) -> _Checked:
    """Step 1: every item validated, as a turn or as feedback; what cannot be read becomes a dead letter."""
    checked = _Checked()
    for raw in batch if isinstance(batch, list) else [batch]:
        item = _check_feedback(raw, INGEST_QUEUE) if is_feedback(raw) else _check_turn(raw, INGEST_QUEUE)
        if isinstance(item, DeadLetter):
            checked.dead.append(item)
        elif isinstance(item, Feedback):
            checked.feedback.append(item)
        else:
            checked.turns.append(item)
            checked.raws.append(raw)
    return checked


def _stage(turn: Turn, monitor: MonitorConfig, forced: set[tuple[str, str, str]],
           paced: dict[str, budget.Pace]) -> _Stage:
    """Step 2, for one monitor: vigil's own traffic is never sampled; then the filters, then the rate (or a claim
    by negative feedback), then the judge budget's pace (``vigil.worker.pipeline.budget``): a turn the configured
    rate samples but the paced rate does not, or any turn while the budget has no room, is ``budget``. ``paced``
    is this batch's: each turn admitted takes one place of its room."""
    is_forced = (turn.trace_id, turn.span_id or "", monitor.name) in forced
    if turn.origin != "live":
        return _Stage(monitor, "probe")  # vigil's own traffic (the probe, its follow-ups): never sampled again
    if turn.metadata.get(RUN_METADATA) == "failed":
        return _Stage(monitor, "failed_run")  # no answer to judge: counted, never scored (never a 0)
    if not matches(turn, monitor.filters):
        return _Stage(monitor, "filtered")
    due = sampled(turn.trace_id, monitor.sampling_rate)
    if not due and not is_forced:
        return _Stage(monitor, "skipped")
    pace = budget.current(paced, monitor.name)
    rate = budget.rate_for(monitor, pace)
    if pace is not None:
        if pace.paused or (not is_forced and not sampled(turn.trace_id, rate)):
            return _Stage(monitor, "budget", due=due)
        budget.take(paced, monitor.name)
    return _Stage(monitor, "sampled", is_forced, due=due, rate=rate if due else 1.0)


def _shed(decision: _Decision, fraction: float) -> None:
    """Step 3: beyond the score queue's bound a monitor samples at its rate x ``fraction``, on the trace id, and what
    it no longer samples is ``shed`` (counted); turns claimed by feedback are never shed."""
    for s in decision.stages if decision.queued() else ():
        if s.stage == "sampled" and not s.forced and fraction < 1.0:
            if sampled(decision.turn.trace_id, s.rate * fraction):
                s.rate *= fraction
            else:
                s.stage = "shed"


def _fan_out(rt: Runtime, rows: dict[str, list[BaseModel]], decisions: list[_Decision], sessions_to_track: list[Turn],
             feedback: list[Feedback]) -> int:
    """Step 4, all in Redis: the rows to the write queue, each sampled turn stored once and one score task per turn
    carrying its reference, negative feedback's rescoring. Returns the number of score tasks."""
    # the turn as it came: a re-serialised one carries every default (and can outgrow the limit)
    fan_out = [(d.raw, names, d.inclusion()) for d in decisions if d.queued() and (names := d.sampled())]
    push_rows(rt.redis, rows.items())
    if sessions_to_track:
        sessions.track(rt.redis, sessions_to_track)
    enqueued_at, settings = time.time(), get_settings()
    refs, pipe = [], rt.redis.pipeline(transaction=False)  # each turn stored once; its task carries a reference
    for turn_json, _, _ in fan_out:
        refs.append(turn_store.store(pipe, turn_json, ttl_s=settings.turn_ttl_s))
    traces = [feedback_sampling.turn_ref(row.project, row.trace_id) for row in rows.get("traces", [])]
    seen.mark(pipe, traces, window_s=feedback_sampling.FeedbackSettings().seen_s)  # before feedback looks them up
    budgeted = [m for m in rt.config.monitors if m.budget is not None or rt.config.budget is not None]
    due = {m.name: sum(s.due for d in decisions for s in d.stages if s.monitor is m) for m in budgeted}
    admitted = {m.name: sum(s.stage == "sampled" for d in decisions for s in d.stages if s.monitor is m)
                for m in budgeted}
    budget.count(pipe, due, admitted, enqueued_at)
    if refs or traces or any(due.values()):
        pipe.execute()
    with app.producer_or_acquire() as producer, producer.batch():  # one pipelined round trip for the fan-out
        for (_, monitor_names, inclusion), ref in zip(fan_out, refs, strict=True):
            score.apply_async((None, monitor_names, enqueued_at, list(ref), inclusion), queue=SCORE_QUEUE,
                              producer=producer)
        feedback_sampling.on_feedback(rt.redis, rt.config, feedback, producer=producer)
    return len(fan_out)


@app.task(name=INGEST_TASK, bind=True)
def ingest(self, batch: Any, updates: Any = None, sender: Any = None) -> dict[str, int]:
    """Validate each turn, store its row, and fan out one score task per turn naming the monitors that sample it.
    A turn id already stored is not taken again: the same content is a no-op, other content a conflict, unless
    assembly sends it in ``updates`` (``vigil.worker.pipeline.ownership``; ``sender``: the intake's word on who
    sent the batch, for the conflict's log line).
    A turn of vigil's own traffic (origin ``probe`` or ``follow_up``) is stored but never sampled: stage ``probe``.
    A failed run (``metadata["vigil.run"] == "failed"``: it ended in error without an answer) is stored and counted,
    stage ``failed_run``, and never scored: there is no answer to judge, and it is not a 0.
    Beyond the score queue's bound, sampled turns are shed (stage ``shed``, ``vigil.worker.pipeline.shedding``); while
    the write queue is at its byte budget the batch waits, then goes back on its queue
    (``vigil.worker.pipeline.backpressure``). The steps: check, decide per monitor, shed, fan out."""
    rt = runtime()
    _room_for_rows(rt)
    checked = _check_batch(batch)
    try:
        screened = ownership.screen(rt.redis, checked.turns, checked.raws, ttl_s=get_settings().turn_owned_s,
                                    updates=set(updates) if isinstance(updates, list) else set(),
                                    sender=sender if isinstance(sender, dict) else None)
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    checked.turns = [checked.turns[i] for i, _ in screened.keep]
    checked.raws = [checked.raws[i] for i, _ in screened.keep]
    turn_monitors = [m for m in rt.config.monitors if m.target == "turn"]
    track_sessions = len(turn_monitors) < len(rt.config.monitors)  # session monitors score them when idle
    try:
        forced = feedback_sampling.forced(rt.redis, rt.config, checked.turns, claimant=f"ingest:{self.request.id}")
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    paced = _paces(rt)
    decisions = [_Decision(raw, turn, [_stage(turn, m, forced, paced) for m in turn_monitors])
                 for raw, turn in zip(checked.raws, checked.turns, strict=True)]
    fraction = _admitted(rt, sum(d.wants_scoring() for d in decisions))
    events: list[BaseModel] = [*screened.conflicts]
    for decision in decisions:
        _shed(decision, fraction)
        events.append(_event(decision.turn, "", "received"))
        rt.telemetry.stage(monitor="", stage="received")
        if decision.turn.metadata.get(RUN_METADATA) == "failed":
            events.append(_event(decision.turn, "", "failed_run"))
            rt.telemetry.stage(monitor="", stage="failed_run")
        for s in decision.stages:
            events.append(_event(decision.turn, s.monitor.name, s.stage))
            rt.telemetry.stage(monitor=s.monitor.name, stage=s.stage)
    rows: dict[str, list[BaseModel]] = {
        "traces": [trace_row(t) for t in checked.turns], "pipeline_events": events, "dead_letters": [*checked.dead],
        "feedback": [*checked.feedback], "producer_batches": [*shipped_batch(self.request, batch)],
        "scores": [], "judge_calls": []}
    for decision in decisions:
        if not decision.queued():
            _unscored_now(rt, decision, rows)
    try:
        fanned_out = _fan_out(rt, rows, decisions, [t for t in checked.turns if track_sessions and t.session_id],
                              checked.feedback)
        ownership.claim(rt.redis, checked.turns, [digest for _, digest in screened.keep],
                        ttl_s=get_settings().turn_owned_s)
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    return {"turns": len(checked.turns), "feedback": len(checked.feedback), "dead": len(checked.dead),
            "fanned_out": fanned_out, "repeats": screened.repeats, "conflicts": len(screened.conflicts)}


_shed_warning = Every(10)  # a line per 10 s, not per batch
_budget_lines: dict[str, Every] = {}


def _paces(rt: Runtime) -> dict[str, budget.Pace]:
    """Each budgeted monitor's pace now, with a line every 10 minutes per monitor while it is paced or paused."""
    try:
        paced = budget.paces(rt.redis, rt.config, time.time())
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    for name, pace in paced.items():
        if pace.factor < 1.0 and _budget_lines.setdefault(name, Every(600))():
            log.warning("judge budget", monitor=name, reason=pace.reason)
    return paced


def _admitted(rt: Runtime, wanted: int) -> float:
    """The share of this batch's sampled turns the score queue has room for (``vigil.worker.pipeline.shedding``)."""
    bound = get_settings().score_queue_max
    if not wanted or bound <= 0:
        return 1.0
    try:
        depth = rt.redis.llen(SCORE_QUEUE)
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    fraction = admitted_fraction(depth, bound, wanted)
    if fraction < 1.0 and _shed_warning():
        log.warning("score queue over its bound; shedding", depth=depth, bound=bound, wanted=wanted,
                    admitted=round(fraction, 4))
    return fraction


def _room_for_rows(rt: Runtime) -> None:
    try:
        room_for_rows(rt.redis)
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc


def shipped_batch(request: Any, batch: Any) -> list[ProducerBatch]:
    """The delivery-accounting row for a batch an SDK producer numbered (``SHIPPED_HEADERS``); none otherwise."""
    producer, number, shipped = (getattr(request, name, None) for name in SHIPPED_HEADERS)
    if producer is None:
        return []
    items = batch if isinstance(batch, list) else [batch]
    first = items[0] if items and isinstance(items[0], dict) else {}
    try:
        return [ProducerBatch(producer=producer, batch=number, turns=len(items), shipped=shipped,
                              project=str(first.get("project", ""))[:128], agent=str(first.get("agent", ""))[:128])]
    except ValidationError:  # numbers that make no sense: nothing to account
        return []


def _event(turn: Turn, monitor: str, stage: str) -> PipelineEvent:
    return PipelineEvent(project=turn.project, agent=turn.agent, monitor=monitor, stage=stage,
                         trace_id=turn.trace_id, span_id=turn.span_id or "")


@app.task(name="vigil.score", bind=True, max_retries=None)
def score(self, turn_json: Any, monitors: Any, enqueued_at: float | None = None,
          ref: Any = None, inclusion: Any = None) -> dict[str, str]:
    """Run the monitors that sampled this turn, concurrently on the process's judge loop. Scores, judge calls and
    stages go to the write queue in one push; monitors whose judge is paused are parked for it, alone. The turn
    comes inline (``turn_json``) or, from ingest, as ``ref`` = [id, holder] of the copy stored once in Redis
    (``vigil.worker.pipeline.turn_store``), let go of when this task is done with it. ``inclusion``: the rate each
    monitor sampled it at (``vigil.worker.pipeline.budget``), written on its score."""
    rt = runtime()
    if ref is not None:
        stored = _stored_turn(rt, ref)
        if stored is None:
            return {}
        turn_json = stored
    try:
        statuses = _score_turn(rt, turn_json, monitors, enqueued_at, ref,
                               inclusion if isinstance(inclusion, dict) else {})
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    if ref is not None:
        try:
            turn_store.release(rt.redis, ref[0], ref[1])
        except _REDIS_FAILED as exc:
            raise _requeue_on_redis_failure(exc) from exc
    return statuses


def _stored_turn(rt: Runtime, ref: Any) -> Any:
    """The turn a reference names; None when there is nothing to score (done already, or gone: a dead letter)."""
    if not (isinstance(ref, list | tuple) and len(ref) == 2 and all(isinstance(r, str) for r in ref)):
        push(rt.redis, [("dead_letters", [dead_letter(SCORE_QUEUE, {"ref": ref}, "ref: must be [turn id, holder]",
                                                      "invalid_reference")])])
        return None
    try:
        stored = turn_store.fetch(rt.redis, ref[0], ttl_s=get_settings().turn_ttl_s)
        if stored == turn_store.EXPIRED:
            push(rt.redis, [("dead_letters", [dead_letter(
                SCORE_QUEUE, {"ref": ref}, "turn: no longer in Redis (stored longer than VIGIL_TURN_TTL before "
                "it was scored)", "turn_expired")])])
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    if stored in (turn_store.DONE, turn_store.EXPIRED):
        log.info("score task for a turn no longer stored", ref=ref, state=stored)  # a redelivery after it was done
        return None
    return stored


def _score_turn(rt: Runtime, turn_json: Any, monitors: Any, enqueued_at: float | None, ref: Any,
                inclusion: dict[str, Any]) -> dict[str, str]:
    names = [monitors] if isinstance(monitors, str) else monitors if isinstance(monitors, list) else [monitors]
    configured = {m.name: m for m in rt.config.monitors}
    rows: dict[str, list[BaseModel]] = {"scores": [], "judge_calls": [], "pipeline_events": [], "dead_letters": []}
    for name in names:
        if not isinstance(name, str) or name not in configured:
            rows["dead_letters"].append(dead_letter(
                SCORE_QUEUE, {"turn": turn_json, "monitor": name},
                f"monitor: unknown monitor {name!r} (configured: {sorted(configured)})", "unknown_monitor"))
    checked = _check_turn(turn_json, SCORE_QUEUE)
    if isinstance(checked, DeadLetter):
        push(rt.redis, [("dead_letters", [*rows["dead_letters"], checked])])
        return {}
    turn = checked
    if late.is_superseded(rt.redis, turn.project, turn.trace_id, turn.span_id):  # a late root replaced it
        push(rt.redis, [("dead_letters", rows["dead_letters"])])
        return {}
    wanted = [configured[n] for n in names if isinstance(n, str) and n in configured]
    _room_for_rows(rt)  # before the judge calls: a full write queue would refuse their rows
    outcomes = loop.run(_score_all(rt, turn, wanted))
    statuses, paused = {}, []
    for monitor, result, start_ns, end_ns in outcomes:
        if result is None:
            paused.append(monitor.name)
            continue
        statuses[monitor.name] = _record(rt, turn, monitor, result, inclusion.get(monitor.name), rows,
                                         start_ns=start_ns, end_ns=end_ns, enqueued_at=enqueued_at)
    push_rows(rt.redis, rows.items())
    budget.record(rt.redis, rows["scores"], time.time())
    if paused:  # they wait in Redis for their judge (worker.pipeline.parked), not in this worker's memory
        by_judge: dict[str, list[str]] = {}
        for name in paused:
            by_judge.setdefault(configured[name].judge, []).append(name)
        holders = turn_store.add_holders(rt.redis, ref[0], len(by_judge)) if ref is not None else []
        parked.register(rt.redis, list(by_judge))
        with app.producer_or_acquire() as producer, producer.batch():
            for index, (judge, waiting) in enumerate(by_judge.items()):
                args = (turn_json, waiting, enqueued_at, None, inclusion) if ref is None else (
                    None, waiting, enqueued_at, [ref[0], holders[index]], inclusion)
                score.apply_async(args, queue=parked_queue(judge), producer=producer)
    return statuses


def _record(rt: Runtime, turn: Turn, monitor: MonitorConfig, result: ScoreResult, rate: Any,
            rows: dict[str, list[BaseModel]], *, start_ns: int, end_ns: int, enqueued_at: float | None) -> str:
    """One monitor's result on a turn as its rows (score, judge calls, funnel outcome) and its OTel span; its
    status."""
    row = score_row(turn, monitor, result, inclusion=rate if isinstance(rate, int | float) and 0 < rate <= 1
                    else None, pass_line=rt.config.pass_line(monitor))
    rows["scores"].append(row)
    rows["judge_calls"].extend(JudgeCallRow.of(call, index, score=row) for index, call in enumerate(result.calls))
    rows["pipeline_events"].append(_event(turn, monitor.name, result.outcome))
    rt.telemetry.emit_score(row, start_ns=start_ns, end_ns=end_ns, lag_s=(start_ns / 1e9 - enqueued_at)
                            if enqueued_at else None,
                            calls_latency_ms=[c.latency_ms for c in result.calls if not c.cached],
                            response_id=turn.metadata.get("response_id"))
    return str(row.status)


def _unscored_now(rt: Runtime, decision: _Decision, rows: dict[str, list[BaseModel]]) -> None:
    """A turn whose content was not captured, recorded unscored by each monitor that sampled it, at ingest: a score
    task would store the turn and queue work only to say the same (a flood of such turns cost the score queue its
    bound and minutes of a worker)."""
    now_ns = time.time_ns()
    for stage in decision.stages:
        if stage.stage == "sampled":
            try:
                scorer = rt.scorer(stage.monitor)
            except Exception:  # a scorer that cannot be built says so when a turn with content comes
                scorer = None
            result = _content_not_captured(decision.turn, scorer)
            _record(rt, decision.turn, stage.monitor, result, stage.rate, rows, start_ns=now_ns, end_ns=now_ns,
                    enqueued_at=None)


async def _score_all(rt: Runtime, turn: Turn,
                     monitors: list[MonitorConfig]) -> list[tuple[MonitorConfig, ScoreResult | None, int, int]]:
    """Every monitor to its end; then a failure of vigil's own (Redis, the broker) in any of them raises, so the task
    goes back on its queue and the turn is scored again, never recorded as failed for it."""
    outcomes = await asyncio.gather(*(_score_one(rt, turn, monitor) for monitor in monitors), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes


_paused_line: dict[str, Every] = {}


def _content_not_captured(turn: Turn, scorer: Any) -> ScoreResult:
    """Unscored, naming the instrumentation setting: there is nothing to judge, and it is no fault of the agent."""
    return ScoreResult(run_id=str(uuid.uuid4()), scorer=getattr(scorer, "name", "unknown"),
                       scorer_version=getattr(scorer, "version", "unknown"), status=ScoreStatus.UNSCORED,
                       reason="message content was not captured: set "
                       f"{turn.metadata.get(SETTING_METADATA, 'the instrumentation content capture setting')}")


async def _score_one(rt: Runtime, turn: Turn,
                     monitor: MonitorConfig) -> tuple[MonitorConfig, ScoreResult | None, int, int]:
    """One monitor on one turn: a result (scored, unscored or failed), or None when its judge is paused."""
    structlog.contextvars.bind_contextvars(trace_id=turn.trace_id, monitor=monitor.name, scorer=monitor.scorer)
    start_ns = time.time_ns()
    scorer = None
    try:
        scorer = rt.scorer(monitor)
        if turn.metadata.get(CONTENT_METADATA) == "missing":
            return monitor, _content_not_captured(turn, scorer), start_ns, time.time_ns()
        result = await scorer.score(turn, rt.judge(monitor.judge), scorer.context_for(turn, monitor.name))
    except JudgePaused as exc:
        if _paused_line.setdefault(exc.judge, Every(60))():  # a line a minute per judge, not one per score
            log.warning("judge paused; its scores wait until it is resumed (`vigil judge status`)", judge=exc.judge,
                        reason=exc.reason)
        return monitor, None, start_ns, time.time_ns()
    except _REDIS_FAILED:  # vigil's own Redis or broker, transient: the task is retried (``_score_all``)
        raise
    except Exception as exc:  # a scorer bug or bad config must not crash the worker or lose the turn
        log.exception("scorer raised")
        result = ScoreResult(run_id=str(uuid.uuid4()), scorer=monitor.scorer,
                             scorer_version=getattr(scorer, "version", "unknown"), status=ScoreStatus.FAILED,
                             error_type=type(exc).__name__, reason=redact(str(exc))[:2000])
    log.debug("scored", status=str(result.status), score=result.score)
    return monitor, result, start_ns, time.time_ns()
