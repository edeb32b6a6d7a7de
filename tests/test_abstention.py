"""Abstention is its own outcome and an empty answer scores the bottom of the scale, in every scorer.

An abstention (the paper's rubric 0: "the response states it is not sure") is *scored* with the label `abstained`
and no score: counted apart (report, funnel, rollups), never averaged in. The examples here are new ones.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from vigil.schemas import ScoreStatus
from vigil.worker.report.build import build_report
from vigil.worker.scorers.answer_relevancy import AnswerRelevancy
from vigil.worker.scorers.context_relevance import ContextRelevance
from vigil.worker.scorers.multi_turn import MultiTurn
from vigil.worker.scorers.prompt_alignment import PromptAlignment
from vigil.worker.scorers.rag_correctness import RagCorrectness

from tests.judge_server import Reply
from tests.quality_seed import insert_scores, score_row
from tests.scoring_support import judge_factory, llm_judge, make_turn  # noqa: F401 (fixtures)

QUESTION = "How many moons does Mars have?"
REFERENCE = "Mars has two moons, Phobos and Deimos."
NOW = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)


def mars_turn(**fields):
    return make_turn(**({"input": [{"role": "user", "content": QUESTION}], "output": "Two: Phobos and Deimos.",
                         "reference": REFERENCE, "contexts": [{"text": "Phobos and Deimos orbit Mars."}]} | fields))


async def test_a_rag_verdict_of_zero_is_an_abstention_with_no_score(judge_server, llm_judge):
    judge_server.replies.append(Reply.json({"evaluation": "Feedback: it says it cannot tell. [RESULT] 0"}))

    result = await RagCorrectness(scale=5).score(mars_turn(output="I am not sure how many moons Mars has."),
                                                 llm_judge)

    assert (result.status, result.label, result.score) == (ScoreStatus.SCORED, "abstained", None)
    assert result.outcome == "abstained" and result.details["result"] == 0


@pytest.mark.parametrize("scorer", [AnswerRelevancy(), ContextRelevance(), PromptAlignment(), RagCorrectness()],
                         ids=lambda s: s.name)
async def test_an_empty_answer_scores_the_bottom_of_the_scale_without_asking_the_judge(judge_server, llm_judge,
                                                                                       scorer):
    result = await scorer.score(mars_turn(output="   "), llm_judge)

    assert (result.status, result.score) == (ScoreStatus.SCORED, 0.0)
    assert result.label == scorer.bands[-1][1]
    assert judge_server.requests == []


class _AlwaysNotSure:
    """The judge's three agents for a dialogue where every verdict is 0 and a query is always wanted."""

    def __call__(self, body):
        step = body["response_format"]["json_schema"]["name"]
        if step.endswith("evaluate"):
            return Reply.json({"evaluation": "Feedback: the answer says it does not know. [RESULT] 0"})
        if step.endswith("query"):
            return Reply.json({"query": "Could you check how many moons there are?", "explanation": "ask again"})
        return Reply.json({"answer": "I don't know.", "explanation": "nothing to compose"})


async def test_a_dialogue_whose_verdicts_are_all_zero_is_an_abstention_not_a_zero(judge_server, llm_judge):
    judge_server.script = _AlwaysNotSure()

    result = await MultiTurn(turns=3).evaluate(question=QUESTION, reference=REFERENCE,
                                               agent=lambda messages: "I don't know.", judge=llm_judge)

    assert result.details["sigma"] == [0, 0, 0]
    assert (result.status, result.label, result.score) == (ScoreStatus.SCORED, "abstained", None)


@pytest.mark.parametrize(("scorer", "score", "label"), [
    (AnswerRelevancy(), 1.0, "fully relevant"), (AnswerRelevancy(), 0.75, "mostly relevant"),
    (AnswerRelevancy(scale=10), 2.0, "minimally relevant"), (ContextRelevance(), 0.55, "mixed relevance"),
    (PromptAlignment(), 0.85, "very good alignment"), (PromptAlignment(), 0.3, "very poor alignment"),
    (RagCorrectness(), 0.6, "partially correct"), (MultiTurn(), 0.9, "largely correct"),
])
def test_every_scorer_labels_a_score_with_its_seeds_interpretation_band(scorer, score, label):
    assert scorer.label_for(score) == label


def test_abstentions_are_counted_apart_and_kept_out_of_the_mean_in_the_report_and_rollups(store):
    rows = [score_row(at=NOW, score=0.8, seq=1), score_row(at=NOW, score=0.4, seq=2),
            score_row(at=NOW, score=None, seq=3)]
    rows[2][12] = "abstained"  # the label column: a scored row whose agent said it is not sure
    insert_scores(store, rows)

    (summary,) = build_report(store, start=NOW.replace(hour=0), end=NOW.replace(hour=23)).monitors
    rolled = store.query("SELECT countIfMerge(scored), countIfMerge(abstained), avgIfMerge(mean) "
                         "FROM scores_1h").result_rows

    assert (summary.scored, summary.abstained, summary.abstention_rate) == (2, 1, pytest.approx(1 / 3))
    assert summary.mean_score == pytest.approx(0.6)
    assert rolled == [(2, 1, pytest.approx(0.6))]
