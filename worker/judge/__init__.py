"""Judges: an LLM behind any OpenAI-compatible endpoint, or the offline baseline. ``build_judge`` picks by kind."""

from __future__ import annotations

from vigil.schemas import JudgeConfig
from vigil.worker.judge.base import (
    NO_JUDGE,
    CallContext,
    Judge,
    JudgeFailed,
    JudgePaused,
    JudgeReply,
    JudgeRequest,
)
from vigil.worker.judge.baseline import BaselineJudge
from vigil.worker.judge.client import LLMJudge

__all__ = [
    "NO_JUDGE",
    "BaselineJudge",
    "CallContext",
    "Judge",
    "JudgeFailed",
    "JudgePaused",
    "JudgeReply",
    "JudgeRequest",
    "LLMJudge",
    "build_judge",
]


def build_judge(config: JudgeConfig | None) -> Judge:
    """The judge a config describes: ``kind: openai`` an ``LLMJudge``, ``kind: baseline`` a ``BaselineJudge``;
    none (a monitor whose scorer calls no judge) ``NO_JUDGE``."""
    if config is None:
        return NO_JUDGE
    if config.kind == "baseline":
        return BaselineJudge(config)
    return LLMJudge(config)
