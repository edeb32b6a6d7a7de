"""Prompt Alignment against the scripted judge server, through the real ``openai`` client."""

from __future__ import annotations

import re

import pytest
from vigil.schemas import ScoreStatus
from vigil.worker.judge.base import JudgePaused
from vigil.worker.scorers.prompt_alignment import PromptAlignment
from vigil.worker.scorers.prompts.prompt_alignment import NO_SYSTEM_NOTE

from tests.judge_server import Reply
from tests.scoring_support import judge_factory, llm_judge, make_turn  # noqa: F401 (fixtures)

SYSTEM = "You are a coding assistant. Always include a docstring. Never use recursion."
TURN = make_turn(
    system=SYSTEM,
    input=[{"role": "user", "content": "Write a Python function computing factorial, with error handling."}],
    output=("def factorial(n):\n    if n < 0:\n        raise ValueError('negative')\n"
            "    return 1 if n == 0 else n * factorial(n - 1)"),
)


def alignment(intent, requirements, completeness, appropriateness):
    dim = lambda score: {"score": score, "reasoning": "r"}  # noqa: E731
    return {"primary_intent": "a factorial function", "requirement_checks": [{"requirement": "x", "fulfilled": True}],
            "intent": dim(intent), "requirements": dim(requirements), "completeness": dim(completeness),
            "appropriateness": dim(appropriateness)}


USER = alignment(1.0, 0.5, 1.0, 0.0)  # 0.4 + 0.15 + 0.2 + 0 = 0.75
SYSTEM_SIDE = alignment(0.8, 0.6, 1.0, 1.0)  # 0.28 + 0.21 + 0.15 + 0.15 = 0.79


async def test_both_mode_weighs_user_alignment_and_separately_judged_system_compliance(judge_server, llm_judge):
    judge_server.replies.extend([
        Reply.json(USER, prompt_tokens=350, completion_tokens=150),
        Reply.json(SYSTEM_SIDE, prompt_tokens=400, completion_tokens=150),
        Reply.json({"reason": "Meets the request; breaks the no-recursion rule."}, prompt_tokens=500,
                   completion_tokens=40),
    ])

    result = await PromptAlignment().score(TURN, llm_judge)

    assert result.status is ScoreStatus.SCORED
    assert result.score == pytest.approx(0.7 * 0.75 + 0.3 * 0.79)
    assert [s.name for s in result.steps] == ["analyze_user", "analyze_system", "reason"]
    assert result.details["user"] == {"intent": 1.0, "requirements": 0.5, "completeness": 1.0, "appropriateness": 0.0}
    assert result.details["system"]["requirements"] == 0.6
    assert result.reason == "Meets the request; breaks the no-recursion rule."
    assert (result.usage.calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (3, 1250, 340)


async def test_both_mode_does_not_copy_the_user_score_into_the_system_score(judge_server, llm_judge):
    judge_server.replies.extend([Reply.json(alignment(1, 1, 1, 1)), Reply.json(alignment(0, 0, 0, 0))])

    result = await PromptAlignment(reason_mode="none").score(TURN, llm_judge)

    assert result.score == pytest.approx(0.7)


async def test_the_system_analysis_fences_the_system_instructions_prompt_and_response(judge_server, llm_judge):
    judge_server.replies.extend([Reply.json(USER), Reply.json(SYSTEM_SIDE)])

    result = await PromptAlignment(reason_mode="none").score(TURN, llm_judge)

    prompt = result.step("analyze_system").prompt
    nonce = re.search(r"<<<DATA_([0-9a-f]{16}) system_instructions>>>", prompt).group(1)
    assert f"<<<DATA_{nonce} system_instructions>>>\n{SYSTEM}\n<<<END_DATA_{nonce}>>>" in prompt
    assert f"<<<DATA_{nonce} user_prompt>>>\n{TURN.question}\n<<<END_DATA_{nonce}>>>" in prompt
    assert f"<<<DATA_{nonce} response>>>\n{TURN.output}\n<<<END_DATA_{nonce}>>>" in prompt
    assert "judge compliance with the system instructions" in judge_server.requests[1].body["messages"][0]["content"]
    assert SYSTEM not in result.step("analyze_user").prompt


async def test_both_mode_without_system_instructions_is_scored_as_user_and_says_so(judge_server, llm_judge):
    judge_server.replies.extend([Reply.json(USER), Reply.json({"reason": "Good, but no bullet points."})])

    result = await PromptAlignment().score(TURN.model_copy(update={"system": None}), llm_judge)

    assert result.score == pytest.approx(0.75)
    assert result.usage.calls == 2
    assert result.reason == f"Good, but no bullet points. {NO_SYSTEM_NOTE}"
    assert result.details["system"] is None


async def test_system_messages_in_the_input_count_as_system_instructions(judge_server, llm_judge):
    judge_server.replies.extend([Reply.json(USER), Reply.json(SYSTEM_SIDE)])
    turn = make_turn(output=TURN.output, input=[{"role": "system", "content": "Answer in French."},
                                                *[m.model_dump() for m in TURN.input]])

    result = await PromptAlignment(reason_mode="none").score(turn, llm_judge)

    assert "Answer in French." in result.step("analyze_system").prompt
    assert result.score == pytest.approx(0.7 * 0.75 + 0.3 * 0.79)


@pytest.mark.parametrize(
    ("mode", "reply", "expected"),
    [pytest.param("user", USER, 0.75 * 10, id="user-weights"), pytest.param("system", SYSTEM_SIDE, 0.79 * 10,
                                                                            id="system-weights")],
)
async def test_single_modes_make_one_analysis_with_their_weights(judge_server, llm_judge, mode, reply, expected):
    judge_server.replies.append(Reply.json(reply))

    result = await PromptAlignment(evaluation_mode=mode, scale=10, reason_mode="none").score(TURN, llm_judge)

    assert result.score == pytest.approx(expected) and result.scale == 10
    assert [s.name for s in result.steps] == [f"analyze_{mode}"]


async def test_system_mode_without_system_instructions_is_unscored_without_a_call(judge_server, llm_judge):
    result = await PromptAlignment(evaluation_mode="system").score(TURN.model_copy(update={"system": None}), llm_judge)

    assert result.status is ScoreStatus.UNSCORED and "no system instructions" in result.reason
    assert judge_server.requests == []


async def test_a_missing_user_prompt_is_an_error_that_says_so(judge_server, llm_judge):
    turn = make_turn(input=[{"role": "system", "content": SYSTEM}])

    result = await PromptAlignment().score(turn, llm_judge)

    assert (result.status, result.error_type) == (ScoreStatus.FAILED, "invalid_input")
    assert "needs both the user's prompt and the agent's response" in result.reason
    assert judge_server.requests == []


async def test_an_empty_response_scores_zero_with_a_reason(judge_server, llm_judge):
    result = await PromptAlignment().score(TURN.model_copy(update={"output": ""}), llm_judge)

    assert (result.status, result.score) == (ScoreStatus.SCORED, 0.0)
    assert "empty" in result.reason
    assert judge_server.requests == []


async def test_a_dimension_score_outside_0_1_is_unscored_not_clamped(judge_server, llm_judge):
    judge_server.replies.extend([Reply.json(alignment(1.4, 1, 1, 1)), Reply.json(alignment(1.4, 1, 1, 1))])

    result = await PromptAlignment().score(TURN, llm_judge)

    assert result.status is ScoreStatus.UNSCORED and result.score is None
    assert "intent.score" in result.reason


async def test_garbage_is_unscored_and_500s_fail(judge_server, judge_factory):
    judge_server.replies.extend([Reply(content="aligned!"), Reply(content="very aligned!")])
    garbage = await PromptAlignment().score(TURN, judge_factory())
    judge_server.script = lambda body: Reply.error(500, "down")
    down = await PromptAlignment().score(TURN, judge_factory())

    assert (garbage.status, garbage.details["raw_reply"]) == (ScoreStatus.UNSCORED, "very aligned!")
    assert (down.status, down.error_type) == (ScoreStatus.FAILED, "http_500")


async def test_a_paused_judge_propagates(judge_server, llm_judge):
    judge_server.replies.append(Reply.error(404, "no such model"))

    with pytest.raises(JudgePaused):
        await PromptAlignment().score(TURN, llm_judge)


async def test_template_reason_gives_the_dimensions(judge_server, llm_judge):
    judge_server.replies.append(Reply.json(USER))

    result = await PromptAlignment(reason_mode="template").score(TURN.model_copy(update={"system": None}), llm_judge)

    assert result.reason == ("Prompt alignment score 0.75 of 1 in both mode; user alignment intent 1, requirements "
                             f"0.5, completeness 1, appropriateness 0. {NO_SYSTEM_NOTE}")
