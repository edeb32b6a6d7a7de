"""The offline baseline judge: deterministic word-overlap heuristics, labelled as a baseline wherever it appears."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from schemas import JudgeConfig, ScoreStatus
from tests.scoring_support import make_turn
from worker.judge import BaselineJudge, LLMJudge, build_judge
from worker.judge.base import JudgeFailed, JudgeRequest
from worker.judge.baseline import MODEL, content_words, recall_rubric, register, sentences, word_recall
from worker.scorers.answer_relevancy import AnswerRelevancy
from worker.scorers.context_relevance import ContextRelevance
from worker.scorers.prompt_alignment import PromptAlignment

BASELINE = BaselineJudge(JudgeConfig(name="offline", kind="baseline"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("One. Two! Three?", ["One.", "Two!", "Three?"], id="english-punctuation"),
        pytest.param("v1.2 is out. Done", ["v1.2 is out.", "Done"], id="dots-inside-words-do-not-split"),
        pytest.param("光電効果です。相対性理論も。", ["光電効果です。", "相対性理論も。"], id="japanese-without-spaces"),
        pytest.param("- first point\n- second point\n\n", ["- first point", "- second point"], id="lines"),
        pytest.param("   ", [], id="blank"),
    ],
)
def test_sentences_split_at_sentence_ends_and_line_breaks(text, expected):
    assert sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("What are the benefits of Exercise?", {"benefit", "exercise"}, id="stopwords-and-plurals"),
        pytest.param("glass", {"glass"}, id="double-s-is-not-a-plural"),
        pytest.param("光電効果", {"光電", "電効", "効果"}, id="cjk-bigrams"),
        pytest.param("a I x_y", set(), id="single-letters-dropped"),
    ],
)
def test_content_words_keep_what_carries_meaning(text, expected):
    assert content_words(text) == expected


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        pytest.param("UNION removes duplicates; UNION ALL keeps them.", 5, id="everything-recalled"),
        pytest.param("UNION keeps them.", 3, id="half-recalled"),
        pytest.param("The weather is fine.", 1, id="nothing-recalled"),
        pytest.param("I'm not sure, sorry.", 0, id="not-sure-is-0"),
        pytest.param("", 0, id="empty-is-0"),
    ],
)
def test_the_rubric_maps_word_recall_against_the_reference_onto_0_to_5(response, expected):
    reference = "UNION removes duplicates, UNION ALL keeps them."
    assert recall_rubric(response, reference) == expected


def test_word_recall_is_the_share_of_the_references_content_words():
    assert word_recall("heart and lungs", "heart, lungs, muscles and bones") == pytest.approx(2 / 4)


async def test_answer_relevancy_by_overlap_with_the_question_labelled_baseline():
    result = await AnswerRelevancy().score(make_turn(), BASELINE)

    assert result.status is ScoreStatus.SCORED
    assert result.step("preprocess").result == {
        "statements": ["Exercise strengthens the heart.", "It improves mood.", "Paris is in France."]}
    assert [v["result"] for v in result.step("analyze").result["results"]] == ["yes", "no", "no"]
    assert result.score == pytest.approx(1 / 3)
    assert result.judge_model == MODEL and "baseline" in MODEL
    assert {c.model for c in result.calls} == {MODEL} and result.usage.prompt_tokens == 0
    assert result.reason.startswith("Baseline judge (word overlap, no LLM): score 0.333 of 1")


async def test_the_baseline_is_deterministic():
    turn = make_turn(contexts=[{"text": "Regular exercise strengthens the heart."}])
    first = [await s.score(turn, BASELINE) for s in (AnswerRelevancy(), ContextRelevance(), PromptAlignment())]
    again = [await s.score(turn, BASELINE) for s in (AnswerRelevancy(), ContextRelevance(), PromptAlignment())]

    assert [(r.score, r.reason, r.steps) for r in first] == [(r.score, r.reason, r.steps) for r in again]


async def test_context_relevance_levels_come_from_overlap_with_the_question():
    turn = make_turn(
        input=[{"role": "user", "content": "Why did Einstein win the Nobel Prize?"}],
        output="Einstein won the Nobel Prize for the photoelectric effect.",
        contexts=[{"text": "Einstein won the Nobel Prize for the photoelectric effect."},
                  {"text": "Einstein was born in Ulm."}, {"text": "Bananas are yellow."}],
    )

    result = await ContextRelevance().score(turn, BASELINE)

    evaluations = result.step("analyze").result["evaluations"]
    assert [e["relevance_level"] for e in evaluations] == ["high", "medium", "none"]
    assert [e["used"] for e in evaluations] == [True, False, False]
    assert result.step("analyze").result["missing_context"] == ["information about win"]  # "won" is another word
    assert result.score == pytest.approx((1.0 + 0.7 + 0.0) / 3 - 0.15)


async def test_prompt_alignment_judges_user_and_system_sides():
    turn = make_turn(system="Mention the heart.", output="Exercise strengthens the heart and improves mood.")

    result = await PromptAlignment(reason_mode="template").score(turn, BASELINE)

    assert result.status is ScoreStatus.SCORED
    assert [s.name for s in result.steps] == ["analyze_user", "analyze_system", "reason"]
    assert 0 < result.score <= 1


class Echo(BaseModel):
    text: str


async def test_a_scorer_module_can_register_its_own_step():
    register("test_baseline.echo", lambda inputs: {"text": inputs["text"].upper()})

    reply = await BASELINE.ask(JudgeRequest(step="test_baseline.echo", instructions="", prompt="",
                                            output_type=Echo, inputs={"text": "hi"}))

    assert reply.output == Echo(text="HI")
    assert reply.calls[0].step == "test_baseline.echo"


async def test_an_unknown_step_fails_rather_than_guessing():
    with pytest.raises(JudgeFailed) as failed:
        await BASELINE.ask(JudgeRequest(step="nobody.knows", instructions="", prompt="", output_type=Echo))

    assert failed.value.error_type == "baseline_unsupported"


def test_build_judge_picks_the_backend_by_kind():
    assert isinstance(build_judge(JudgeConfig(name="b", kind="baseline")), BaselineJudge)
    assert isinstance(build_judge(JudgeConfig(name="l", base_url="http://127.0.0.1:9/v1", model="m")), LLMJudge)
