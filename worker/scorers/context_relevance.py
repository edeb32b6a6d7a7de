"""Context Relevance (seed 003): how relevant and useful the agent's context was for its response.

Where the context comes from, first match wins: ``context_extractor(input, output)`` (a callable, or an import path
``"package.module:function"``), then the static ``context`` list, then the trace's own retrieved contexts. The
seed requires ``context`` or ``context_extractor``; a monitor watching live traces has the trace's contexts, so
they are the default, and only a scorer told ``use_trace_contexts=False`` with neither configured is refused at
construction. A trace with no context piece to rate is *unscored* without calling the judge.

Steps: ``analyze`` (a relevance level and a used flag per piece, and the missing items), ``reason``. Score: the
seed's formula (``formulas.context_relevance_score``). An empty response used none of its context: it scores 0
without a judge call. The label is the band of the score interpretation in the seed "リファレンス:
コンテキスト関連度スコアラー" (Context Relevance scorer reference).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from vigil.schemas import Message, ScoreResult, Turn
from vigil.worker.judge import baseline
from vigil.worker.judge.base import JudgeRequest
from vigil.worker.scorers import base
from vigil.worker.scorers.base import InvalidInput, ReasonedScorer, ScoreRun, Unscorable
from vigil.worker.scorers.formulas import Bands, context_relevance_score
from vigil.worker.scorers.prompts import context_relevance as prompts
from vigil.worker.scorers.prompts.common import Reason

__all__ = ["ContextExtractor", "ContextRelevance", "Penalties"]

ContextExtractor = Callable[[list[Message], str], list[str]]


class Penalties(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    unused_high_relevance_context: float = Field(default=0.1, ge=0.0)
    missing_context_per_item: float = Field(default=0.15, ge=0.0)
    max_missing_context_penalty: float = Field(default=0.5, ge=0.0)


class Details(base.Details):
    contexts: int | None = None
    levels: list[str] | None = None
    used: list[bool] | None = None
    missing_context: list[str] | None = None


class ContextRelevance(ReasonedScorer):
    name: ClassVar[str] = "context_relevance"
    version: ClassVar[str] = "2"
    bands: ClassVar[Bands] = ((0.9, "very high relevance"), (0.7, "good relevance"), (0.4, "mixed relevance"),
                              (0.0, "low relevance"))
    Details: ClassVar[type[base.Details]] = Details

    context: list[str] | None = None
    context_extractor: ContextExtractor | None = None
    use_trace_contexts: bool = True
    penalties: Penalties = Field(default_factory=Penalties)

    @field_validator("context_extractor", mode="before")
    @classmethod
    def _import_extractor(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        module, _, attr = value.partition(":")
        if not module or not attr:
            raise ValueError(f"context_extractor {value!r}: expected 'package.module:function'")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"context_extractor {value!r}: {exc}") from None

    @model_validator(mode="after")
    def _has_a_source(self) -> ContextRelevance:
        if self.context is None and self.context_extractor is None and not self.use_trace_contexts:
            raise ValueError("context_relevance needs context or context_extractor when use_trace_contexts is false")
        return self

    def contexts_for(self, turn: Turn) -> list[str]:
        """The context pieces to rate for ``turn``: the extractor's, else the configured ones, else the trace's."""
        if self.context_extractor is not None:
            try:
                pieces = self.context_extractor(turn.input, turn.output)
            except Exception as exc:  # the user's code: any error is this trace's failure, not the worker's
                raise InvalidInput(f"context_extractor raised {type(exc).__name__}: {exc}") from exc
            if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
                raise InvalidInput(f"context_extractor returned {type(pieces).__name__}, not a list of strings")
        elif self.context is not None:
            pieces = self.context
        else:
            pieces = turn.context_texts if self.use_trace_contexts else []
        return [p for p in pieces if p.strip()]

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        contexts = self.contexts_for(turn)
        if not contexts:
            raise Unscorable("the trace has no context to rate")
        question, response = turn.question, turn.output
        if not question.strip():
            raise Unscorable("the trace has no user message to rate the context against")
        if not response.strip():
            return run.empty_answer("The response is empty: it used none of the context it was given.")

        analysis = await run.ask("analyze", JudgeRequest(
            step=f"{self.name}.analyze", instructions=prompts.ANALYZE_SYSTEM,
            prompt=prompts.render_analyze(question=question, response=response, contexts=contexts),
            output_type=prompts.ContextAnalysis,
            inputs={"question": question, "response": response, "contexts": contexts},
            offline=baseline.context_relevance_step,
        ))
        evaluations = sorted(analysis.evaluations, key=lambda e: e.context_index)
        indices = [e.context_index for e in evaluations]
        if indices != list(range(len(contexts))):
            raise Unscorable(f"the judge rated context pieces {indices}, not each of 0..{len(contexts) - 1} once")
        levels = [e.relevance_level for e in evaluations]
        used = [e.used for e in evaluations]
        missing = analysis.missing_context
        p = self.penalties
        score = context_relevance_score(
            levels, used, len(missing), unused_high_relevance_context=p.unused_high_relevance_context,
            missing_context_per_item=p.missing_context_per_item,
            max_missing_context_penalty=p.max_missing_context_penalty, scale=self.scale,
        )
        run.details.set(contexts=len(contexts), levels=levels, used=used, missing_context=missing)

        summary = prompts.summarise(score=score, scale=self.scale, levels=levels, used=used, missing=len(missing))
        template = f"Context relevance {summary}."
        reason = await run.reason(self.reason_mode, template=template, request=lambda: JudgeRequest(
            step=f"{self.name}.reason", instructions=prompts.REASON_SYSTEM,
            prompt=prompts.render_reason(
                question=question, evaluations=[e.model_dump() for e in evaluations], missing=missing, score=score,
                scale=self.scale, summary=summary, unused_penalty=p.unused_high_relevance_context,
                missing_penalty=p.missing_context_per_item, max_missing_penalty=p.max_missing_context_penalty,
            ),
            output_type=Reason, inputs={"summary": summary, "score": score, "scale": self.scale},
        ))
        return run.scored(score, reason)
