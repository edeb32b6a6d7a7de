"""Context Relevance (seed 003): rate each context piece's relevance, whether the response used it, what was \
missing.

Each step's system message is static (``common``); the trace goes in the user message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field
from vigil.worker.judge.fence import fence
from vigil.worker.scorers.prompts.common import data_message, fenced_json, nonce_for

__all__ = [
    "ANALYZE_SYSTEM",
    "CRITERIA",
    "REASON_SYSTEM",
    "ContextAnalysis",
    "ContextEvaluation",
    "render_analyze",
    "render_reason",
    "summarise",
]


class ContextEvaluation(BaseModel):
    context_index: int = Field(description="i of context[i].")
    relevance_level: Literal["high", "medium", "low", "none"]
    used: bool
    reasoning: str


class ContextAnalysis(BaseModel):
    evaluations: list[ContextEvaluation]
    missing_context: list[str]
    overall_assessment: str


CRITERIA = """You evaluate the context given to an AI agent: how relevant and useful each context piece was for \
answering the question, whether the agent's response actually used it, and what information the question needed \
that the context did not provide."""

ANALYZE_SYSTEM = f"""{CRITERIA}

Rate each context piece for the question:
- high: directly addresses the question
- medium: supporting information that helps answer it
- low: indirectly or tangentially related
- none: unrelated to the question
Say whether the response used it (its information appears in or shaped the response). Then list the information \
the question needed that no context piece provides (empty if nothing is missing). One evaluation per piece, in \
index order."""

REASON_SYSTEM = f"""{CRITERIA}

Explain the given score in two or three sentences from the evaluations. Do not change or argue with the score."""


def render_analyze(*, question: str, response: str, contexts: Sequence[str]) -> str:
    nonce = nonce_for(question, response, *contexts)
    return data_message(
        nonce, fence(question, nonce=nonce, label="question"), fence(response, nonce=nonce, label="response"),
        *(fence(text, nonce=nonce, label=f"context[{i}]") for i, text in enumerate(contexts)),
        f"Give exactly {len(contexts)} evaluations, context[0] to context[{len(contexts) - 1}].",
    )


def summarise(*, score: float, scale: float, levels: Sequence[str], used: Sequence[bool], missing: int) -> str:
    """The evaluations in a sentence: the template reason, and the reason prompt's summary."""
    counts = ", ".join(f"{levels.count(level)} {level}" for level in ("high", "medium", "low", "none")
                       if levels.count(level))
    unused_high = sum(1 for level, u in zip(levels, used, strict=True) if level == "high" and not u)
    return (f"score {score:.3g} of {scale:g}: {len(levels)} context pieces rated {counts}; "
            f"{unused_high} highly relevant piece(s) unused; {missing} missing item(s)")


def render_reason(
    *, question: str, evaluations: Sequence[dict[str, Any]], missing: Sequence[str], score: float, scale: float,
    summary: str, unused_penalty: float, missing_penalty: float, max_missing_penalty: float,
) -> str:
    judged = {"evaluations": list(evaluations), "missing_context": list(missing)}
    nonce = nonce_for(question, json.dumps(judged, ensure_ascii=False))
    return data_message(
        nonce, fence(question, nonce=nonce, label="question"),
        fenced_json(judged, nonce=nonce, label="evaluations"),
        f"The score: mean relevance weight (high 1.0, medium 0.7, low 0.3, none 0.0), minus {unused_penalty:g} per "
        f"highly relevant piece unused, minus {missing_penalty:g} per missing item (at most \
{max_missing_penalty:g} "
        f"in all), times {scale:g}: {summary}.",
    )
