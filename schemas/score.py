"""A score: what a scorer returns for one turn, and the row it becomes.

Three statuses: *scored* (a verdict), *unscored* (no verdict: an unreadable judge reply, nothing to score; never a
0) and *failed* (an error, named by ``error_type``). An agent that abstains (the rubric's 0 in the paper "RAG
の応答正確性と連続応答性能の自動評価": "the response states it is not sure") is a verdict about the agent, so it is
*scored*, with the label ``abstained`` and no score: it counts as an abstention of its own (the funnel stage and the
report's ``abstained`` column) and never enters a mean. An empty answer is not an abstention: it scores the bottom
of the scale.

A scorer that does not apply to a turn (a rubric about order ids on a question with no order) says so: the result
is *unscored* with the label ``not_applicable`` and its reason. It is its own funnel stage, never in a mean, and it
does not lower coverage (``sampled - not_applicable`` is what a verdict was due for). A user's Python scorer returns
``NotApplicable("reason")`` for it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ABSTAINED",
    "NOT_APPLICABLE",
    "JudgeCall",
    "JudgeUsage",
    "NotApplicable",
    "Score",
    "ScoreResult",
    "ScoreStatus",
    "StepResult",
    "TurnColumns",
    "score_id",
]

ABSTAINED = "abstained"  # the label of a scored result whose agent said it is not sure (score None)
NOT_APPLICABLE = "not_applicable"  # the label of an unscored result whose scorer does not apply to the turn


@dataclass(frozen=True)
class NotApplicable:
    """What a Python scorer returns when it does not apply to the turn: ``NotApplicable("no order in this turn")``."""

    reason: str


class ScoreStatus(StrEnum):
    SCORED = "scored"
    UNSCORED = "unscored"  # the judge could not give a verdict, or there was nothing to score: never a 0
    FAILED = "failed"  # an error stopped the scorer; error_type says which


class StepResult(BaseModel):
    """One step of a scorer, as the seeds' ``.run()`` returns it: the prompt sent and the parsed result."""

    name: str  # preprocess | analyze | reason | ...
    prompt: str | None = None
    result: Any = None


class JudgeCall(BaseModel):
    """One request to a judge (one row of ``judge_calls``)."""

    step: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the provider served from its prefix cache
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    status: str = "ok"  # ok | cached | http_429 | http_500 | timeout | parse_error | ...
    attempt: int = 1
    cached: bool = False  # vigil's own reply cache answered: no request was made


class JudgeUsage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    cache_hits: int = 0

    @classmethod
    def of(cls, calls: list[JudgeCall]) -> JudgeUsage:
        return cls(
            calls=sum(1 for c in calls if not c.cached),
            prompt_tokens=sum(c.prompt_tokens for c in calls if not c.cached),
            completion_tokens=sum(c.completion_tokens for c in calls if not c.cached),
            cached_prompt_tokens=sum(c.cached_prompt_tokens for c in calls if not c.cached),
            cost_usd=sum(c.cost_usd for c in calls if not c.cached),
            latency_ms=sum(c.latency_ms for c in calls),
            cache_hits=sum(1 for c in calls if c.cached),
        )


class ScoreResult(BaseModel):
    """What one scorer run returns: the seeds' ``.run()`` fields plus status, version and judge usage."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    scorer: str
    scorer_version: str
    status: ScoreStatus
    score: float | None = None
    scale: float = 1.0
    label: str | None = None
    reason: str | None = None
    steps: list[StepResult] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    error_type: str | None = None
    judge_model: str | None = None
    calls: list[JudgeCall] = Field(default_factory=list)

    @property
    def usage(self) -> JudgeUsage:
        return JudgeUsage.of(self.calls)

    def step(self, name: str) -> StepResult | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def outcome(self) -> str:
        """The funnel stage: the status, ``abstained`` for a scored abstention, ``not_applicable`` for a scorer that
        does not apply."""
        if self.label == ABSTAINED:
            return ABSTAINED
        if self.label == NOT_APPLICABLE and self.status is ScoreStatus.UNSCORED:
            return NOT_APPLICABLE
        return str(self.status)


def score_id(trace_id: str, span_id: str | None, monitor: str, scorer_version: str) -> str:
    """Deterministic: a redelivered or re-run score of the same turn by the same monitor replaces, never adds."""
    key = "\x1f".join([trace_id, span_id or "", monitor, scorer_version])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class TurnColumns(BaseModel):
    """The columns that name a turn on every row about the whole turn (``traces``, ``scores``): its ids and where
    it ran, declared once. ``of(turn)`` fills them from a ``Turn``."""

    trace_id: str
    span_id: str = ""
    session_id: str = ""
    project: str
    agent: str
    environment: str

    @staticmethod
    def of(turn: Any) -> dict[str, str]:
        """The turn's identity columns (a ``schemas.Turn``; its optional ids become "")."""
        return {"trace_id": turn.trace_id, "span_id": turn.span_id or "", "session_id": turn.session_id or "",
                "project": turn.project, "agent": turn.agent, "environment": turn.environment}


class Score(TurnColumns):
    """A row of the ``scores`` table."""

    score_id: str
    monitor: str
    scorer: str
    scorer_version: str
    status: ScoreStatus
    score: float | None = None
    scale: float = 1.0
    pass_line: float = 0.5  # the monitor's pass line when it was scored, a share of the scale (schemas.pass_line)
    label: str = ""
    reason: str = ""
    steps_json: str = "[]"
    details_json: str = "{}"
    error_type: str = ""
    judge: str = ""
    judge_model: str = ""
    judge_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    inclusion: float = Field(default=1.0, gt=0, le=1)  # the rate its turn was sampled at (budgets pace it)
    trace_time: datetime
    scored_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
