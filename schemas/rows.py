"""Rows of the ClickHouse tables, one model per table, fields in the DDL's column names.

They cross the write queue as JSON and are validated again by the writer before they are inserted.
``Score`` (``vigil.schemas.score``) is the row of ``scores``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from pydantic import BaseModel, Field
from vigil.schemas.config import MonitorConfig
from vigil.schemas.feedback import Feedback
from vigil.schemas.pass_line import DEFAULT_LINE
from vigil.schemas.score import JudgeCall, Score, ScoreResult, TurnColumns, score_id
from vigil.schemas.trace import Turn

__all__ = [
    "TABLES",
    "BrokerEpoch",
    "DeadLetter",
    "JudgeCallRow",
    "JudgeEvalRow",
    "PipelineEvent",
    "ProducerBatch",
    "Supersession",
    "TraceRow",
    "score_row",
    "trace_row",
]


def _now() -> datetime:
    return datetime.now(UTC)


class TraceRow(TurnColumns):
    started_at: datetime
    ended_at: datetime | None = None
    system: str = ""
    input_json: str
    question: str
    output: str
    contexts_json: str = "[]"
    reference: str = ""
    tool_calls_json: str = "[]"
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    truncated: list[str] = Field(default_factory=list)
    spans_json: str = "[]"
    received_at: datetime = Field(default_factory=_now)


def trace_row(turn: Turn) -> TraceRow:
    return TraceRow(
        **TurnColumns.of(turn),
        started_at=turn.started_at,
        ended_at=turn.ended_at,
        system=turn.system or "",
        input_json=json.dumps([m.model_dump(exclude_defaults=True) for m in turn.input], ensure_ascii=False),
        question=turn.question,
        output=turn.output,
        contexts_json=json.dumps([c.model_dump() for c in turn.contexts], ensure_ascii=False),
        reference=turn.reference or "",
        tool_calls_json=json.dumps([t.model_dump() for t in turn.tool_calls], ensure_ascii=False),
        model=turn.model or "",
        prompt_tokens=turn.usage.prompt_tokens if turn.usage else 0,
        completion_tokens=turn.usage.completion_tokens if turn.usage else 0,
        tags=turn.tags,
        metadata=turn.metadata,
        truncated=turn.truncated,
        spans_json=json.dumps([span.model_dump(exclude_none=True) for span in turn.spans], ensure_ascii=False),
    )


class JudgeCallRow(BaseModel):
    call_id: str
    score_id: str
    trace_id: str
    project: str
    monitor: str
    scorer: str
    judge: str
    model: str
    step: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    status: str = "ok"
    attempt: int = 1
    cached: bool = False
    called_at: datetime = Field(default_factory=_now)

    @classmethod
    def of(cls, call: JudgeCall, index: int, *, score: Score) -> JudgeCallRow:
        call_id = hashlib.sha256(f"{score.score_id}\x1f{index}".encode()).hexdigest()[:32]
        return cls(call_id=call_id, score_id=score.score_id, trace_id=score.trace_id, project=score.project,
                   monitor=score.monitor, scorer=score.scorer, judge=score.judge, **call.model_dump())


class PipelineEvent(BaseModel):
    event_time: datetime = Field(default_factory=_now)
    project: str
    agent: str
    monitor: str = ""
    stage: str  # received | filtered | skipped | probe | sampled | scored | abstained | unscored | not_applicable | failed
    trace_id: str
    span_id: str = ""


class Supersession(BaseModel):
    """A turn a later assembly of its trace replaced (its root arrived late): the writer deletes its rows (``traces``,
    ``scores``, its ``pipeline_events`` but this one's ``superseded`` stage), so no query sees the stale turn."""

    project: str = "default"
    trace_id: str
    span_id: str
    by_span_id: str = ""  # the turn that replaced it
    caused_by: str = ""  # the late span whose arrival made it (an ancestor of the turn's root)


class DeadLetter(BaseModel):
    dead_id: str
    received_at: datetime = Field(default_factory=_now)
    queue: str
    reason: str
    error_type: str
    payload: str


class ProducerBatch(BaseModel):
    """One batch an SDK producer shipped, as received (``vigil.schemas.broker.SHIPPED_HEADERS``)."""

    producer: str
    batch: int = Field(ge=0)
    turns: int = Field(ge=0)
    shipped: int = Field(ge=0)  # the producer's running count of turns shipped, this batch included
    project: str = ""
    agent: str = ""
    received_at: datetime = Field(default_factory=_now)


class BrokerEpoch(BaseModel):
    """A broker epoch (migration 0023, ``vigil.worker.pipeline.broker_epoch``): with a ``previous`` one, the broker
    came back empty and lost every queued task at ``reset_at``."""

    epoch: str
    previous: str = ""
    run_id: str = ""
    reset_at: datetime
    started_at: datetime = Field(default_factory=_now)


class JudgeEvalRow(BaseModel):
    """One kept ``vigil eval`` run (migration 0007): agreement with people, its intervals, and what it cost."""

    run_id: str
    dataset: str
    dataset_format: str
    dataset_sha256: str
    scorer: str
    scorer_version: str
    params_json: str
    judge: str
    judge_model: str
    n: int = Field(ge=0)
    scored: int = Field(ge=0)
    unscored: int = Field(ge=0)
    failed: int = Field(ge=0)
    abstained: int = Field(ge=0)
    pairs: int = Field(ge=0)
    ties: int = Field(ge=0)
    pairwise_accuracy: float | None = None
    pairwise_accuracy_low: float | None = None
    pairwise_accuracy_high: float | None = None
    spearman: float | None = None
    kendall_tau_b: float | None = None
    pearson: float | None = None
    cohen_kappa: float | None = None
    reference_pairwise_accuracy: float | None = None
    reference_spearman: float | None = None
    judge_calls: int = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cost_usd: float
    p50_latency_ms: float | None = None
    p95_latency_ms: float | None = None
    report_json: str
    started_at: datetime
    ended_at: datetime


TABLES: dict[str, type[BaseModel]] = {
    "traces": TraceRow,
    "scores": Score,
    "judge_calls": JudgeCallRow,
    "pipeline_events": PipelineEvent,
    "dead_letters": DeadLetter,
    "feedback": Feedback,
    "producer_batches": ProducerBatch,
    "broker_epochs": BrokerEpoch,
    "judge_evals": JudgeEvalRow,
    "superseded": Supersession,  # not a table: the writer deletes what it names (``vigil.worker.sinks.writer``)
}

def score_row(turn: Turn, monitor: MonitorConfig, result: ScoreResult, *, inclusion: float | None = None,
              pass_line: float = DEFAULT_LINE) -> Score:
    """The ``scores`` row; ``inclusion``: the rate the turn was sampled at (default: the monitor's configured rate);
    ``pass_line``: the monitor's pass line (``VigilConfig.pass_line``) it was scored under."""
    usage = result.usage
    value = None if result.score is None else min(max(result.score, 0.0), result.scale)
    return Score(
        **TurnColumns.of(turn),
        score_id=score_id(turn.trace_id, turn.span_id, monitor.name, result.scorer_version),
        monitor=monitor.name,
        scorer=result.scorer,
        scorer_version=result.scorer_version,
        status=result.status,
        score=value,
        scale=result.scale,
        pass_line=pass_line,
        label=result.label or "",
        reason=result.reason or "",
        steps_json=json.dumps([s.model_dump(mode="json") for s in result.steps], ensure_ascii=False, default=str),
        details_json=json.dumps(result.details, ensure_ascii=False, default=str),
        error_type=result.error_type or "",
        judge=monitor.judge or "",
        judge_model=result.judge_model or "",
        judge_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_usd=usage.cost_usd,
        latency_ms=usage.latency_ms,
        inclusion=min(1.0, inclusion or monitor.sampling_rate or 1.0),
        trace_time=turn.started_at,
    )
