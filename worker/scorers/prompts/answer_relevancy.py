"""Answer Relevancy (seeds 000, 001): split the output into statements, judge each against the question, explain.

``steps: separate`` asks for the statements (``preprocess``) and then the verdicts (``analyze``), as the seeds do;
``steps: fused`` asks for both in one call (``judge``): the verdicts are the same per-statement judgements, the
statements just arrive with them. Each step's system message is static (``common``); the trace goes in the user
message.
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
    "EXTRACT_SYSTEM",
    "FUSED_SYSTEM",
    "REASON_SYSTEM",
    "JudgedStatement",
    "JudgedStatements",
    "Statements",
    "Verdict",
    "Verdicts",
    "render_analyze",
    "render_extract",
    "render_fused",
    "render_reason",
    "summarise",
]

Result = Literal["yes", "unsure", "no"]


class Statements(BaseModel):
    statements: list[str] = Field(min_length=1)


class Verdict(BaseModel):
    result: Result
    reason: str = Field(description="One sentence.")


class Verdicts(BaseModel):
    results: list[Verdict]


class JudgedStatement(BaseModel):
    statement: str
    result: Result
    reason: str = Field(description="One sentence.")


class JudgedStatements(BaseModel):
    statements: list[JudgedStatement] = Field(min_length=1)


# The seeds' criteria, said once and shared by every step's system message.
CRITERIA = """You evaluate answer relevancy: how well an AI output addresses the question. Judge relevance to \
the question only, not factual correctness; completeness and level of detail count."""

_SPLIT = """Break the output into meaningful statements, in order, keeping the context each needs to stand alone; \
short fragments and single words count too."""

_VERDICTS = """Give each statement a verdict and a one-sentence reason:
- yes: directly addresses what the question asks (full weight)
- unsure: related or partly addresses it, an approximate match (partial weight)
- no: unrelated to the question, an error message or empty (no weight)"""

EXTRACT_SYSTEM = f"{CRITERIA}\n\n{_SPLIT} Quote them; do not judge them yet."
ANALYZE_SYSTEM = f"{CRITERIA}\n\n{_VERDICTS}\nOne verdict per statement, in the statements' order."
FUSED_SYSTEM = f"{CRITERIA}\n\n{_SPLIT}\n{_VERDICTS}"
REASON_SYSTEM = f"""{CRITERIA}

Explain the given score in two or three sentences from the verdicts: what in the output addresses the question \
and what does not. Do not change or argue with the score."""


def render_extract(*, output: str) -> str:
    nonce = nonce_for(output)
    return data_message(nonce, fence(output, nonce=nonce, label="output"))


def render_fused(*, question: str, output: str) -> str:
    nonce = nonce_for(question, output)
    return data_message(nonce, fence(question, nonce=nonce, label="question"),
                        fence(output, nonce=nonce, label="output"))


def render_analyze(*, question: str, statements: Sequence[str]) -> str:
    nonce = nonce_for(question, *statements)
    return data_message(nonce, fence(question, nonce=nonce, label="question"),
                        fenced_json(list(statements), nonce=nonce, label="statements"),
                        f"Give exactly {len(statements)} verdicts.")


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
    return data_message(
        nonce, fence(question, nonce=nonce, label="question"),
        fenced_json(list(verdicts), nonce=nonce, label="verdicts"),
        f"The score, ((yes + {uncertainty_weight:g} × unsure) / statements) × {scale:g}: {summary}.",
    )
