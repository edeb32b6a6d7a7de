"""Multi-turn continuous-response evaluation (seed 002, method II): the T1–T7 loop against a scripted judge, with
the agent under test a local callable or an OpenAI-compatible endpoint (a second scripted server)."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest
from vigil.schemas import ScoreStatus
from vigil.worker.scorers.multi_turn import MultiTurn, OpenAIAgent

from tests.judge_server import Reply, ScriptedJudge
from tests.scoring_support import judge_factory, llm_judge, make_turn  # noqa: F401 (fixtures)

QUESTION = "What do SQL statements UNION and UNION ALL do and what is the difference between them?"
REFERENCE = "They both combine the results of SELECT statements. UNION eliminates duplicates, UNION ALL does not."
WRONG = "UNION and UNION ALL combine SELECT results; UNION keeps duplicates while UNION ALL eliminates them."
CONFIRM = "Yes, UNION eliminates duplicates; UNION ALL returns every row."
FOLLOW_UP = "Does UNION eliminate duplicates or not?"


class Dialogue:
    """Scripts the three judge agents by their prompts: the verdicts T3/T7 give, the queries T4/T5 write."""

    def __init__(self, server: ScriptedJudge, *, verdicts: list[int], queries: list[str],
                 revised: str = "revised answer") -> None:
        self.verdicts, self.queries, self.revised = deque(verdicts), deque(queries), revised
        self.steps: list[str] = []
        server.script = self

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = "\n".join(m["content"] for m in body["messages"])  # the task is in the system message
        if "###Task Description:" in prompt:
            self.steps.append("evaluate")
            return Reply.json({"evaluation": f"Feedback: scripted. [RESULT] {self.verdicts.popleft()}"})
        if "Complete the below tasks:" in prompt:
            self.steps.append("query")
            return Reply.json({"query": self.queries.popleft(), "explanation": "scripted"})
        if "Revise the tentative answer" in prompt:
            self.steps.append("revise")
            return Reply.json({"answer": self.revised, "explanation": "scripted"})
        self.steps.append("compose")
        return Reply.json({"answer": f"composed answer {self.steps.count('compose')}", "explanation": "scripted"})


class ScriptedAgent:
    """A local agent under test: answers in order, and records the session it was shown each time."""

    def __init__(self, *answers: str) -> None:
        self.answers = deque(answers)
        self.sessions: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.sessions.append(messages)
        return self.answers.popleft()


async def test_the_papers_example_ends_at_turn_two_with_wscore_3(judge_server, llm_judge):
    """n = 3, σ = [1, 5]: wscore = (3·1 + 2·5 + 1·5) / 6 = 3, lscore 2, mscore 5 (the paper's worked example)."""
    dialogue = Dialogue(judge_server, verdicts=[1, 5], queries=[FOLLOW_UP])
    agent = ScriptedAgent(WRONG, CONFIRM)
    result = await MultiTurn(turns=3).evaluate(question=QUESTION, reference=REFERENCE, agent=agent, judge=llm_judge)
    assert result.status is ScoreStatus.SCORED
    assert result.details["sigma"] == [1, 5]
    assert (result.details["wscore"], result.details["lscore"], result.details["mscore"]) == (3, 2, 5)
    assert result.score == pytest.approx(3 / 5)
    assert dialogue.steps == ["compose", "evaluate", "query", "compose", "evaluate"]
    assert result.usage.calls == 5
    assert result.details["history"] == [{"question": QUESTION, "answer": WRONG},
                                         {"question": FOLLOW_UP, "answer": CONFIRM}]
    assert result.details["final_answer"] == "composed answer 2"


async def test_the_reason_names_the_final_answer_without_pasting_all_of_it(judge_server, llm_judge):
    """A reason is read in lists of turns: it carries the start of the final answer; the details keep it whole."""
    Dialogue(judge_server, verdicts=[3, 4], queries=[""], revised="word " * 200)
    result = await MultiTurn(turns=5).evaluate(question=QUESTION, reference=REFERENCE, agent=ScriptedAgent(WRONG),
                                               judge=llm_judge)
    assert len(result.details["final_answer"]) > 900
    assert len(result.reason) < 300 and result.reason.endswith("…") and "Final answer: word word" in result.reason


async def test_the_agent_sees_the_whole_session_each_turn(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[1, 5], queries=[FOLLOW_UP])
    agent = ScriptedAgent(WRONG, CONFIRM)
    await MultiTurn(turns=3).evaluate(question=QUESTION, reference=REFERENCE, agent=agent, judge=llm_judge)
    assert agent.sessions == [
        [{"role": "user", "content": QUESTION}],
        [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": WRONG},
         {"role": "user", "content": FOLLOW_UP}],
    ]


async def test_no_further_query_revises_and_scores_the_final_answer(judge_server, llm_judge):
    """T3 gives 3, T4 needs no query: T6 revises, T7 gives 4, and that is the turn's score: σ = [4]."""
    dialogue = Dialogue(judge_server, verdicts=[3, 4], queries=[""])
    result = await MultiTurn(turns=5).evaluate(question=QUESTION, reference=REFERENCE, agent=ScriptedAgent(WRONG),
                                               judge=llm_judge)
    assert dialogue.steps == ["compose", "evaluate", "query", "revise", "evaluate"]
    assert result.details["sigma"] == [4]
    assert (result.details["wscore"], result.details["lscore"], result.details["mscore"]) == (4, 1, 4)
    assert result.details["final_answer"] == "revised answer"
    assert result.step("turn1.final_evaluate").result == {"feedback": "scripted.", "result": 4}


async def test_the_last_turn_is_finalised_without_asking_for_another_query(judge_server, llm_judge):
    """n = 2, T3 gives 2 then 3, the last turn's T7 gives 4: σ = [2, 4], wscore = (2·2 + 1·4) / 3."""
    dialogue = Dialogue(judge_server, verdicts=[2, 3, 4], queries=[FOLLOW_UP])
    result = await MultiTurn(turns=2).evaluate(question=QUESTION, reference=REFERENCE,
                                               agent=ScriptedAgent(WRONG, CONFIRM), judge=llm_judge)
    assert dialogue.steps == ["compose", "evaluate", "query", "compose", "evaluate", "revise", "evaluate"]
    assert result.details["sigma"] == [2, 4]
    assert result.details["wscore"] == pytest.approx(8 / 3)
    assert (result.details["lscore"], result.details["mscore"]) == (2, 4)


async def test_a_not_sure_verdict_mid_dialogue_stays_in_sigma(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[0, 5], queries=[FOLLOW_UP])
    result = await MultiTurn(turns=2).evaluate(question=QUESTION, reference=REFERENCE,
                                               agent=ScriptedAgent(WRONG, CONFIRM), judge=llm_judge)
    assert result.details["sigma"] == [0, 5]
    assert result.details["wscore"] == pytest.approx(5 / 3)


async def test_an_async_agent_is_awaited(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[5], queries=[])

    async def agent(messages):
        return CONFIRM

    result = await MultiTurn().evaluate(question=QUESTION, reference=REFERENCE, agent=agent, judge=llm_judge)
    assert result.details["sigma"] == [5]
    assert result.details["wscore"] == 5
    assert result.score == 1.0


async def test_an_openai_compatible_agent_gets_the_session_over_http(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[1, 5], queries=[FOLLOW_UP])
    with ScriptedJudge() as agent_server:
        agent_server.replies.extend([Reply(content=WRONG), Reply(content=CONFIRM)])
        agent = OpenAIAgent(agent_server.base_url, model="rag-bot")
        result = await MultiTurn(turns=3).evaluate(question=QUESTION, reference=REFERENCE, agent=agent,
                                                   judge=llm_judge)
        await agent.aclose()
    assert result.details["sigma"] == [1, 5]
    assert [r.body["model"] for r in agent_server.requests] == ["rag-bot", "rag-bot"]
    assert agent_server.requests[1].body["messages"] == [
        {"role": "user", "content": QUESTION}, {"role": "assistant", "content": WRONG},
        {"role": "user", "content": FOLLOW_UP}]


async def test_an_agent_that_errors_fails_the_result_and_keeps_the_transcript(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[1], queries=[FOLLOW_UP])
    agent = ScriptedAgent(WRONG)  # has no second answer: the follow-up raises IndexError
    result = await MultiTurn(turns=3).evaluate(question=QUESTION, reference=REFERENCE, agent=agent, judge=llm_judge)
    assert result.status is ScoreStatus.FAILED
    assert result.error_type == "agent_error"
    assert "IndexError" in result.reason
    assert result.step("turn1.evaluate").result["result"] == 1


async def test_an_unusable_composition_is_unscored(judge_server, llm_judge):
    judge_server.script = lambda body: Reply(content="no idea")
    result = await MultiTurn().evaluate(question=QUESTION, reference=REFERENCE, agent=ScriptedAgent(WRONG),
                                        judge=llm_judge)
    assert result.status is ScoreStatus.UNSCORED
    assert result.details["raw_reply"] == "no idea"


async def test_a_judge_that_keeps_failing_fails_the_result(judge_server, llm_judge):
    judge_server.script = lambda body: Reply.error(500)
    result = await MultiTurn().evaluate(question=QUESTION, reference=REFERENCE, agent=ScriptedAgent(WRONG),
                                        judge=llm_judge)
    assert result.status is ScoreStatus.FAILED
    assert result.error_type == "http_500"


async def test_the_evaluation_agent_sees_contexts_retrieved_with_question_and_reference(
    judge_server, llm_judge, tmp_path
):
    kb = tmp_path / "kb.jsonl"
    kb.write_text("\n".join(json.dumps(r) for r in [
        {"id": "dedup", "text": "One eliminates duplicates, the other keeps every row."},
        {"id": "locks", "text": "A deadlock is two transactions waiting on each other."},
    ]), encoding="utf-8")
    Dialogue(judge_server, verdicts=[5], queries=[])
    result = await MultiTurn(retriever={"path": str(kb)}).evaluate(
        question=QUESTION, reference=REFERENCE, agent=ScriptedAgent(CONFIRM), judge=llm_judge)
    assert result.details["context_ids"] == ["dedup"]
    assert "One eliminates duplicates, the other keeps every row." in result.step("turn1.evaluate").prompt


async def test_a_trace_answer_is_turn_one_and_follow_ups_go_to_the_configured_agent(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[1, 5], queries=[FOLLOW_UP])
    turn = make_turn(input=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}],
                     output=WRONG, reference=REFERENCE)
    with ScriptedJudge() as agent_server:
        agent_server.replies.append(Reply(content=CONFIRM))
        scorer = MultiTurn(turns=3, agent={"base_url": agent_server.base_url, "model": "rag-bot"})
        result = await scorer.score(turn, llm_judge)
    assert result.details["sigma"] == [1, 5]
    assert result.details["reference_source"] == "trace"
    assert agent_server.requests[0].body["messages"] == [
        {"role": "user", "content": QUESTION}, {"role": "assistant", "content": WRONG},
        {"role": "user", "content": FOLLOW_UP}]


async def test_a_trace_without_a_configured_agent_fails_when_a_follow_up_is_needed(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[2], queries=[FOLLOW_UP])
    result = await MultiTurn(turns=3).score(make_turn(input=[{"role": "user", "content": QUESTION}], output=WRONG,
                                                      reference=REFERENCE), llm_judge)
    assert result.status is ScoreStatus.FAILED
    assert result.error_type == "agent_error"
    assert "params.agent" in result.reason


async def test_a_trace_without_a_reference_is_unscored_without_a_judge_call(judge_server, llm_judge):
    result = await MultiTurn().score(make_turn(), llm_judge)
    assert result.status is ScoreStatus.UNSCORED
    assert "no reference answer" in result.reason
    assert judge_server.requests == []


async def test_the_prompts_follow_figures_6_and_7(judge_server, llm_judge):
    Dialogue(judge_server, verdicts=[3, 4], queries=[""])
    await MultiTurn().evaluate(question=QUESTION, reference=REFERENCE, agent=ScriptedAgent(WRONG), judge=llm_judge)
    systems = [r.body["messages"][0]["content"] for r in judge_server.requests]
    prompts = [r.body["messages"][-1]["content"] for r in judge_server.requests]
    compose, _, query, revise, _ = prompts
    assert "ask a series of questions to the Question and Answer System (QA)" in systems[0]
    assert "ask a question to the Question and Answer System (QA)" in systems[2]
    assert "Generate a correct and complete answer to the target question" in systems[0] and WRONG in compose
    assert "EVAL's evaluation of it" in systems[2] and "EVAL evaluation>>>" in query and "Score: 3" in query
    assert "(If no additional questions are needed, leave blank)" in systems[2] and REFERENCE in query
    assert "may not contain information described solely in the reference answer" in systems[3]
    assert "tentative answer>>>" in revise and "reference answer (score 5)>>>" in revise
