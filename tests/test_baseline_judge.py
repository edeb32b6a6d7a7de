"""The offline baseline judge: deterministic word-overlap heuristics, labelled as a baseline wherever it appears.

Every example here is written for these tests (none is a line of a published dataset)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from vigil.schemas import JudgeConfig, ScoreStatus
from vigil.worker.judge import BaselineJudge, LLMJudge, build_judge
from vigil.worker.judge.base import JudgeFailed, JudgeRequest
from vigil.worker.judge.baseline import (
    MODEL,
    content_words,
    contradicted,
    correctness,
    is_abstention,
    sentences,
    word_recall,
)
from vigil.worker.scorers.answer_relevancy import AnswerRelevancy
from vigil.worker.scorers.context_relevance import ContextRelevance
from vigil.worker.scorers.prompt_alignment import PromptAlignment
from vigil.worker.scorers.rag_correctness import RagCorrectness

from tests.scoring_support import make_turn

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
        pytest.param("5 legs, 12 eyes", {"5", "leg", "12", "eye"}, id="numbers-kept-whatever-their-length"),
    ],
)
def test_content_words_keep_what_carries_meaning(text, expected):
    assert content_words(text) == expected


@pytest.mark.parametrize(
    ("response", "bucket"),
    [
        pytest.param("UNION removes duplicates; UNION ALL keeps them.", 5, id="everything-recalled"),
        pytest.param("UNION keeps them.", 3, id="half-recalled"),
        pytest.param("The weather is fine.", 1, id="nothing-recalled"),
    ],
)
def test_the_rubric_result_is_word_recall_of_the_reference_inside_the_old_buckets(response, bucket):
    result, _ = correctness(response, "UNION removes duplicates, UNION ALL keeps them.")
    assert int(result) == bucket


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


async def test_a_request_brings_its_own_offline_heuristic_so_the_judge_knows_no_scorers_steps():
    reply = await BASELINE.ask(JudgeRequest(step="test_baseline.echo", instructions="", prompt="",
                                            output_type=Echo, inputs={"text": "hi"},
                                            offline=lambda inputs: {"text": inputs["text"].upper()}))

    assert reply.output == Echo(text="HI")
    assert reply.calls[0].step == "test_baseline.echo"


async def test_an_unknown_step_fails_rather_than_guessing():
    with pytest.raises(JudgeFailed) as failed:
        await BASELINE.ask(JudgeRequest(step="nobody.knows", instructions="", prompt="", output_type=Echo))

    assert failed.value.error_type == "baseline_unsupported"


def test_build_judge_picks_the_backend_by_kind():
    assert isinstance(build_judge(JudgeConfig(name="b", kind="baseline")), BaselineJudge)
    assert isinstance(build_judge(JudgeConfig(name="l", base_url="http://127.0.0.1:9/v1", model="m")), LLMJudge)


# --- abstention: only when the response essentially is one ---------------------------------------------------------

@pytest.mark.parametrize("response", ["I don't know.", "I'm not sure, sorry.",
                                      "Unfortunately I cannot answer that from the provided documents.",
                                      "I'm not sure when the museum opens."])
def test_a_response_that_only_says_it_is_not_sure_is_an_abstention(response):
    assert is_abstention(response, "When does the museum open?")
    assert correctness(response, "The museum opens at 9 am.", "When does the museum open?")[0] == 0


def test_an_answer_that_merely_contains_not_sure_is_an_answer():
    response = ("The bridge was finished in 1932 after eight years of work; historians are not sure how many "
                "workers it employed, but its steel arch still carries trains and cars across the harbour.")
    reference = "The bridge was finished in 1932 and carries trains and cars across the harbour."

    assert not is_abstention(response, "When was the bridge finished?")
    assert correctness(response, reference, "When was the bridge finished?")[0] >= 4


def test_an_empty_response_is_the_bottom_of_the_scale_not_an_abstention():
    assert correctness("", "The museum opens at 9 am.") == (1.0, "baseline heuristic: the response is empty")
    assert correctness("   \n", "The museum opens at 9 am.")[0] == 1.0


async def test_the_rag_scorer_records_an_abstention_and_scores_an_answer_quoting_not_sure():
    reference = "Owls hunt mostly at night using their hearing."
    quiet = make_turn(input=[{"role": "user", "content": "When do owls hunt?"}], output="I don't know, sorry.",
                      reference=reference)
    quoting = quiet.model_copy(update={"output": "Owls hunt mostly at night; I'm not sure about every species, "
                                                 "but their hearing guides them."})

    abstained = await RagCorrectness().score(quiet, BASELINE)
    answered = await RagCorrectness().score(quoting, BASELINE)

    assert (abstained.label, abstained.score) == ("abstained", None)
    assert answered.status is ScoreStatus.SCORED and answered.score > 0.6


# --- answer relevancy: restating or padding the question is not relevant --------------------------------------------

QUESTION = "What causes the seasons on Earth?"


async def _relevancy(output: str, question: str = QUESTION) -> float:
    turn = make_turn(input=[{"role": "user", "content": question}], output=output)
    return (await AnswerRelevancy(reason_mode="template").score(turn, BASELINE)).score


async def test_restating_the_question_is_not_relevant():
    assert await _relevancy("What causes the seasons on Earth? The causes of seasons on Earth.") == 0.0


async def test_padding_with_the_questions_words_loses_to_an_answer():
    padded = await _relevancy("Seasons, Earth, causes: Earth seasons causes seasons.")
    answer = await _relevancy("The tilt of Earth's axis causes the seasons as it orbits the sun.")

    assert padded == 0.0 and answer == 1.0


async def test_a_terse_answer_is_not_zero_relevant():
    assert await _relevancy("8", question="How many legs does a spider have?") > 0


# --- prompt alignment: echoing the prompt is not aligned ------------------------------------------------------------

async def _alignment(prompt: str, output: str) -> float:
    turn = make_turn(input=[{"role": "user", "content": prompt}], output=output)
    return (await PromptAlignment(evaluation_mode="user", reason_mode="none").score(turn, BASELINE)).score


async def test_echoing_the_prompt_is_not_aligned():
    prompt = "Write a short poem about autumn leaves falling in the park."
    echo = await _alignment(prompt, prompt)
    poem = await _alignment(prompt, "Red leaves drift and spin,\nautumn settles on the park,\nbenches wear gold coats.")

    assert echo == 0.0 and poem > 0.3


async def test_a_terse_correct_reply_is_not_zero_aligned():
    assert await _alignment("What is 7 times 6? Reply with the number only.", "42") > 0


# --- rag correctness: contradictions it can see cheaply lower it ----------------------------------------------------

@pytest.mark.parametrize(
    ("reference", "right", "wrong"),
    [
        pytest.param("Marie Curie discovered polonium in 1898.", "Marie Curie discovered polonium in 1898.",
                     "Marie Curie never discovered polonium.", id="negation"),
        pytest.param("The lighthouse is 48 metres tall.", "The lighthouse is 48 metres tall.",
                     "The lighthouse is 65 metres tall.", id="another-number"),
        pytest.param("The Danube flows into the Black Sea.", "The Danube flows into the Black Sea.",
                     "The Danube flows into the North Sea.", id="another-name"),
    ],
)
def test_a_visible_contradiction_lowers_correctness_by_at_least_a_bucket(reference, right, wrong):
    assert contradicted(wrong, reference) is not None and contradicted(right, reference) is None
    assert correctness(right, reference)[0] - correctness(wrong, reference)[0] >= 1


@pytest.mark.parametrize(
    ("reference", "response"),
    [
        pytest.param("Vitamin C is found in oranges and peppers.", "Vitamin C is not only found in oranges but "
                     "also in peppers.", id="not-only-is-no-negation"),
        pytest.param("Lyon is the third city of France [2].", "Lyon is the third city of France [7].",
                     id="source-markers-are-not-numbers"),
        pytest.param("The Danube flows into the Black Sea.", "The Danube flows into the Black Sea, a journey that "
                     "does not pass through Spain.", id="a-negation-far-from-the-key-words"),
    ],
)
def test_what_only_looks_like_a_contradiction_is_not_one(reference, response):
    assert contradicted(response, reference) is None


def test_a_contradicting_sentence_in_a_longer_answer_costs_only_its_own_credit():
    reference = "Bees make honey from nectar. They store it in wax combs."
    clean = "Bees make honey from nectar. They store it in wax combs."
    one_wrong = "Bees do not make honey from nectar. They store it in wax combs."

    assert correctness(clean, reference)[0] > correctness(one_wrong, reference)[0] > correctness(
        "They store it.", reference)[0]


# --- a continuous score: clearly different answers rarely tie -------------------------------------------------------

def test_answers_in_the_same_old_bucket_get_different_results_in_recall_order():
    reference = "Copper conducts heat and electricity well, resists corrosion, and is easy to shape into wire."
    more = correctness("Copper conducts heat, electricity and resists corrosion.", reference)[0]
    less = correctness("Copper conducts heat and electricity well.", reference)[0]

    assert int(more) == int(less) == 3 and more > less


def test_the_same_words_in_the_references_order_beat_them_scrambled():
    reference = "Heavy rain causes floods in river valleys."
    ordered = correctness("Heavy rain causes floods in river valleys.", reference)[0]
    scrambled = correctness("Valleys river floods causes rain heavy.", reference)[0]

    assert word_recall("Valleys river floods causes rain heavy.", reference) == 1.0
    assert ordered > scrambled


# --- terse correct answers are not 0 --------------------------------------------------------------------------------

def test_a_terse_correct_answer_keeps_most_of_its_credit():
    question = "What is the capital of Australia?"
    result, _ = correctness("Canberra.", "The capital of Australia is Canberra.", question)

    assert result > 3 and result > correctness("Sydney.", "The capital of Australia is Canberra.", question)[0]


# --- the first hour's examples (our own, none from the shared datasets) --------------------------------------------

@pytest.mark.parametrize(("question", "answer"), [
    pytest.param("How long is the refund window?", "You can request a refund within 30 days of delivery.",
                 id="how-long-and-a-duration"),
    pytest.param("When does the store open on Saturdays?", "Our doors open at nine in the morning.",
                 id="when-and-a-time"),
    pytest.param("Who wrote the novel Middlemarch?", "It was written by George Eliot.", id="who-and-a-name"),
    pytest.param("How many seats does the van have?", "Seven.", id="terse-how-many"),
])
async def test_a_correct_answer_sharing_few_words_with_the_question_is_relevant(question, answer):
    assert await _relevancy(answer, question=question) == 1.0


async def test_giving_a_number_is_no_answer_when_the_statement_is_about_something_else():
    assert await _relevancy("Mount Everest is 8848 metres tall.", question="How long is the refund window?") == 0.0


@pytest.mark.parametrize(("reference", "question", "right", "negated"), [
    pytest.param("The train to Lyon leaves from platform 4.", "Which platform does the Lyon train leave from?",
                 "Platform 4.", "The Lyon train does not leave from platform 4.", id="terse-right-full-negation"),
    pytest.param("Einstein received the Nobel Prize in 1921 for the photoelectric effect.",
                 "Did Einstein get a Nobel Prize?", "Einstein received the Nobel Prize in 1921.",
                 "Einstein did not receive the Nobel Prize.", id="another-form-of-the-verb"),
    pytest.param("Python 3.12 removed the distutils module.", "Was distutils removed in Python 3.12?",
                 "Yes, Python 3.12 removed distutils.", "Python 3.12 did not remove the distutils module.",
                 id="did-not"),
    pytest.param("Marie Curie won two Nobel Prizes.", "How many Nobel Prizes did Marie Curie win?", "She won two.",
                 "Marie Curie didn't win two Nobel Prizes.", id="contraction"),
])
def test_a_negated_answer_scores_as_mostly_incorrect_below_the_right_one(reference, question, right, negated):
    wrong, why = correctness(negated, reference, question)

    assert wrong <= 2.0 < correctness(right, reference, question)[0]
    assert "contradict" in why
