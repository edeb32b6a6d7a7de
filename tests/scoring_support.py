"""Shared by the judge and scorer tests: a turn factory and LLM judges on the scripted server.

Import the ``llm_judge`` / ``judge_factory`` fixtures into a test module to use them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from vigil.schemas import JudgeConfig, Turn
from vigil.worker.judge.client import LLMJudge

__all__ = ["judge_factory", "llm_judge", "make_turn"]


def make_turn(**fields: Any) -> Turn:
    base: dict[str, Any] = {
        "trace_id": "t-1",
        "agent": "support-bot",
        "input": [{"role": "user", "content": "What are the health benefits of regular exercise?"}],
        "output": "Exercise strengthens the heart. It improves mood. Paris is in France.",
    }
    return Turn.model_validate(base | fields)


@pytest.fixture
async def judge_factory(judge_server):
    """Makes LLM judges on the scripted server, each on its own model name unless given one (so no other test's
    remembered mode applies), giving up retrying quickly; their HTTP clients close with the test's event loop."""
    judges: list[LLMJudge] = []

    def make(model: str | None = None) -> LLMJudge:
        config = JudgeConfig(name="judge", base_url=judge_server.base_url,
                             model=model or f"judge-{uuid.uuid4().hex[:8]}", max_retry_age_s=0.2, timeout_s=10)
        judges.append(LLMJudge(config))
        return judges[-1]

    yield make
    for judge in judges:
        await judge.aclose()


@pytest.fixture
def llm_judge(judge_factory) -> LLMJudge:
    return judge_factory()
