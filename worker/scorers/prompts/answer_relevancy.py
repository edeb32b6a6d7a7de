"""Answer Relevancy (seeds 000, 001): split the output into statements, judge each against the question, explain."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from worker.judge.fence import fence
from worker.scorers.prompts.common import DATA_STANCE, data_header, fenced_json, nonce_for

__all__ = [
    "ANALYZE_PROMPT",
    "EXTRACT_PROMPT",
    "INSTRUCTIONS",
    "REASON_PROMPT",
    "Statements",
    "Verdict",
    "Verdicts",
    "render_analyze",
    "render_extract",
    "render_reason",
    "summarise",
]


class Statements(BaseModel):
    statements: list[str] = Field(min_length=1,
                                  description="The output's statements, in order, each self-contained.")


class Verdict(BaseModel):
    result: Literal["yes", "unsure", "no"]
    reason: str = Field(description="Why this statement is or is not relevant to the question.")


class Verdicts(BaseModel):
    results: list[Verdict] = Field(description="One verdict per statement, in the order of the statements.")


INSTRUCTIONS = f"""You are a balanced, careful answer relevancy evaluator. You judge whether an AI output addresses \
what the question asks. You judge relevance only, not factual correctness; you consider completeness and the \
level of detail.

{DATA_STANCE}"""

EXTRACT_PROMPT = """{header}

Break the output below into meaningful statements, keeping the context each needs to be understood on its own. \
Keep the output's order and wording. Short fragments, greetings and single words count as statements too. \
Statements are quoted from the output; do not judge them yet.

Example: the output "Shoes. They can be returned free within 30 days. Thanks for asking!" gives the statements \
"Shoes.", "Shoes can be returned free within 30 days.", "Thanks for asking!".

{output}"""

ANALYZE_PROMPT = """{header}

For each statement (a JSON array, in order) decide whether it is relevant to the question:
- "yes": the statement directly addresses what the question asks (full weight).
- "unsure": the statement is related or partially addresses it, an approximate match (partial weight).
- "no": the statement is unrelated to the question, or is an error message or empty (no weight).
Give exactly {count} verdicts, one per statement, in the same order, each with a one-sentence reason.

{question}

{statements}"""

REASON_PROMPT = """{header}

An answer relevancy score of {score} on a scale of 0 to {scale} was computed as \
((yes + {uncertainty_weight} × unsure) / statements) × scale from the verdicts below: {summary}.
Explain the score in two or three sentences: what in the output addresses the question and what does not. \
Do not change or argue with the score.

{question}

{verdicts}"""


def render_extract(*, output: str) -> str:
    nonce = nonce_for(output)
    return EXTRACT_PROMPT.format(header=data_header(nonce), output=fence(output, nonce=nonce, label="output"))


def render_analyze(*, question: str, statements: Sequence[str]) -> str:
    nonce = nonce_for(question, *statements)
    return ANALYZE_PROMPT.format(
        header=data_header(nonce),
        count=len(statements),
        question=fence(question, nonce=nonce, label="question"),
        statements=fenced_json(list(statements), nonce=nonce, label="statements"),
    )


def summarise(*, score: float, scale: float, yes: int, unsure: int, no: int) -> str:
    """The verdict counts in a sentence: the template reason, and the reason prompt's summary."""
    total = yes + unsure + no
    return (f"score {score:.3g} of {scale:g}: of {total} statements, {yes} address the question directly, "
            f"{unsure} partly and {no} not at all")


def render_reason(
    *, question: str, verdicts: Sequence[dict[str, Any]], score: float, scale: float, uncertainty_weight: float,
    summary: str,
) -> str:
    nonce = nonce_for(question, json.dumps(list(verdicts), ensure_ascii=False))
    return REASON_PROMPT.format(
        header=data_header(nonce),
        score=f"{score:.3g}",
        scale=f"{scale:g}",
        uncertainty_weight=f"{uncertainty_weight:g}",
        summary=summary,
        question=fence(question, nonce=nonce, label="question"),
        verdicts=fenced_json(list(verdicts), nonce=nonce, label="verdicts"),
    )
