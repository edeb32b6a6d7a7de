"""``vigil probe``: the multi-turn evaluation of a live agent (a scripted OpenAI-compatible server) over a golden
set, every result written to chDB."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner
from vigil.schemas import ScoreStatus
from vigil.worker.cli.probe import probe_command
from vigil.worker.judge.baseline import MODEL as BASELINE_MODEL
from vigil.worker.scorers.multi_turn import MultiTurn
from vigil.worker.scorers.probe import run_probe
from vigil.worker.scorers.rag_correctness import GoldenItem
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.scoring_support import judge_factory, llm_judge  # noqa: F401 (fixtures)
from tests.test_multi_turn import (
    CONFIRM,
    FOLLOW_UP,
    QUESTION,
    REFERENCE,
    WRONG,
    Dialogue,
)

DEADLOCK = "What is a deadlock?"
DEADLOCK_REFERENCE = "Two transactions each wait for a lock the other holds, so neither can proceed."


@pytest.fixture
def golden(tmp_path):
    path = tmp_path / "golden.jsonl"
    rows = [{"id": "union", "question": QUESTION, "reference": REFERENCE},
            {"id": "deadlock", "question": DEADLOCK, "reference": DEADLOCK_REFERENCE}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def agent_server():
    with ScriptedJudge() as server:
        yield server


def probe(*args: str) -> str:
    result = CliRunner().invoke(probe_command, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_probe_writes_a_score_a_trace_and_the_judge_calls_per_question(
    golden, agent_server, judge_server, chdb_dsn
):
    """Question 1 needs a follow-up (σ = [1, 5] in 3 turns: wscore 3); question 2 is right at once (σ = [5])."""
    agent_server.replies.extend([Reply(content=WRONG), Reply(content=CONFIRM), Reply(content=DEADLOCK_REFERENCE)])
    Dialogue(judge_server, verdicts=[1, 5, 5], queries=[FOLLOW_UP])
    output = probe("--dataset", str(golden), "--agent-url", agent_server.base_url, "--agent-model", "rag-bot",
                   "--judge-base-url", judge_server.base_url, "--model", "judge-m", "--turns", "3",
                   "--concurrency", "1", "--run-id", "run1", "--dsn", chdb_dsn)
    assert "probe run1: 2 scored, 0 unscored, 0 failed" in output

    client = connect(chdb_dsn)
    scores = client.query(
        "SELECT trace_id, session_id, agent, environment, monitor, scorer, status, score, details_json, judge_calls,"
        " prompt_tokens FROM scores FINAL ORDER BY trace_id").result_rows
    assert [row[:8] for row in scores] == [
        ("probe:run1:deadlock", "run1", "rag-bot", "probe", "probe", "multi_turn", "scored", 1.0),
        ("probe:run1:union", "run1", "rag-bot", "probe", "probe", "multi_turn", "scored", pytest.approx(0.6)),
    ]
    details = json.loads(scores[1][8])
    assert (details["sigma"], details["wscore"], details["lscore"], details["mscore"]) == ([1, 5], 3, 2, 5)
    assert [(row[9], row[10]) for row in scores] == [(2, 20), (5, 50)]
    traces = client.query("SELECT trace_id, question, output, reference FROM traces FINAL ORDER BY trace_id")
    assert traces.result_rows[1] == ("probe:run1:union", QUESTION, WRONG, REFERENCE)
    steps = client.query("SELECT step, count() FROM judge_calls FINAL GROUP BY step ORDER BY step").result_rows
    assert steps == [("multi_turn.compose", 3), ("multi_turn.query", 1), ("rag_correctness.evaluate", 3)]


def test_a_rerun_under_the_same_run_id_replaces_its_rows(golden, agent_server, chdb_dsn):
    agent_server.script = lambda body: Reply(content=REFERENCE + " " + DEADLOCK_REFERENCE)
    for _ in range(2):
        probe("--dataset", str(golden), "--agent-url", agent_server.base_url, "--run-id", "again", "--dsn", chdb_dsn)
    client = connect(chdb_dsn)
    assert client.query("SELECT count() FROM scores FINAL").result_rows == [(2,)]


def test_without_a_judge_url_the_probe_uses_the_offline_baseline(golden, agent_server, chdb_dsn):
    """An agent that answers with the reference gets 5 from word recall at turn 1."""
    agent_server.script = lambda body: Reply(content=REFERENCE + " " + DEADLOCK_REFERENCE)
    output = probe("--dataset", str(golden), "--agent-url", agent_server.base_url, "--dsn", chdb_dsn)
    assert "offline baseline" in output
    rows = connect(chdb_dsn).query("SELECT judge_model, status, score FROM scores FINAL").result_rows
    assert rows == [(BASELINE_MODEL, "scored", 1.0)] * 2


def test_an_agent_that_is_down_is_a_failed_row_not_a_crash(golden, chdb_dsn):
    output = probe("--dataset", str(golden), "--agent-url", "http://127.0.0.1:9/v1", "--dsn", chdb_dsn)
    assert "0 scored, 0 unscored, 2 failed" in output
    rows = connect(chdb_dsn).query("SELECT DISTINCT status, error_type FROM scores FINAL").result_rows
    assert rows == [("failed", "agent_error")]


async def test_results_come_back_in_dataset_order_whatever_order_they_finish_in(judge_server, llm_judge):
    """The first question's agent call waits until the last question's has been made, so it finishes late."""
    items = [GoldenItem(question=f"question {i}", reference="the answer") for i in range(6)]
    judge_server.script = lambda body: Reply.json(
        {"answer": "the answer", "explanation": "-"} if "###Task Description:" not in body["messages"][0]["content"]
        else {"evaluation": "Feedback: right [RESULT] 5"})
    last_asked = asyncio.Event()
    finished: list[int] = []

    async def agent(messages):
        if messages[-1]["content"] == "question 0":
            await last_asked.wait()
        if messages[-1]["content"] == "question 5":
            last_asked.set()
        return "the answer"

    results = await run_probe(items, scorer=MultiTurn(turns=2), agent=agent, judge=llm_judge, concurrency=3,
                              on_result=lambda index, item, result, started: finished.append(index))
    assert finished.index(0) > finished.index(1)
    assert [r.status for r in results] == [ScoreStatus.SCORED] * 6
    assert [r.details["history"][0]["question"] for r in results] == [item.question for item in items]
