"""Prompt Alignment (seed 004): intent, requirements, completeness and appropriateness, judged against the user's
prompt and, separately, against the system instructions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from worker.judge.fence import fence
from worker.scorers.prompts.common import DATA_STANCE, data_header, fenced_json, nonce_for

__all__ = [
    "ANALYZE_SYSTEM_PROMPT",
    "ANALYZE_USER_PROMPT",
    "INSTRUCTIONS",
    "NO_SYSTEM_NOTE",
    "REASON_PROMPT",
    "Alignment",
    "Dimension",
    "RequirementCheck",
    "render_analyze_system",
    "render_analyze_user",
    "render_reason",
    "summarise",
]


class Dimension(BaseModel):
    score: float = Field(ge=0.0, le=1.0, description="From 0 (not at all) to 1 (fully).")
    reasoning: str


class RequirementCheck(BaseModel):
    requirement: str
    fulfilled: bool


class Alignment(BaseModel):
    primary_intent: str = Field(description="The core request or behaviour asked for, in one sentence.")
    requirement_checks: list[RequirementCheck] = Field(description="Each explicit requirement and whether it is met.")
    intent: Dimension
    requirements: Dimension
    completeness: Dimension
    appropriateness: Dimension

    def dimensions(self) -> dict[str, float]:
        return {"intent": self.intent.score, "requirements": self.requirements.score,
                "completeness": self.completeness.score, "appropriateness": self.appropriateness.score}


INSTRUCTIONS = f"""You are a strict, fair evaluator of how well an AI agent's response aligns with what it was \
asked to do. You score four dimensions from 0 to 1 and justify each briefly.

{DATA_STANCE}"""

ANALYZE_USER_PROMPT = """{header}

Evaluate how well the response aligns with the user's prompt:
- intent: does the response address the user's core request?
- requirements: is every explicit requirement of the user met? List each one in requirement_checks.
- completeness: is the response thorough enough for the user's needs?
- appropriateness: do its format and tone match what the user expects (a list when a list is asked for, code \
when code is asked for)?
An empty or evasive response scores low on every dimension.

{prompt}

{response}"""

ANALYZE_SYSTEM_PROMPT = """{header}

Evaluate how well the response complies with the system instructions the agent was given (the user's prompt is \
shown for context only; judge compliance with the system instructions, not satisfaction of the user):
- intent: does the response follow the system's behavioural guidelines?
- requirements: is every system constraint respected? List each one in requirement_checks.
- completeness: does the response comply with all of the system's rules, not just some?
- appropriateness: do its format and tone match the system's specification?

{system}

{prompt}

{response}"""

NO_SYSTEM_NOTE = "The trace has no system instructions, so the score is the user alignment alone."

REASON_PROMPT = """{header}

A prompt alignment score of {score} on a scale of 0 to {scale} was computed from the analyses below: {summary}.
Explain the score in two or three sentences: where the response meets the prompt and where it falls short. \
Do not change or argue with the score.

{analyses}"""


def render_analyze_user(*, prompt: str, response: str) -> str:
    nonce = nonce_for(prompt, response)
    return ANALYZE_USER_PROMPT.format(
        header=data_header(nonce),
        prompt=fence(prompt, nonce=nonce, label="user_prompt"),
        response=fence(response, nonce=nonce, label="response"),
    )


def render_analyze_system(*, system: str, prompt: str, response: str) -> str:
    nonce = nonce_for(system, prompt, response)
    return ANALYZE_SYSTEM_PROMPT.format(
        header=data_header(nonce),
        system=fence(system, nonce=nonce, label="system_instructions"),
        prompt=fence(prompt, nonce=nonce, label="user_prompt"),
        response=fence(response, nonce=nonce, label="response"),
    )


def _dims(values: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {value:.2g}" for name, value in values.items())


def summarise(
    *, score: float, scale: float, mode: str, user: Mapping[str, float] | None, system: Mapping[str, float] | None,
) -> str:
    """The analyses in a sentence: the template reason, and the reason prompt's summary."""
    parts = [f"score {score:.3g} of {scale:g} in {mode} mode"]
    if user is not None:
        parts.append(f"user alignment {_dims(user)}")
    if system is not None:
        parts.append(f"system compliance {_dims(system)}")
    return "; ".join(parts)


def render_reason(*, analyses: Mapping[str, Any], score: float, scale: float, summary: str) -> str:
    nonce = nonce_for(json.dumps(analyses, ensure_ascii=False))
    return REASON_PROMPT.format(
        header=data_header(nonce), score=f"{score:.3g}", scale=f"{scale:g}", summary=summary,
        analyses=fenced_json(dict(analyses), nonce=nonce, label="analyses"),
    )
