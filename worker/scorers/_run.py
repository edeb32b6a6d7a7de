"""What every scorer run shares: the steps and judge calls it accumulates, and its three outcomes.

A scorer writes its steps straight-line and raises to leave early: ``Unscorable`` (nothing to score, or a verdict
the judge could not give) becomes *unscored*; ``InvalidInput`` (the trace lacks what the scorer needs) and
``JudgeFailed`` become *failed* with an error type. ``JudgePaused`` is never caught: the work waits for the judge.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from schemas import JudgeCall, ScoreResult, ScoreStatus, StepResult
from worker.judge.base import Judge, JudgeFailed, JudgeRequest
from worker.scorers.formulas import clamp
from worker.scorers.prompts.common import Reason

__all__ = ["InvalidInput", "ReasonMode", "ScoreRun", "Unscorable"]

T = TypeVar("T", bound=BaseModel)
ReasonMode = Literal["llm", "template", "none"]


class Unscorable(Exception):
    """Nothing to score, or no usable verdict: the result is *unscored* with this reason."""


class InvalidInput(Exception):
    """The trace lacks what the scorer needs: the result is *failed* with error type ``invalid_input``."""


@dataclass
class ScoreRun:
    scorer: str
    version: str
    scale: float
    judge: Judge
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    steps: list[StepResult] = field(default_factory=list)
    calls: list[JudgeCall] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    async def outcome(self, body: Callable[[], Awaitable[ScoreResult]]) -> ScoreResult:
        """Run ``body``; turn its early exits into unscored or failed results."""
        try:
            return await body()
        except Unscorable as exc:
            return self._result(ScoreStatus.UNSCORED, reason=str(exc))
        except InvalidInput as exc:
            return self._result(ScoreStatus.FAILED, reason=str(exc), error_type="invalid_input")
        except JudgeFailed as exc:
            return self._result(ScoreStatus.FAILED, reason=f"the judge failed: {exc}", error_type=exc.error_type)

    async def ask(self, step: str, request: JudgeRequest[T]) -> T:
        """One judge step, recorded with its prompt and parsed result; an unusable reply is ``Unscorable``."""
        try:
            reply = await self.judge.ask(request)
        except JudgeFailed as exc:
            self.calls.extend(exc.calls)
            raise
        self.calls.extend(reply.calls)
        if reply.output is None:
            self.steps.append(StepResult(name=step, prompt=request.prompt, result={"raw": reply.raw}))
            self.details["raw_reply"] = reply.raw
            raise Unscorable(f"the judge's {step} reply was unusable: {reply.error}")
        self.steps.append(StepResult(name=step, prompt=request.prompt, result=reply.output.model_dump(mode="json")))
        return reply.output

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
                self.details["reason_error"] = str(exc)
        self.steps.append(StepResult(name="reason", prompt=None, result={"reason": template}))
        return template

    def scored(self, score: float, reason: str | None) -> ScoreResult:
        return self._result(ScoreStatus.SCORED, score=clamp(score, self.scale), reason=reason)

    def _result(self, status: ScoreStatus, *, score: float | None = None, reason: str | None = None,
                error_type: str | None = None) -> ScoreResult:
        return ScoreResult(
            run_id=self.run_id, scorer=self.scorer, scorer_version=self.version, status=status, score=score,
            scale=self.scale, reason=reason, steps=self.steps, details=self.details, error_type=error_type,
            judge_model=self.judge.model, calls=self.calls,
        )
