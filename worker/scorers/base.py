"""The scorer base class, and the run every scorer writes its steps into.

A scorer is a small frozen pydantic model whose fields are its config (``scale`` is declared here once, and
``reason_mode`` on ``ReasonedScorer``). ``Scorer.score`` is written once: it builds the call context (unless the
caller brings one), opens a ``ScoreRun`` and turns the scorer's early exits into the three outcomes. A scorer only
writes ``_score``, its steps straight-line, and raises to leave early:

- ``Unscorable`` (nothing to score, or a verdict the judge could not give) becomes *unscored* with the reason;
- ``DoesNotApply`` (the scorer does not apply to this turn) becomes *unscored*, labelled ``not_applicable``, with
  the reason;
- ``InvalidInput`` (the trace lacks what the scorer needs) and ``AgentFailed`` (the agent under test raised)
  become *failed* with their error type, and so does ``JudgeFailed``;
- ``JudgePaused`` is never caught: the work waits for the judge.

An agent that abstains (the rubric's 0 of the paper "RAG の応答正確性と連続応答性能の自動評価": "the response
states it is not sure") is ``ScoreRun.abstained``: status *scored*, label ``abstained``, no score, so it is
counted on its own and never averaged in. An empty answer is not an abstention: it scores the bottom of the scale.

``ScoreRun.ask`` is the one judge-step recorder: it stamps the request with the run's call context, keeps every
judge call, records the step's prompt and parsed result, and makes an unusable reply *unscored*; its ``parse=``
hook lets a scorer read the reply its own way (rag_correctness reads a ``[RESULT] n`` even from plain text).
Each scorer declares a typed ``Details`` model; the run fills it and the result carries it serialised once, with
only the fields the run set. ``label_for(score)`` names the seed's interpretation band the score falls in.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from vigil.schemas import ScoreResult, ScoreStatus, StepResult, Turn
from vigil.schemas.score import ABSTAINED, NOT_APPLICABLE
from vigil.worker.judge.base import (
    CallContext,
    Judge,
    JudgeFailed,
    JudgeReply,
    JudgeRequest,
)
from vigil.worker.scorers.formulas import Bands, band_label, clamp
from vigil.worker.scorers.prompts.common import Reason

__all__ = [
    "AgentFailed",
    "Details",
    "DoesNotApply",
    "InvalidInput",
    "ReasonMode",
    "ReasonedScorer",
    "ScoreRun",
    "Scorer",
    "ScorerFailed",
    "Unscorable",
]

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")
ReasonMode = Literal["llm", "template", "none"]


class Unscorable(Exception):
    """Nothing to score, or no usable verdict: the result is *unscored* with this reason."""


class DoesNotApply(Exception):
    """The scorer does not apply to this turn: the result is *unscored*, labelled ``not_applicable``, with this
    reason (out of means and coverage, its own funnel stage)."""


class _Failure(Exception):
    """The result is *failed* with ``error_type`` and the reason ``prefix`` + the message."""

    error_type: ClassVar[str]
    prefix: ClassVar[str] = ""


class InvalidInput(_Failure):
    """The trace lacks what the scorer needs: *failed* with error type ``invalid_input``."""

    error_type = "invalid_input"


class ScorerFailed(_Failure):
    """The scorer's own work failed (a user's function raised, timed out, returned a value off the scale):
    *failed* with the given error type and the message as the reason."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type  # type: ignore[misc]


class AgentFailed(_Failure):
    """The agent under test (the multi-turn scorer's follow-ups) raised: *failed* with ``agent_error``."""

    error_type = "agent_error"
    prefix = "the agent under test failed: "


class Details(BaseModel):
    """What every scorer may record beside its own details: the unusable reply, why the judge's reason failed."""

    model_config = ConfigDict(extra="forbid")

    raw_reply: str | None = None
    reason_error: str | None = None
    empty_answer: bool | None = None  # the agent's answer was empty: the bottom of the scale, no judge call

    def set(self, **values: Any) -> None:
        """Set fields (each is then part of the result's details)."""
        for name, value in values.items():
            setattr(self, name, value)

    def dump(self) -> dict[str, Any]:
        """The fields the run set, as JSON data: the result's ``details``."""
        return self.model_dump(mode="json", exclude_unset=True)


def _parsed(reply: JudgeReply[T]) -> tuple[T, Any]:
    if reply.output is None:
        raise ValueError(f"was unusable: {reply.error}")
    return reply.output, reply.output.model_dump(mode="json")


@dataclass
class ScoreRun:
    """One scorer run over one turn: its context, steps, judge calls and details, and the result it becomes."""

    scorer: Scorer
    judge: Judge
    context: CallContext
    details: Any = None  # the scorer's ``Details`` instance
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    steps: list[StepResult] = field(default_factory=list)
    calls: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.details is None:
            self.details = self.scorer.Details()

    async def outcome(self, body: Callable[[], Awaitable[ScoreResult]]) -> ScoreResult:
        """Run ``body``; turn its early exits into unscored or failed results."""
        try:
            return await body()
        except Unscorable as exc:
            return self._result(ScoreStatus.UNSCORED, reason=str(exc))
        except DoesNotApply as exc:
            return self._result(ScoreStatus.UNSCORED, reason=str(exc), label=NOT_APPLICABLE)
        except _Failure as exc:
            return self._result(ScoreStatus.FAILED, reason=f"{exc.prefix}{exc}", error_type=exc.error_type)
        except JudgeFailed as exc:
            return self._result(ScoreStatus.FAILED, reason=f"the judge failed: {exc}", error_type=exc.error_type)

    async def ask(self, step: str, request: JudgeRequest[T],
                  parse: Callable[[JudgeReply[T]], tuple[R, Any]] = _parsed) -> R:  # type: ignore[assignment]
        """One judge step under the run's context, recorded with its prompt and parsed result. ``parse(reply)``
        returns (value, what the step records) or raises ValueError saying what is wrong with the reply (then the
        raw reply is recorded and the result is *unscored*)."""
        try:
            reply = await self.judge.ask(replace(request, context=self.context))
        except JudgeFailed as exc:
            self.calls.extend(exc.calls)
            raise
        self.calls.extend(reply.calls)
        try:
            value, shown = parse(reply)
        except ValueError as exc:
            self.steps.append(StepResult(name=step, prompt=request.prompt, result={"raw": reply.raw}))
            self.details.raw_reply = reply.raw
            raise Unscorable(f"the judge's {step} reply {exc}") from None
        self.steps.append(StepResult(name=step, prompt=request.prompt, result=shown))
        return value

    def note(self, step: str, result: Any, prompt: str | None = None) -> None:
        """A step that made no judge call (the reason template, an agent's answer), recorded all the same."""
        self.steps.append(StepResult(name=step, prompt=prompt, result=result))

    async def reason(
        self, mode: ReasonMode, *, template: str, request: Callable[[], JudgeRequest[Reason]]
    ) -> str | None:
        """The reason step: the judge's (``llm``), ``template`` without a call, or none. A judge that fails to
        explain does not cost the score: the template stands in and ``details.reason_error`` says why."""
        if mode == "none":
            return None
        if mode == "llm":
            try:
                return (await self.ask("reason", request())).reason
            except (Unscorable, JudgeFailed) as exc:
                self.details.reason_error = str(exc)
        self.note("reason", {"reason": template})
        return template

    def scored(self, score: float, reason: str | None, label: str | None = None) -> ScoreResult:
        """A verdict: the score clamped to the scale, labelled ``label`` or else with the seed's band it falls in."""
        value = clamp(score, self.scorer.scale)
        return self._result(ScoreStatus.SCORED, score=value, reason=reason,
                            label=label if label is not None else self.scorer.label_for(value))

    def empty_answer(self, reason: str) -> ScoreResult:
        """The agent answered nothing: the bottom of the scale (not an abstention, not unscored)."""
        self.details.empty_answer = True
        return self.scored(0.0, reason)

    def abstained(self, reason: str) -> ScoreResult:
        """The agent said it is not sure: scored, labelled ``abstained``, no score (never averaged in)."""
        return self._result(ScoreStatus.SCORED, reason=reason, label=ABSTAINED)

    def _result(self, status: ScoreStatus, *, score: float | None = None, reason: str | None = None,
                label: str | None = None, error_type: str | None = None) -> ScoreResult:
        s = self.scorer
        return ScoreResult(
            run_id=self.run_id, scorer=s.name, scorer_version=s.version, status=status, score=score,
            scale=s.scale, label=label, reason=reason, steps=self.steps, details=self.details.dump(),
            error_type=error_type, judge_model=self.judge.model or None, calls=self.calls,
        )


class Scorer(BaseModel, abc.ABC):
    """A scorer: its fields are its config. Subclasses set ``name``, ``version`` (written on every score row; bump
    it when prompts or arithmetic change: the reply cache keys on it), ``bands`` (the seed's interpretation of
    a score / scale, best first) and ``Details``, and write ``_score``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str]
    version: ClassVar[str]
    bands: ClassVar[Bands]
    Details: ClassVar[type[Details]] = Details

    scale: float = Field(default=1.0, gt=0.0)

    def label_for(self, score: float) -> str:
        """The interpretation band ``score`` (on this scorer's scale) falls in."""
        return band_label(self.bands, score / self.scale)

    def context_for(self, turn: Turn, monitor: str = "") -> CallContext:
        """The call context of scoring ``turn`` for ``monitor``."""
        return CallContext(monitor=monitor, scorer=self.name, scorer_version=self.version, trace_id=turn.trace_id,
                           origin=turn.origin)

    def start(self, judge: Judge, context: CallContext) -> ScoreRun:
        return ScoreRun(self, judge, context)

    async def score(self, turn: Turn, judge: Judge, context: CallContext | None = None) -> ScoreResult:
        """Score one turn: scored, unscored or failed, never raising but for ``JudgePaused``."""
        run = self.start(judge, context or self.context_for(turn))
        return await run.outcome(lambda: self._score(turn, run))

    @abc.abstractmethod
    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult: ...


class ReasonedScorer(Scorer):
    """A scorer whose reason is a step of its own: ``llm`` (the judge writes it), ``template``, or ``none``."""

    reason_mode: ReasonMode = "llm"


