"""The report as data: what ``vigil report --json`` prints and what the HTML page and the tables are drawn from."""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, Field, computed_field, field_validator
from vigil.schemas.alert import Segment
from vigil.worker.judge.baseline import is_heuristic
from vigil.worker.report.compare import Comparison

__all__ = [
    "AgreementRow",
    "AlertMark",
    "AlertRow",
    "BandPoint",
    "DeadLetterGroup",
    "DetectorMode",
    "DistributionBin",
    "FunnelRow",
    "JudgeEval",
    "JudgeSummary",
    "LagPoint",
    "MonitorChart",
    "MonitorSummary",
    "PausedJudge",
    "Point",
    "Report",
    "ScoreSeries",
    "Status",
    "UnscoredReason",
    "WorstTurn",
]


def _interval(low: float | None, high: float | None) -> tuple[float, float] | None:
    return None if low is None or high is None else (low, high)


class MonitorSummary(BaseModel):
    project: str
    agent: str
    monitor: str
    scorer: str
    scorer_versions: str
    turns: int
    scored: int
    abstained: int = 0  # the agent said it is not sure: a verdict, with no score
    unscored: int
    not_applicable: int = 0  # the scorer does not apply to the turn: no verdict due
    failed: int
    abstention_rate: float | None = None  # abstained / (scored + abstained)
    mean_score: float | None = None  # score / scale, 0..1, of scored turns (abstentions excluded)
    ci_low: float | None = None
    ci_high: float | None = None
    p50_score: float | None = None
    last_scored_at: datetime | None = None
    judge_models: str = ""  # of its scored turns

    @computed_field  # type: ignore[prop-decorator]
    @property
    def heuristic(self) -> bool:
        """Scored by the offline baseline heuristic (word overlap), not an LLM judge: its numbers say so."""
        return any(is_heuristic(m.strip()) for m in self.judge_models.split(",") if m.strip())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_ci(self) -> tuple[float, float] | None:
        """The 95% interval of ``mean_score``: the scores are a sample of the turns. None below two scores."""
        return _interval(self.ci_low, self.ci_high)


class DeliveryRow(BaseModel):
    """Turns the SDK shipped and the workers received, per agent; lost > 0: the broker dropped some."""

    project: str
    agent: str
    shipped: int = 0
    received: int = 0
    lost: int = 0


class FunnelRow(BaseModel):
    project: str
    agent: str
    monitor: str
    received: int = 0
    steps: int = 0  # LLM calls that only asked for a tool, their answer in another trace: never turns
    superseded: int = 0  # turns a later assembly of their trace replaced (a late root), removed with their scores
    failed_runs: int = 0  # agent runs that ended in error without an answer: recorded, never scored
    no_turn: int = 0  # traces with GenAI spans that made no turn (no LLM call, no known convention)
    joined: int = 0  # traces that joined another trace's run (span links): its work, no turn of their own
    conflicts: int = 0  # spans or turns resent under a stored id with other content: refused, the stored turn kept
    filtered: int = 0
    skipped: int = 0
    probe: int = 0  # vigil's own traffic (probe follow-ups), never sampled
    shed: int = 0  # sampled, then shed: the score queue was over its bound
    budget: int = 0  # chosen by the rate, not judged: the judge budget paced or paused the monitor
    sampled: int = 0
    scored: int = 0
    abstained: int = 0
    unscored: int = 0
    not_applicable: int = 0  # the scorer does not apply to the turn: no verdict due
    failed: int = 0
    coverage: float | None = None  # (scored + abstained) / (sampled - not_applicable)
    lost: int = 0  # sampled, never an outcome: the broker lost the work (vigil.worker.pipeline.broker_epoch)
    dead_lettered: int = 0  # this agent's turns vigil could not take (never received): see Report.dead_letters


class DeadLetterGroup(BaseModel):
    """Dead letters of one kind (queue, error type, the project and agent their payload names)."""

    queue: str
    error_type: str
    project: str = ""
    agent: str = ""
    letters: int
    last_seen: datetime
    reason: str = ""  # the latest one's


class UnscoredReason(BaseModel):
    """One of a monitor's most common reasons for leaving turns unscored (or not applicable) or failed."""

    monitor: str
    status: str  # unscored | not_applicable | failed
    error_type: str = ""
    reason: str = ""
    turns: int
    last_seen: datetime


class Point(BaseModel):
    time: datetime
    value: float


class ScoreSeries(BaseModel):
    """Mean score over time for one agent, monitor and scorer version."""

    agent: str
    monitor: str
    scorer_version: str
    points: list[Point] = Field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.agent} / {self.monitor} @ v{self.scorer_version}"


class BandPoint(BaseModel):
    """One bucket of a monitor's chart: the mean of its scored turns and that mean's 95% interval."""

    time: datetime
    turns: int
    mean: float
    ci_low: float | None = None
    ci_high: float | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_ci(self) -> tuple[float, float] | None:
        return _interval(self.ci_low, self.ci_high)


class AlertMark(BaseModel):
    """An alert on a chart: shaded from the change it names (else when it fired) to now, or to its resolution."""

    start: datetime
    end: datetime
    firing: bool
    sentence: str


class MonitorChart(BaseModel):
    """One monitor on one agent over time, in buckets of ``interval_s`` chosen from how its scores spread, from
    ``start`` to ``end`` (the report's range; a firing alert's chart: the change and enough before it to compare)."""

    agent: str
    monitor: str
    interval_s: int
    start: datetime
    end: datetime
    points: list[BandPoint] = Field(default_factory=list)
    alerts: list[AlertMark] = Field(default_factory=list, description="the alerts about this agent's monitor")


class DistributionBin(BaseModel):
    monitor: str
    bin: float  # lower edge of a 0.1-wide bin of score / scale
    turns: int


class LagPoint(BaseModel):
    time: datetime
    monitor: str
    p50_s: float | None = None
    p95_s: float | None = None


class WorstTurn(BaseModel):
    trace_time: datetime
    agent: str
    monitor: str
    scorer_version: str
    score: float
    label: str = ""
    reason: str = ""
    trace_id: str
    question: str | None = None
    answer: str | None = None


class JudgeSummary(BaseModel):
    judge: str
    models: str = ""
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    error_rate: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, served from the provider's prefix cache
    cost_usd: float = 0.0
    p50_ms: float | None = None
    p95_ms: float | None = None
    last_call: datetime | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cached_share(self) -> float | None:
        """The share of prompt tokens the provider's prefix cache served; None before any prompt token."""
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else None


class PausedJudge(BaseModel):
    judge: str
    status: str
    last_seen: datetime
    source: str


class AgreementRow(BaseModel):
    """Judge-human agreement of one monitor: pairs of a scored turn and human feedback on it, the share where the
    judge's score and the feedback's value fall on the same side of the monitor's pass line, its 95% Wilson
    interval."""

    project: str
    agent: str
    monitor: str
    pairs: int
    agreed: int
    negative_feedback: int = 0
    agreement: float | None = None
    agreement_low: float | None = None
    agreement_high: float | None = None


class AlertRow(BaseModel):
    updated_at: datetime
    state: str
    kind: str
    rule: str
    project: str = ""
    agent: str = ""
    monitor: str = ""
    judge: str = ""
    fired_at: datetime
    message: str = ""
    since: datetime | None = None  # a sequential regression's estimated start, drop and the segments behind it
    drop: float | None = None
    drop_low: float | None = None
    drop_high: float | None = None
    segments: list[Segment] = Field(default_factory=list)
    agents: list[str] = Field(default_factory=list)  # the agents whose scores pulled the mean down
    recent_mean: float | None = None
    baseline_mean: float | None = None

    @field_validator("segments", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        return json.loads(value or "[]") if isinstance(value, str) else value

    def about(self) -> list[str]:
        """The agents the alert is about (empty: every agent of its monitor, or a judge)."""
        return list(self.agents) or ([self.agent] if self.agent else [])


class JudgeEval(BaseModel):
    """One kept ``vigil eval`` run: how often a judge agreed with people on a labelled dataset."""

    started_at: datetime
    scorer: str
    scorer_version: str
    judge: str
    judge_model: str
    dataset: str
    dataset_format: str = ""
    n: int = 0
    pairs: int = 0
    pairwise_accuracy: float | None = None
    pairwise_accuracy_low: float | None = None
    pairwise_accuracy_high: float | None = None
    reference_pairwise_accuracy: float | None = None  # plain word recall of the reference, beside the judge
    ties: int = 0
    spearman: float | None = None
    kendall_tau_b: float | None = None
    cohen_kappa: float | None = None
    no_verdict: int = 0  # unscored + failed items
    abstained: int = 0
    cost_usd: float = 0.0
    dataset_sha256: str = ""
    run_id: str


class DetectorMode(BaseModel):
    """The regression detector's latest check of one monitor."""

    monitor: str
    mode: str  # warmup | watching | firing
    reason: str = ""


class SpendRow(BaseModel):
    """A monitor's judge spend on one UTC day (the ``judge_spend`` panel)."""

    day: date
    monitor: str
    cost_usd: float = 0.0
    tokens: int = 0
    calls: int = 0


class Status(BaseModel):
    """The report's first lines (``report.status.status``): firing alerts, monitors fine or waiting, judges,
    coverage, and the monitors whose scores are a heuristic's."""

    firing: list[AlertRow] = Field(default_factory=list)
    fine: list[str] = Field(default_factory=list)
    waiting: dict[str, str] = Field(default_factory=dict)  # monitor -> what it waits for
    paused_judges: list[str] = Field(default_factory=list)
    judge_calls: int = 0
    judge_error_rate: float | None = None
    spend_usd: float = 0.0
    spend_by_monitor: dict[str, float] = Field(default_factory=dict)  # USD over the range, costliest first
    sampled: int = 0
    verdicts: int = 0  # scored + abstained
    coverage: float | None = None
    heuristic: list[str] = Field(default_factory=list)  # monitors judged by the offline baseline heuristic

    def headline(self) -> str:
        """``2 alerts firing · 9 monitors fine · 1 waiting for data``."""
        def n(count: int, word: str) -> str:
            return f"{count} {word}{'' if count == 1 else 's'}"
        parts = [f"{n(len(self.firing), 'alert')} firing" if self.firing else "no alert firing",
                 f"{n(len(self.fine), 'monitor')} fine"]
        if self.waiting:
            parts.append(f"{len(self.waiting)} waiting for data")
        return " · ".join(parts)

    def judges_line(self) -> str:
        paused = f"paused: {', '.join(self.paused_judges)}" if self.paused_judges else "none paused"
        rate = "—" if self.judge_error_rate is None else f"{self.judge_error_rate:.1%}"
        spent = f"${self.spend_usd:.4f} spent"
        if self.spend_by_monitor:
            spent += " (" + ", ".join(f"{m} ${usd:.4f}" for m, usd in self.spend_by_monitor.items()) + ")"
        return f"judges: {paused}; {self.judge_calls} calls, {rate} errors, {spent}"

    def coverage_line(self) -> str:
        share = "—" if self.coverage is None else f"{self.coverage:.0%}"
        return f"coverage: {share} of sampled turns got a verdict ({self.verdicts} of {self.sampled})"

    def heuristic_line(self) -> str:
        return (f"scored by the offline baseline heuristic (word overlap, no LLM): {', '.join(self.heuristic)}"
                if self.heuristic else "")


class Report(BaseModel):
    """The dashboard's main panels over one time range, read with the panels' own SQL."""

    generated_at: datetime
    start: datetime
    end: datetime
    interval_s: int
    monitors: list[MonitorSummary] = Field(default_factory=list)
    funnel: list[FunnelRow] = Field(default_factory=list)
    delivery: list[DeliveryRow] = Field(default_factory=list)
    score_over_time: list[ScoreSeries] = Field(default_factory=list)
    charts: list[MonitorChart] = Field(default_factory=list)
    firing_charts: list[MonitorChart] = Field(default_factory=list)  # the agents' charts of what is firing, zoomed
    status: Status = Field(default_factory=Status)
    comparisons: list[Comparison] = Field(default_factory=list)  # each agent's newest release (or model) vs the last
    distribution: list[DistributionBin] = Field(default_factory=list)
    queue_lag: list[LagPoint] = Field(default_factory=list)
    worst_turns: list[WorstTurn] = Field(default_factory=list)
    judges: list[JudgeSummary] = Field(default_factory=list)
    spend: list[SpendRow] = Field(default_factory=list)
    paused_judges: list[PausedJudge] = Field(default_factory=list)
    alerts: list[AlertRow] = Field(default_factory=list)
    judge_evals: list[JudgeEval] = Field(default_factory=list)
    agreement: list[AgreementRow] = Field(default_factory=list)
    dead_letters: list[DeadLetterGroup] = Field(default_factory=list)
    unscored_reasons: list[UnscoredReason] = Field(default_factory=list)

    def monitor_names(self) -> list[str]:
        return sorted({m.monitor for m in self.monitors} | {f.monitor for f in self.funnel})
