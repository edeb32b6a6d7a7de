"""The worker's side of the intake: ``vigil.spans`` keeps spans by trace, ``vigil.assemble_traces`` turns settled
traces into turns (traces whose work a run in another trace started joined to it: ``links``; one model call written
by two instrumentations in traces of their own made one turn, a run's model calls in traces of their own joined into
its usage, and its tool calls that failed in traces of their own into its calls: ``steps``; runs chained by response
ids joined into their sessions: ``chains``) and hands them to ``vigil.ingest`` (see ``vigil.worker.assembly.traces``
for the keys and the claims), and ``vigil.close_sessions`` scores idle sessions with the session monitors
(``vigil.worker.assembly.sessions``)."""

from __future__ import annotations

import time
from typing import Any

import structlog
from pydantic import ValidationError
from vigil.schemas import Turn
from vigil.schemas.broker import INGEST_QUEUE, INGEST_TASK, SPANS_TASK
from vigil.schemas.rows import PipelineEvent
from vigil.schemas.spans import (
    CONTENT_METADATA,
    SETTING_METADATA,
    Assembly,
    waiting_for_parent,
)
from vigil.worker.assembly import late
from vigil.worker.assembly.chains import chain_sessions
from vigil.worker.assembly.links import Trace, join_linked
from vigil.worker.assembly.sessions import (
    CLOSE_SESSIONS_TASK,
    SESSIONS,
    session_settings,
    session_turn,
    session_turns,
)
from vigil.worker.assembly.steps import continue_runs, one_call_once, tell_failures
from vigil.worker.assembly.traces import (
    Spans,
    assembly_of,
    claim_due,
    invalid_reason,
    recount_pending,
    release,
    schedule_sweep,
    service_of,
    split_name,
    store_spans,
    trace_id_of,
    trace_spans,
)
from vigil.worker.intake.settings import intake_settings
from vigil.worker.logs import Every
from vigil.worker.pipeline import ownership
from vigil.worker.pipeline.app import SCORE_QUEUE, app
from vigil.worker.pipeline.filters import matches
from vigil.worker.pipeline.runtime import runtime
from vigil.worker.pipeline.sampling import sampled
from vigil.worker.pipeline.tasks import (
    _REDIS_FAILED,
    _event,
    _requeue_on_redis_failure,
    dead_letter,
    score,
    validation_reason,
)
from vigil.worker.settings import get_settings
from vigil.worker.sinks.write_queue import push

__all__ = ["ASSEMBLE_TASK", "assemble_traces", "close_sessions", "collect_spans"]

log = structlog.get_logger("vigil.intake")

ASSEMBLE_TASK = "vigil.assemble_traces"


@app.task(name=SPANS_TASK, bind=True)
def collect_spans(self, spans: Any, sender: Any = None) -> dict[str, int]:
    """Keep each span under its trace (with its sender's address, for a conflict's log line, and its key's project,
    whose trace it is) and schedule the sweep that assembles the trace once it settles."""
    rt, settings = runtime(), intake_settings()
    spans = spans if isinstance(spans, list) else [spans]
    sender = sender if isinstance(sender, dict) else {}
    address, project = str(sender.get("address", ""))[:64], str(sender.get("project", ""))[:128]
    good, dead = [], []
    for span in spans:
        reason = invalid_reason(span)
        if reason is None:
            good.append(_stamped(span, address, project))
        else:
            dead.append(dead_letter(INGEST_QUEUE, span, f"span: {reason}", "invalid_span"))
    try:
        if dead:
            push(rt.redis, [("dead_letters", dead)])
        traces, _ = store_spans(rt.redis, good, keep_s=settings.keep_s, max_spans=settings.max_trace_spans,
                                max_bytes=settings.max_trace_bytes,
                                max_reassemblies=settings.max_reassemblies,
                                max_open=settings.max_open_traces) if good else (0, 0)
        if traces:
            schedule_sweep(rt.redis, "vigil.intake.sweep", time.time() + settings.settle_s,
                           lambda countdown: assemble_traces.apply_async(countdown=countdown, queue=INGEST_QUEUE))
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    return {"spans": len(good), "traces": traces, "dead": len(dead)}


def _stamped(span: dict[str, Any], address: str, project: str) -> dict[str, Any]:
    """A span with its sender's address and, when the sender presented a key, the key's project as its resource's
    ``vigil.project`` (whatever the span said: ``vigil.worker.serving.keys``)."""
    if address:
        span = {**span, "sender": address}
    if project:
        span = {**span, "resource": {**(span.get("resource") or {}), "vigil.project": project}}
    return span


@app.task(name=ASSEMBLE_TASK)
def assemble_traces() -> dict[str, int]:
    """Assemble every settled trace: claim, keep each span id's first copy (``late.reconcile``), assemble (or wait
    for a parent that has not arrived: ``late``), publish one ingest batch of the turns that are new or changed for a
    scorer, record the stored turns a late root supersedes, the conflicts and the unanswered steps, release."""
    rt, settings, sessions = runtime(), intake_settings(), session_settings()
    metadata_keys = {key for monitor in rt.config.monitors for key in monitor.filters.metadata}
    turn_monitors = [m.name for m in rt.config.monitors if m.target == "turn"]  # a funnel row's: no_turn, joined
    assembled = turns = 0

    def read(name: str) -> tuple[Spans, list[dict[str, Any]]]:  # a trace's spans, each span id once
        return late.reconcile(trace_spans(rt.redis, name, settings.max_trace_spans))

    def wait(name: str, waits: list[float]) -> bool:  # claimed again later, unless it waited long enough
        enough, due = late.waited_enough(rt.redis, name, keep_s=settings.keep_s, wait_s=settings.parent_wait_s)
        if not enough:
            late.defer(rt.redis, name, due, settings.settle_s)
            waits.append(due)
        return not enough

    try:
        while True:
            claimed, lease = claim_due(rt.redis, settle_s=settings.settle_s, lease_s=settings.lease_s)
            if not claimed:
                break
            batch: list[dict[str, Any]] = []
            updates: list[str] = []
            rows: dict[str, list] = {"pipeline_events": [], "superseded": []}
            waits = []
            swept: list[Trace] = []
            for name in claimed:
                spans, conflicts = read(name)
                if waiting_for_parent(spans) and wait(name, waits):
                    continue
                swept.append(Trace(name, spans, conflicts, assembly_of(spans)))
            joined, hosts_pending = join_linked(
                rt.redis, swept, max_spans=settings.max_trace_spans, max_bytes=settings.max_trace_bytes,
                max_reassemblies=settings.max_reassemblies, keep_s=settings.keep_s, now=time.time(), read=read,
                wait=lambda name, waits=waits: wait(name, waits), monitors=turn_monitors)
            rows["pipeline_events"] += joined
            if hosts_pending:  # hosts a link added spans to, assembled again once they settle
                schedule_sweep(rt.redis, "vigil.intake.sweep", time.time() + settings.settle_s,
                               lambda countdown: assemble_traces.apply_async(countdown=countdown, queue=INGEST_QUEUE))
            rows["pipeline_events"] += one_call_once(rt.redis, swept, keep_s=settings.keep_s,
                                                      budget=settings.max_step_bytes, monitors=turn_monitors)
            continue_runs(rt.redis, swept, keep_s=settings.keep_s, budget=settings.max_step_bytes)
            tell_failures(rt.redis, swept, keep_s=settings.keep_s, budget=settings.max_step_bytes)
            assembled_now: list[tuple[str, Assembly]] = []  # (project, assembly): for the sessions across traces
            for name, spans, conflicts, result in ((t.name, t.spans, t.conflicts, t.result) for t in swept):
                trace_id = trace_id_of(name)
                assembled_now.append((split_name(name)[0], result))
                settled = late.settle(rt.redis, name, spans, result, keep_s=settings.keep_s,
                                      mark_s=get_settings().turn_ttl_s, metadata_keys=metadata_keys,
                                      kept_bytes=settings.max_kept_bytes)
                batch.extend(settled.turns)
                updates += [ownership.update_id(trace_id, span_id) for span_id in settled.updates]
                rows["superseded"] += settled.superseded
                rows["pipeline_events"] += [*settled.events, *late.conflict_events(trace_id, conflicts),
                                            *_steps(trace_id, spans, result.steps)]
                if result.no_turn:
                    rows["pipeline_events"] += _no_turn(trace_id, spans, result.no_turn, turn_monitors)
                _warn_missing_content(settled.turns)
            chain_sessions(rt.redis, assembled_now, keep_s=sessions.keep_s, budget=sessions.max_chain_bytes)
            if batch:
                app.send_task(INGEST_TASK, args=[batch], kwargs={"updates": updates}, queue=INGEST_QUEUE)
            push(rt.redis, rows.items())
            if waits:
                schedule_sweep(rt.redis, "vigil.intake.sweep", min(waits),
                               lambda countdown: assemble_traces.apply_async(countdown=countdown, queue=INGEST_QUEUE))
            release(rt.redis, claimed, lease)
            assembled, turns = assembled + len(claimed) - len(waits), turns + len(batch)
        recount_pending(rt.redis)
    except _REDIS_FAILED as exc:  # claimed traces come back after their lease
        log.error("assembling traces failed; they are claimed again after the lease", error=str(exc))
        raise
    if assembled:
        log.info("traces assembled", traces=assembled, turns=turns)
    return {"traces": assembled, "turns": turns}


def _steps(trace_id: str, spans: list[dict[str, Any]], steps: list[str]) -> list[PipelineEvent]:
    """A ``step`` stage per LLM call that only asked for a tool and that no call of its trace answered."""
    if not steps:
        return []
    resource = next((s["resource"] for s in spans if s.get("resource")), {})
    agent = str(service_of(spans) or "unknown")[:128]
    project = str(resource.get("vigil.project") or "default")[:128]
    return [PipelineEvent(project=project, agent=agent, stage="step", trace_id=trace_id, span_id=step)
            for step in steps]


_no_turn_lines: dict[tuple[str, str], Every] = {}


def _no_turn(trace_id: str, spans: list[dict[str, Any]], why: str, monitors: list[str]) -> list[PipelineEvent]:
    """A ``no_turn`` stage (per turn monitor, so the agent's funnel row shows it) for a trace with GenAI spans that
    made no turn, and a line saying why (one per agent and reason every ten minutes)."""
    resource = next((s["resource"] for s in spans if s.get("resource")), {})
    agent = str(service_of(spans) or "unknown")[:128]
    project = str(resource.get("vigil.project") or "default")[:128]
    if _no_turn_lines.setdefault((agent, why), Every(600))():
        log.warning("a trace with GenAI spans made no turn", agent=agent, trace_id=trace_id, why=why)
    return [PipelineEvent(project=project, agent=agent, monitor=monitor, stage="no_turn", trace_id=trace_id)
            for monitor in monitors or [""]]


_content_warned: set[str] = set()  # agents warned of missing content (once each per worker process)


def _warn_missing_content(turns: list[dict[str, Any]]) -> None:
    for turn in turns:
        metadata = turn.get("metadata") or {}
        if metadata.get(CONTENT_METADATA) == "missing" and turn.get("agent") not in _content_warned:
            _content_warned.add(turn.get("agent"))
            log.warning("message content was not captured: the agent's turns are recorded and left unscored",
                        agent=turn.get("agent"), set=metadata.get(SETTING_METADATA))


@app.task(name=CLOSE_SESSIONS_TASK)
def close_sessions() -> dict[str, int]:
    """Close every idle session: each session monitor that samples it (on the session id) scores it once."""
    rt, settings = runtime(), session_settings()
    monitors = [m for m in rt.config.monitors if m.target == "session"]
    closed = scored = 0
    while True:
        claimed, lease = claim_due(rt.redis, settle_s=settings.idle_s, lease_s=intake_settings().lease_s,
                                   key=SESSIONS)
        if not claimed:
            break
        rows: dict[str, list] = {"pipeline_events": [], "dead_letters": []}
        fan_out = []
        for member in claimed:
            turns = session_turns(rt.redis, member)
            if not turns:
                continue
            raw = session_turn(turns)
            try:
                session = Turn.model_validate(raw)
            except ValidationError as exc:
                rows["dead_letters"].append(dead_letter(INGEST_QUEUE, raw, validation_reason(exc), "invalid_session"))
                continue
            wanted = []
            for monitor in monitors:
                if not matches(session, monitor.filters):
                    stage = "filtered"
                elif not sampled(session.session_id or session.trace_id, monitor.sampling_rate):
                    stage = "skipped"
                else:
                    stage = "sampled"
                    wanted.append(monitor.name)
                rows["pipeline_events"].append(_event(session, monitor.name, stage))
                rt.telemetry.stage(monitor=monitor.name, stage=stage)
            if wanted:
                fan_out.append((raw, wanted))
        push(rt.redis, rows.items())
        for raw, wanted in fan_out:
            score.apply_async((raw, wanted, time.time()), queue=SCORE_QUEUE)
        release(rt.redis, claimed, lease, key=SESSIONS)
        closed, scored = closed + len(claimed), scored + len(fan_out)
    if closed:
        log.info("sessions closed", sessions=closed, scored=scored)
    return {"sessions": closed, "scored": scored}
