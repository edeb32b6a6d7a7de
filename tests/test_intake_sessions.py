"""Sessions scored as a whole, on real parts: turns of one conversation go through Redis to a real worker, which
scores each turn with the turn monitors and, once the session has been idle for VIGIL_SESSION_IDLE_S, scores the
whole conversation once with the `target: session` monitor (the paper's σ per turn, wscore, lscore, mscore)."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from vigil.schemas import VigilConfig
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, send, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "sessions.yaml"
REFERENCE = "Damaged kettles are refunded in full within thirty days of delivery."
DIALOGUE = [("Can I return a kettle?", "Let me check that for you."),
            ("It arrived damaged.", "Damaged kettles can be returned."),
            ("Will I get my money back?", "Yes: damaged kettles are refunded in full within thirty days of delivery.")]


def session_turns(session_id: str) -> list[dict]:
    start = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    return [{"trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16], "session_id": session_id,
             "project": "shop", "agent": "support-bot", "started_at": (start + timedelta(minutes=i)).isoformat(),
             "input": [{"role": "user", "content": question}], "output": answer,
             **({"reference": REFERENCE} if i == 0 else {})}
            for i, (question, answer) in enumerate(DIALOGUE)]


@pytest.fixture
def worker(redis_url, tmp_path):
    process = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG, VIGIL_SESSION_IDLE_S="2")
    yield process
    if process.process is not None:
        process.stop()


def test_an_idle_session_is_scored_once_as_a_whole_and_each_turn_by_the_turn_monitors(redis_url, worker):
    turns = session_turns("sess-1")
    worker.start()
    for turn in turns:  # the conversation arrives turn by turn, each within the idle time of the one before
        send(redis_url, [turn])
        time.sleep(0.3)
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    rows = store.query("SELECT monitor, trace_id, session_id, status, details_json FROM scores FINAL "
                       "WHERE session_id = 'sess-1' ORDER BY monitor").result_rows
    by_monitor = [r[0] for r in rows]
    assert by_monitor.count("relevancy") == 3
    [session] = [r for r in rows if r[0] == "conversation"]
    assert (session[1], session[3]) == (turns[0]["trace_id"], "scored")  # under the first turn's ids
    details = json.loads(session[4])
    assert [pair["question"] for pair in details["history"]] == [q for q, _ in DIALOGUE]
    assert len(details["sigma"]) == 3 and details["sigma"][-1] == 5
    assert details["lscore"] == 3 and details["mscore"] == 5
    sampled = store.query("SELECT count() FROM pipeline_events FINAL WHERE monitor = 'conversation' "
                          "AND stage = 'sampled'").result_rows[0][0]
    assert sampled == 1


def test_a_session_monitor_needs_a_scorer_that_reads_conversations():
    with pytest.raises(ValidationError, match="target: monitor 'c' scores sessions, which only multi_turn"):
        VigilConfig.model_validate({"judges": [{"name": "j", "kind": "baseline"}], "monitors": [
            {"name": "c", "scorer": "answer_relevancy", "judge": "j", "target": "session"}]})
