"""Prompt Alignment (seed 004): intent, requirements, completeness and appropriateness, judged against the user's
prompt and, separately, against the system instructions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field
from vigil.worker.judge.fence import fence
from vigil.worker.scorers.prompts.common import data_message, fenced_json, nonce_for

__all__ = [
    "ANALYZE_SYSTEM_SYSTEM",
    "ANALYZE_USER_SYSTEM",
    "CRITERIA",
    "FUSED_SYSTEM",
    "NO_SYSTEM_NOTE",
    "REASON_SYSTEM",
    "Alignment",
    "Alignments",
    "Dimension",
    "RequirementCheck",
    "render_analyze_system",
    "render_analyze_user",
    "render_fused",
    "render_reason",
    "summarise",
]


class Dimension(BaseModel):
    score: float = Field(ge=0.0, le=1.0)
    reasoning: str


class RequirementCheck(BaseModel):
    requirement: str
    fulfilled: bool


class Alignment(BaseModel):
    primary_intent: str = Field(description="One sentence.")
    requirement_checks: list[RequirementCheck]
    intent: Dimension
    requirements: Dimension
    completeness: Dimension
    appropriateness: Dimension

    def dimensions(self) -> dict[str, float]:
        return {"intent": self.intent.score, "requirements": self.requirements.score,
                "completeness": self.completeness.score, "appropriateness": self.appropriateness.score}


class Alignments(BaseModel):
    """Both analyses from one call (``steps: fused``), each judged on its own criteria."""

    user: Alignment
    system: Alignment


# The seed's criteria, said once and shared by every step's system message.
CRITERIA = """You evaluate how well an AI agent's response aligns with what it was asked to do, on four \
dimensions scored from 0 (not at all) to 1 (fully), each justified briefly. An empty or evasive response scores \
low on every dimension."""

_USER_DIMENSIONS = """Alignment with the user's prompt:
- intent: does the response address the user's core request?
- requirements: is every explicit requirement of the user met? List each in requirement_checks.
- completeness: is it thorough enough for the user's needs?
- appropriateness: do its format and tone match what the user expects (a list when a list is asked for, code when \
code is)?"""

_SYSTEM_DIMENSIONS = """Compliance with the system instructions the agent was given (the user's prompt is context \
only; judge compliance with the system instructions, not satisfaction of the user):
- intent: does the response follow the system's behavioural guidelines?
- requirements: is every system constraint respected? List each in requirement_checks.
- completeness: does it comply with all of the system's rules, not just some?
- appropriateness: do its format and tone match the system's specification?"""

ANALYZE_USER_SYSTEM = f"{CRITERIA}\n\n{_USER_DIMENSIONS}"
ANALYZE_SYSTEM_SYSTEM = f"{CRITERIA}\n\n{_SYSTEM_DIMENSIONS}"
FUSED_SYSTEM = f"""{CRITERIA} Give two separate analyses.

user: {_USER_DIMENSIONS}

system: {_SYSTEM_DIMENSIONS}"""

NO_SYSTEM_NOTE = "The trace has no system instructions, so the score is the user alignment alone."

REASON_SYSTEM = f"""{CRITERIA}

Explain the given score in two or three sentences from the analyses: where the response meets the prompt and where \
it falls short. Do not change or argue with the score."""


def render_analyze_user(*, prompt: str, response: str) -> str:
    nonce = nonce_for(prompt, response)
    return data_message(nonce, fence(prompt, nonce=nonce, label="user_prompt"),
                        fence(response, nonce=nonce, label="response"))


def render_analyze_system(*, system: str, prompt: str, response: str) -> str:
    nonce = nonce_for(system, prompt, response)
    return data_message(nonce, fence(system, nonce=nonce, label="system_instructions"),
                        fence(prompt, nonce=nonce, label="user_prompt"), fence(response, nonce=nonce, \
label="response"))


render_fused = render_analyze_system  # the same three pieces of data, both analyses asked for at once


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
    return data_message(nonce, fenced_json(dict(analyses), nonce=nonce, label="analyses"),
                        f"The score, on a scale of 0 to {scale:g}: {summary}.")
