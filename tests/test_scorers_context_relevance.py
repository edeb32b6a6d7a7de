"""Context Relevance against the scripted judge server, through the real ``openai`` client."""

from __future__ import annotations

import re

import pytest
from vigil.schemas import ScoreStatus
from vigil.worker.judge.base import JudgePaused
from vigil.worker.scorers.context_relevance import ContextRelevance

from tests.judge_server import Reply
from tests.scoring_support import judge_factory, llm_judge, make_turn  # noqa: F401 (fixtures)

EINSTEIN = make_turn(
    input=[{"role": "user", "content": "Why did Einstein win the Nobel Prize?"}],
    output="He won it for explaining the photoelectric effect.",
    contexts=[{"text": "Einstein won the Nobel Prize for his work on the photoelectric effect."},
              {"text": "He developed the theory of relativity."},
              {"text": "Bananas are rich in potassium."}],
)


def einstein_contexts(input, output):
    """A context extractor, importable as ``tests.test_scorers_context_relevance:einstein_contexts``."""
    return ["Einstein won the Nobel Prize for the photoelectric effect.", "He was born in Ulm."]


def analysis(levels, used, missing=()):
    return {
        "evaluations": [{"context_index": i, "relevance_level": level, "used": u, "reasoning": "r"}
                        for i, (level, u) in enumerate(zip(levels, used, strict=True))],
        "missing_context": list(missing),
        "overall_assessment": "ok",
    }


async def test_scripted_evaluations_give_the_seed_formula_score(judge_server, llm_judge):
    judge_server.replies.extend([
        Reply.json(analysis(["high", "medium", "none"], [True, False, False], ["the year of the prize"]),
                   prompt_tokens=420, completion_tokens=120),
        Reply.json({"reason": "The key context was used; one detail was missing."}, prompt_tokens=380,
                   completion_tokens=40),
    ])

    result = await ContextRelevance().score(EINSTEIN, llm_judge)

    assert result.status is ScoreStatus.SCORED
    assert result.score == pytest.approx((1.0 + 0.7 + 0.0) / 3 - 0.15)
    assert result.reason == "The key context was used; one detail was missing."
    assert [s.name for s in result.steps] == ["analyze", "reason"]
    assert result.details["missing_context"] == ["the year of the prize"]
    assert (result.usage.calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (2, 800, 160)


async def test_unused_high_relevance_context_costs_the_configured_penalty(judge_server, llm_judge):
    judge_server.replies.append(Reply.json(analysis(["high", "high", "low"], [True, False, True])))
    scorer = ContextRelevance(penalties={"unused_high_relevance_context": 0.2}, scale=2, reason_mode="none")

    result = await scorer.score(EINSTEIN, llm_judge)

    assert result.score == pytest.approx(((1.0 + 1.0 + 0.3) / 3 - 0.2) * 2)


async def test_the_rendered_prompt_fences_question_response_and_each_context(judge_server, llm_judge):
    judge_server.replies.append(Reply.json(analysis(["high", "low", "none"], [True, False, False])))

    result = await ContextRelevance(reason_mode="none").score(EINSTEIN, llm_judge)

    prompt = result.step("analyze").prompt
    nonce = re.search(r"<<<DATA_([0-9a-f]{16}) question>>>", prompt).group(1)
    for label, text in [("question", "Why did Einstein win the Nobel Prize?"),
                        ("response", "He won it for explaining the photoelectric effect."),
                        ("context[2]", "Bananas are rich in potassium.")]:
        assert f"<<<DATA_{nonce} {label}>>>\n{text}\n<<<END_DATA_{nonce}>>>" in prompt
    assert "Give exactly 3 evaluations, context[0] to context[2]." in prompt
    assert "Rate each context piece" in judge_server.requests[0].body["messages"][0]["content"]


async def test_the_extractor_wins_over_static_context_and_the_traces_own(judge_server, llm_judge):
    judge_server.replies.append(Reply.json(analysis(["high", "none"], [True, False])))
    scorer = ContextRelevance(context=["static"], reason_mode="none",
                              context_extractor="tests.test_scorers_context_relevance:einstein_contexts")

    result = await scorer.score(EINSTEIN, llm_judge)

    assert "He was born in Ulm." in result.step("analyze").prompt
    assert "static" not in result.step("analyze").prompt and "Bananas" not in result.step("analyze").prompt
    assert result.score == pytest.approx(0.5)


async def test_static_context_replaces_the_traces_own(judge_server, llm_judge):
    judge_server.replies.append(Reply.json(analysis(["medium"], [True])))

    result = await ContextRelevance(context=["Nobel prizes are awarded in Stockholm."],
                                    reason_mode="none").score(EINSTEIN, llm_judge)

    assert "Stockholm" in result.step("analyze").prompt and "Bananas" not in result.step("analyze").prompt
    assert result.score == pytest.approx(0.7)


async def test_a_trace_without_context_is_unscored_without_calling_the_judge(judge_server, llm_judge):
    result = await ContextRelevance().score(make_turn(contexts=[]), llm_judge)

    assert result.status is ScoreStatus.UNSCORED and result.reason == "the trace has no context to rate"
    assert judge_server.requests == []


async def test_evaluations_that_skip_a_context_piece_are_unscored(judge_server, llm_judge):
    partial = analysis(["high", "low"], [True, False])
    judge_server.replies.append(Reply.json(partial))

    result = await ContextRelevance().score(EINSTEIN, llm_judge)

    assert result.status is ScoreStatus.UNSCORED
    assert result.reason == "the judge rated context pieces [0, 1], not each of 0..2 once"


async def test_a_relevance_level_outside_the_set_is_unscored(judge_server, llm_judge):
    bad = analysis(["high", "low", "none"], [True, False, False])
    bad["evaluations"][0]["relevance_level"] = "critical"
    judge_server.replies.extend([Reply.json(bad), Reply.json(bad)])

    result = await ContextRelevance().score(EINSTEIN, llm_judge)

    assert result.status is ScoreStatus.UNSCORED and result.score is None
    assert "relevance_level" in result.reason


async def test_garbage_from_the_judge_is_unscored_with_the_raw_reply_kept(judge_server, llm_judge):
    judge_server.replies.extend([Reply(content="Relevant, I think."), Reply(content="Very relevant.")])

    result = await ContextRelevance().score(EINSTEIN, llm_judge)

    assert result.status is ScoreStatus.UNSCORED
    assert result.details["raw_reply"] == "Very relevant."


async def test_a_judge_that_keeps_answering_500_fails_the_score(judge_server, llm_judge):
    judge_server.script = lambda body: Reply.error(500, "overloaded")

    result = await ContextRelevance().score(EINSTEIN, llm_judge)

    assert (result.status, result.error_type) == (ScoreStatus.FAILED, "http_500")


async def test_a_paused_judge_propagates(judge_server, llm_judge):
    judge_server.replies.append(Reply.error(402, "payment required"))

    with pytest.raises(JudgePaused):
        await ContextRelevance().score(EINSTEIN, llm_judge)


async def test_an_extractor_that_raises_fails_the_score_as_invalid_input(judge_server, llm_judge):
    def broken(input, output):
        raise KeyError("documents")

    result = await ContextRelevance(context_extractor=broken).score(EINSTEIN, llm_judge)

    assert (result.status, result.error_type) == (ScoreStatus.FAILED, "invalid_input")
    assert "KeyError" in result.reason


async def test_template_reason_counts_the_levels(judge_server, llm_judge):
    judge_server.replies.append(Reply.json(analysis(["high", "medium", "none"], [False, True, False], ["a", "b"])))

    result = await ContextRelevance(reason_mode="template").score(EINSTEIN, llm_judge)

    assert result.reason == ("Context relevance score 0.167 of 1: 3 context pieces rated 1 high, 1 medium, 1 none; "
                             "1 highly relevant piece(s) unused; 2 missing item(s).")


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"use_trace_contexts": False}, id="no-source-at-all"),
        pytest.param({"context_extractor": "tests.nowhere:nothing"}, id="extractor-not-importable"),
        pytest.param({"context_extractor": "no_colon"}, id="extractor-path-malformed"),
        pytest.param({"penalties": {"unused": 0.1}}, id="unknown-penalty"),
    ],
)
def test_a_scorer_without_a_usable_context_source_is_refused_at_construction(config):
    with pytest.raises(ValueError):
        ContextRelevance(**config)
