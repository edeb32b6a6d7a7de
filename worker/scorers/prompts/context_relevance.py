"""Context Relevance (seed 003): rate each context piece's relevance, whether the response used it, what was missing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from worker.judge.fence import fence
from worker.scorers.prompts.common import DATA_STANCE, data_header, fenced_json, nonce_for

__all__ = [
    "ANALYZE_PROMPT",
    "INSTRUCTIONS",
    "REASON_PROMPT",
    "ContextAnalysis",
    "ContextEvaluation",
    "render_analyze",
    "render_reason",
    "summarise",
]


class ContextEvaluation(BaseModel):
    context_index: int = Field(description="The index of the context piece, as in its marker: context[i].")
    relevance_level: Literal["high", "medium", "low", "none"]
    used: bool = Field(description="Whether the response draws on this context piece.")
    reasoning: str


class ContextAnalysis(BaseModel):
    evaluations: list[ContextEvaluation] = Field(description="One evaluation per context piece, in index order.")
    missing_context: list[str] = Field(
        description="Information the question needs that no context piece provides; empty when nothing is missing."
    )
    overall_assessment: str


INSTRUCTIONS = f"""You are a careful evaluator of the context given to an AI agent. You judge how relevant and \
useful each piece of context was for answering the question, whether the agent's response actually used it, and \
what information the question needed that the context did not provide.

{DATA_STANCE}"""

ANALYZE_PROMPT = """{header}

Rate each of the {count} context pieces below (context[0] to context[{last}]) for the question:
- "high": directly addresses the question.
- "medium": supporting information that helps answer it.
- "low": indirectly or tangentially related.
- "none": unrelated to the question.
For each piece say whether the response used it (its information appears in or shaped the response). Then list \
the pieces of information the question needed that none of the context provides (an empty list if none are \
missing). Give exactly one evaluation per context piece, in index order.

{question}

{response}

{contexts}"""

REASON_PROMPT = """{header}

A context relevance score of {score} on a scale of 0 to {scale} was computed from the evaluations below: {summary}.
The score is the mean relevance weight (high 1.0, medium 0.7, low 0.3, none 0.0), minus {unused_penalty:g} per \
highly relevant piece the response did not use, minus {missing_penalty:g} per missing item (at most \
{max_missing_penalty:g} in all), times the scale.
Explain the score in two or three sentences. Do not change or argue with the score.

{question}

{evaluations}"""


def render_analyze(*, question: str, response: str, contexts: Sequence[str]) -> str:
    nonce = nonce_for(question, response, *contexts)
    return ANALYZE_PROMPT.format(
        header=data_header(nonce),
        count=len(contexts),
        last=len(contexts) - 1,
        question=fence(question, nonce=nonce, label="question"),
        response=fence(response, nonce=nonce, label="response"),
        contexts="\n\n".join(fence(text, nonce=nonce, label=f"context[{i}]") for i, text in enumerate(contexts)),
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
    return REASON_PROMPT.format(
        header=data_header(nonce),
        score=f"{score:.3g}",
        scale=f"{scale:g}",
        summary=summary,
        unused_penalty=unused_penalty,
        missing_penalty=missing_penalty,
        max_missing_penalty=max_missing_penalty,
        question=fence(question, nonce=nonce, label="question"),
        evaluations=fenced_json(judged, nonce=nonce, label="evaluations"),
    )
