"""Judges: an LLM behind any OpenAI-compatible endpoint, or the offline baseline. ``build_judge`` picks by kind.

``LLMJudge`` is imported when first named (or built): its client loads openai, ~0.7 s of CPU, which a process that
calls no LLM judge (most CLI commands, a worker on the offline judge, one that only reads ``judge.pause``) never
needs.
"""

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
    from vigil.worker.judge.client import LLMJudge

    return LLMJudge(config)


def __getattr__(name: str) -> object:
    if name == "LLMJudge":
        from vigil.worker.judge.client import LLMJudge

        return LLMJudge
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
