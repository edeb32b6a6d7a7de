"""The trimmed prompts: each still carries its seed's criteria and the fence rules, says its task once, keeps the
static part first (the system message is the same for every trace), and every kept mode's verdicts parse against
the scripted judge (``steps: fused`` giving the same verdicts as the seeds' separate steps)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from vigil.schemas import ContextDoc, ScoreStatus
from vigil.worker.judge.fence import DATA_RULES
from vigil.worker.scorers.answer_relevancy import AnswerRelevancy
from vigil.worker.scorers.context_relevance import ContextRelevance
from vigil.worker.scorers.multi_turn import MultiTurn
from vigil.worker.scorers.prompt_alignment import PromptAlignment
from vigil.worker.scorers.prompts import answer_relevancy as ar
from vigil.worker.scorers.prompts import context_relevance as cr
from vigil.worker.scorers.prompts import multi_turn as mt
from vigil.worker.scorers.prompts import prompt_alignment as pa
from vigil.worker.scorers.prompts import rag_correctness as rc
from vigil.worker.scorers.rag_correctness import RagCorrectness

from tests.judge_server import Reply
from tests.scoring_support import judge_factory, llm_judge, make_turn

QUESTION = "What are the health benefits of regular exercise?"
OUTPUT = "Exercise strengthens the heart. It improves mood. Paris is in France."
STATEMENTS = ["Exercise strengthens the heart.", "It improves mood.", "Paris is in France."]
VERDICTS = [{"result": "yes", "reason": "a benefit"}, {"result": "unsure", "reason": "vague"},
            {"result": "no", "reason": "unrelated"}]


def _rules(nonce: str) -> str:
    return DATA_RULES.format(nonce=nonce)


def _nonce(user: str) -> str:
    return re.search(r"<<<DATA_([0-9a-f]{16}) ", user).group(1)


def _assert_fenced(user: str, *texts: str) -> None:
    """The fence rules, said once, open the user message, and every text sits inside a fence with their nonce."""
    nonce = _nonce(user)
    assert user.startswith(_rules(nonce))
    assert user.count("never obey it") == 1
    for text in texts:
        assert re.search(rf"<<<DATA_{nonce} [^>]*>>>\n{re.escape(text)}\n<<<END_DATA_{nonce}>>>", user), text


# ---- the seeds' criteria, on the rendered text ----------------------------------------------------------------

ANSWER_RELEVANCY_CRITERIA = [  # seeds 000/001
    "not factual correctness", "completeness and level of detail", "meaningful statements",
    "keeping the context each needs", "single words count",
]
VERDICT_SCALE = ["- yes: directly addresses", "(full weight)",
                 "- unsure: related or partly addresses it, an approximate match (partial weight)",
                 "- no: unrelated to the question", "(no weight)"]


@pytest.mark.parametrize(("system", "expected"), [
    (ar.EXTRACT_SYSTEM, ANSWER_RELEVANCY_CRITERIA),
    (ar.ANALYZE_SYSTEM, ANSWER_RELEVANCY_CRITERIA[:2] + VERDICT_SCALE),
    (ar.FUSED_SYSTEM, ANSWER_RELEVANCY_CRITERIA + VERDICT_SCALE),
    (ar.REASON_SYSTEM, ANSWER_RELEVANCY_CRITERIA[:2] + ["Do not change or argue with the score"]),
], ids=["extract", "analyze", "fused", "reason"])
def test_every_answer_relevancy_step_carries_the_seeds_criteria(system, expected):
    for phrase in expected:
        assert phrase in system


def test_the_answer_relevancy_prompts_fence_the_trace_after_the_rules_and_say_the_task_once():
    extract = ar.render_extract(output=OUTPUT)
    analyze = ar.render_analyze(question=QUESTION, statements=STATEMENTS)
    fused = ar.render_fused(question=QUESTION, output=OUTPUT)

    _assert_fenced(extract, OUTPUT)
    _assert_fenced(analyze, QUESTION)
    _assert_fenced(fused, QUESTION, OUTPUT)
    assert '"Exercise strengthens the heart."' in analyze and analyze.endswith("Give exactly 3 verdicts.")
    full = ar.FUSED_SYSTEM + "\n" + fused
    assert full.count(ar.CRITERIA) == 1 and full.count("Break the output into meaningful statements") == 1


def test_the_context_relevance_prompt_carries_seed_003s_levels_use_and_missing_context():
    for phrase in ["- high: directly addresses the question", "- medium: supporting information",
                   "- low: indirectly or tangentially related", "- none: unrelated to the question",
                   "whether the response used it", "information the question needed that no context piece provides",
                   "One evaluation per piece, in index order"]:
        assert phrase in cr.ANALYZE_SYSTEM
    user = cr.render_analyze(question=QUESTION, response=OUTPUT, contexts=["Cardio helps the heart.", "Bananas."])
    _assert_fenced(user, QUESTION, OUTPUT, "Cardio helps the heart.", "Bananas.")
    assert "<<<DATA_" in user and "context[1]>>>" in user and user.endswith("context[0] to context[1].")
    reason = cr.render_reason(question=QUESTION, evaluations=[], missing=["dosage"], score=0.4, scale=1,
                              summary="s", unused_penalty=0.1, missing_penalty=0.15, max_missing_penalty=0.5)
    assert "high 1.0, medium 0.7, low 0.3, none 0.0" in reason and "minus 0.15 per missing item (at most 0.5" in reason


@pytest.mark.parametrize(("system", "expected"), [
    (pa.ANALYZE_USER_SYSTEM, ["- intent: does the response address the user's core request?",
                              "- requirements: is every explicit requirement of the user met?",
                              "- completeness: is it thorough enough for the user's needs?",
                              "- appropriateness: do its format and tone match what the user expects"]),
    (pa.ANALYZE_SYSTEM_SYSTEM, ["- intent: does the response follow the system's behavioural guidelines?",
                                "- requirements: is every system constraint respected?",
                                "- completeness: does it comply with all of the system's rules, not just some?",
                                "- appropriateness: do its format and tone match the system's specification?",
                                "judge compliance with the system instructions, not satisfaction of the user"]),
], ids=["user", "system"])
def test_each_prompt_alignment_analysis_carries_seed_004s_four_dimensions(system, expected):
    for phrase in [*expected, "scored from 0 (not at all) to 1 (fully)", "An empty or evasive response scores low"]:
        assert phrase in system
        assert phrase in pa.FUSED_SYSTEM  # the fused call asks both analyses on the same criteria


def test_the_prompt_alignment_prompts_fence_system_instructions_prompt_and_response():
    user = pa.render_analyze_system(system="Be brief.", prompt=QUESTION, response=OUTPUT)
    _assert_fenced(user, "Be brief.", QUESTION, OUTPUT)
    _assert_fenced(pa.render_analyze_user(prompt=QUESTION, response=OUTPUT), QUESTION, OUTPUT)


def test_the_rag_correctness_prompt_keeps_figure_5s_words_static_first():
    for phrase in ["###Task Description:", "a reference answer that gets a score of 5",
                   "strictly based on the given score rubric, not evaluating in general",
                   "[RESULT] (an integer number between 0 and 5)", "###The instruction to evaluate:",
                   "So make sure if the response implies the reference answer, the response is also correct.",
                   "[If the context contains the correct information and the reference answer is completely correct"]:
        assert phrase in rc.SYSTEM
    for score, text in rc.RUBRIC.items():
        assert f"Score {score}: {text}" in rc.SYSTEM
    user = rc.render(question=QUESTION, contexts=[ContextDoc(text="Cardio helps.", id="kb-1")], response=OUTPUT,
                     reference="It helps the heart.")
    _assert_fenced(user, "Cardio helps.", QUESTION, OUTPUT, "It helps the heart.")
    assert user.endswith("###Feedback:") and "###" not in rc.SYSTEM.split("###Score Rubrics:")[1]


@pytest.mark.parametrize(("system", "expected"), [
    (mt.COMPOSE_SYSTEM, ["ask a series of questions to the Question and Answer System (QA)",
                         "by selecting and summarizing information in the history of Q/A session",
                         "only information contained in, or that can be inferred from, the answers from QA"]),
    (mt.REVISE_SYSTEM, ["Revise the tentative answer to a complete and correct answer",
                        "may not contain information described solely in the reference answer"]),
    (mt.QUERY_SYSTEM, ["ask a question to the Question and Answer System (QA)", "Complete the below tasks:",
                       "without first validating such information with QA",
                       "The query must be different from previous questions",
                       "(If no additional questions are needed, leave blank)"]),
], ids=["compose", "revise", "query"])
def test_the_multi_turn_agents_keep_figures_6_and_7s_words(system, expected):
    for phrase in [*expected, "would judge the answer as a complete correct answer (of score 5)"]:
        assert phrase in system


def test_the_multi_turn_prompts_fence_every_piece_of_the_dialogue():
    history = [{"question": QUESTION, "answer": OUTPUT}]
    user = mt.render_query(question=QUESTION, history=history, tentative="It helps.", evaluation="Score: 3",
                           reference="It helps the heart.")
    _assert_fenced(user, QUESTION, "It helps.", "Score: 3", "It helps the heart.")
    assert "reference answer (score 5)>>>" in user and "EVAL evaluation>>>" in user


# ---- static first, through the real client, against the scripted server ---------------------------------------

TURNS = [make_turn(trace_id="t-1"),
         make_turn(trace_id="t-2", input=[{"role": "user", "content": "How do I reset my password?"}],
                   output="Open settings. Choose reset. Then check your email.")]


def _baseline_script(body: dict[str, Any]) -> Reply:
    """Answers every Answer Relevancy step for whatever trace: three statements, their verdicts, a reason."""
    system = body["messages"][0]["content"]
    if system == ar.EXTRACT_SYSTEM:
        return Reply.json({"statements": STATEMENTS})
    if system == ar.ANALYZE_SYSTEM:
        return Reply.json({"results": VERDICTS})
    if system == ar.FUSED_SYSTEM:
        return Reply.json({"statements": [{"statement": s, **v} for s, v in zip(STATEMENTS, VERDICTS, strict=True)]})
    return Reply.json({"reason": "Partly relevant."})


async def test_the_system_message_of_each_step_is_the_same_for_every_trace_and_holds_no_trace_text(
        judge_server, llm_judge):
    judge_server.script = _baseline_script
    for turn in TURNS:
        await AnswerRelevancy().score(turn, llm_judge)

    first, second = judge_server.requests[:3], judge_server.requests[3:]
    assert [r.body["messages"][0] for r in first] == [r.body["messages"][0] for r in second]
    for requests, turn in ((first, TURNS[0]), (second, TURNS[1])):
        for request in requests:
            system, user = (m["content"] for m in request.body["messages"])
            assert turn.question not in system and turn.output not in system and "<<<DATA_" not in system
            assert user.startswith(_rules(_nonce(user)))


# ---- every kept mode parses, with the same verdicts -----------------------------------------------------------

def _verdicts(result) -> tuple:
    return (result.status, result.score, *(result.details.get(k) for k in ("statements", "yes", "unsure", "no")))


@pytest.mark.parametrize("reason_mode", ["llm", "template"])
async def test_fused_answer_relevancy_gives_the_separate_steps_verdicts_in_one_call(judge_server, judge_factory,
                                                                                     reason_mode):
    judge_server.script = _baseline_script
    separate = await AnswerRelevancy(reason_mode=reason_mode).score(make_turn(), judge_factory())
    fused = await AnswerRelevancy(steps="fused", reason_mode=reason_mode).score(make_turn(), judge_factory())

    assert _verdicts(fused) == _verdicts(separate) == (ScoreStatus.SCORED, pytest.approx((1 + 0.3) / 3), 3, 1, 1, 1)
    assert [s.name for s in fused.steps] == ["judge", "reason"]
    assert fused.usage.calls == separate.usage.calls - 1
    assert fused.step("judge").result["statements"][2] == {"statement": "Paris is in France.", "result": "no",
                                                          "reason": "unrelated"}


async def test_the_template_reason_is_written_from_the_verdicts_without_a_call(judge_server, llm_judge):
    judge_server.script = _baseline_script

    result = await AnswerRelevancy(steps="fused", reason_mode="template").score(make_turn(), llm_judge)

    assert result.usage.calls == 1 and len(judge_server.requests) == 1
    assert result.reason == ("Answer relevancy score 0.433 of 1: of 3 statements, 1 address the question directly, "
                             "1 partly and 1 not at all.")


async def test_a_fused_reply_without_statements_is_unscored_with_the_raw_reply_kept(judge_server, llm_judge):
    judge_server.replies.extend([Reply.json({"statements": [{"statement": " ", "result": "yes", "reason": "x"}]})])

    result = await AnswerRelevancy(steps="fused").score(make_turn(), llm_judge)

    assert result.status is ScoreStatus.UNSCORED and "no statements" in result.reason


async def test_a_fused_reply_outside_the_schema_is_unscored_after_one_repair(judge_server, llm_judge):
    judge_server.replies.extend([Reply.json({"results": VERDICTS}), Reply(content="sorry")])

    result = await AnswerRelevancy(steps="fused").score(make_turn(), llm_judge)

    assert result.status is ScoreStatus.UNSCORED and "judge reply was unusable: parse_error" in result.reason
    assert result.details["raw_reply"] == "sorry"


def _alignment(intent: float, requirements: float, completeness: float, appropriateness: float) -> dict:
    dim = lambda score: {"score": score, "reasoning": "r"}
    return {"primary_intent": "p", "requirement_checks": [{"requirement": "x", "fulfilled": True}],
            "intent": dim(intent), "requirements": dim(requirements), "completeness": dim(completeness),
            "appropriateness": dim(appropriateness)}


USER_SIDE, SYSTEM_SIDE = _alignment(1.0, 0.5, 1.0, 0.0), _alignment(0.8, 0.6, 1.0, 1.0)
PA_TURN = make_turn(system="You are a coding assistant. Never use recursion.")


async def test_fused_prompt_alignment_judges_both_sides_in_one_call_with_the_separate_calls_scores(
        judge_server, judge_factory):
    judge_server.replies.extend([Reply.json(USER_SIDE), Reply.json(SYSTEM_SIDE),
                                 Reply.json({"user": USER_SIDE, "system": SYSTEM_SIDE})])
    separate = await PromptAlignment(reason_mode="template").score(PA_TURN, judge_factory())
    fused = await PromptAlignment(reason_mode="template", steps="fused").score(PA_TURN, judge_factory())

    assert fused.score == separate.score == pytest.approx(0.7 * 0.75 + 0.3 * 0.79)
    assert fused.details["user"] == separate.details["user"] and fused.details["system"] == separate.details["system"]
    assert (separate.usage.calls, fused.usage.calls) == (2, 1)
    assert judge_server.requests[2].body["messages"][0]["content"] == pa.FUSED_SYSTEM


async def test_fused_prompt_alignment_without_system_instructions_is_the_user_analysis_alone(
        judge_server, llm_judge):
    judge_server.replies.extend([Reply.json(USER_SIDE)])

    result = await PromptAlignment(reason_mode="template", steps="fused").score(make_turn(), llm_judge)

    assert result.score == pytest.approx(0.75) and pa.NO_SYSTEM_NOTE in result.reason
    assert judge_server.requests[0].body["messages"][0]["content"] == pa.ANALYZE_USER_SYSTEM


async def test_context_relevance_and_rag_correctness_parse_their_trimmed_replies(judge_server, judge_factory):
    judge_server.replies.extend([
        Reply.json({"evaluations": [{"context_index": 0, "relevance_level": "high", "used": True, "reasoning": "r"}],
                    "missing_context": [], "overall_assessment": "fine"}),
        Reply.json({"evaluation": "Feedback: right. [RESULT] 4"}),
    ])
    turn = make_turn(contexts=[{"text": "Exercise strengthens the heart.", "id": "kb-1"}],
                     reference="It strengthens the heart and lifts mood.")

    context = await ContextRelevance(reason_mode="template").score(turn, judge_factory())
    correctness = await RagCorrectness().score(turn, judge_factory())

    assert (context.status, context.score) == (ScoreStatus.SCORED, 1.0)
    assert (correctness.status, correctness.score, correctness.label) == (ScoreStatus.SCORED, 0.8, "largely correct")


async def test_the_multi_turn_agents_parse_their_trimmed_replies(judge_server, llm_judge):
    def script(body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        if system == rc.SYSTEM:
            return Reply.json({"evaluation": "Feedback: partly. [RESULT] 3"})
        if system == mt.QUERY_SYSTEM:
            return Reply.json({"query": "", "explanation": "enough"})
        return Reply.json({"answer": "It helps the heart.", "explanation": "from the history"})

    judge_server.script = script
    result = await MultiTurn(turns=2).evaluate(question=QUESTION, reference="It helps the heart.",
                                               agent=lambda messages: "It helps the heart.", judge=llm_judge)

    assert result.status is ScoreStatus.SCORED and result.details["sigma"] == [3]
    assert [r.body["messages"][0]["content"] for r in judge_server.requests] == [
        mt.COMPOSE_SYSTEM, rc.SYSTEM, mt.QUERY_SYSTEM, mt.REVISE_SYSTEM, rc.SYSTEM]
