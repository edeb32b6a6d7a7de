"""The worker's side of the intake: ``vigil.spans`` keeps spans by trace, ``vigil.assemble_traces`` turns settled
traces into turns and hands them to ``vigil.ingest`` (see ``worker.intake.traces`` for the keys and the claims)."""

from __future__ import annotations

from typing import Any

import structlog

from schemas.broker import INGEST_QUEUE, INGEST_TASK, SPANS_TASK
from worker.intake.settings import intake_settings
from worker.intake.traces import (
    claim_due,
    invalid_reason,
    release,
    store_spans,
    trace_spans,
    turns_of,
)
from worker.pipeline.app import app
from worker.pipeline.runtime import runtime
from worker.pipeline.tasks import _REDIS_FAILED, _requeue_on_redis_failure, dead_letter
from worker.sinks.write_queue import push

__all__ = ["ASSEMBLE_TASK", "assemble_traces", "collect_spans"]

log = structlog.get_logger("vigil.intake")

ASSEMBLE_TASK = "vigil.assemble_traces"


@app.task(name=SPANS_TASK, bind=True)
def collect_spans(self, spans: Any) -> dict[str, int]:
    """Keep each span under its trace and schedule the sweep that assembles the trace once it settles."""
    rt, settings = runtime(), intake_settings()
    spans = spans if isinstance(spans, list) else [spans]
    good, dead = [], []
    for span in spans:
        reason = invalid_reason(span)
        if reason is None:
            good.append(span)
        else:
            dead.append(dead_letter(INGEST_QUEUE, span, f"span: {reason}", "invalid_span"))
    try:
        if dead:
            push(rt.redis, [("dead_letters", dead)])
        traces = store_spans(rt.redis, good, keep_s=settings.keep_s) if good else 0
        if traces:
            assemble_traces.apply_async(countdown=settings.settle_s, queue=INGEST_QUEUE)
    except _REDIS_FAILED as exc:
        raise _requeue_on_redis_failure(exc) from exc
    return {"spans": len(good), "traces": traces, "dead": len(dead)}


@app.task(name=ASSEMBLE_TASK)
def assemble_traces() -> dict[str, int]:
    """Assemble every settled trace: claim, assemble, publish one ingest batch, release."""
    rt, settings = runtime(), intake_settings()
    assembled = turns = 0
    try:
        while True:
            claimed, lease = claim_due(rt.redis, settle_s=settings.settle_s, lease_s=settings.lease_s)
            if not claimed:
                break
            batch: list[dict[str, Any]] = []
            for trace_id in claimed:
                batch.extend(turns_of(trace_spans(rt.redis, trace_id)))
            if batch:
                app.send_task(INGEST_TASK, args=[batch], queue=INGEST_QUEUE)
            release(rt.redis, claimed, lease)
            assembled, turns = assembled + len(claimed), turns + len(batch)
    except _REDIS_FAILED as exc:  # claimed traces come back after their lease
        log.error("assembling traces failed; they are claimed again after the lease", error=str(exc))
        raise
    if assembled:
        log.info("traces assembled", traces=assembled, turns=turns)
    return {"traces": assembled, "turns": turns}
