"""Feedback through the real pipeline: the SDK (or `vigil feedback import`) -> a real Redis -> a real `vigil worker`
process -> chDB, read back with the agreement panel's SQL; and ``always_sample: {feedback: negative}`` scoring each
complained-about turn exactly once, whether the feedback comes after the turn or before it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
from click.testing import CliRunner
from vigil.producers import Monitor
from vigil.worker.cli import main
from vigil.worker.pipeline.feedback import negative_key
from vigil.worker.pipeline.sampling import sampled
from vigil.worker.report.build import run_query
from vigil.worker.store import connect
from vigil.worker.store.queries import PANELS

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

# `relevancy` scores every turn with the offline baseline judge; the two feedback-sampling monitors call the
# scripted judge server, so the test can count how many times a turn was really scored (the tables replace rows
# with the same id, so they cannot show a turn scored twice).
CONFIG = """
judges:
  - {name: offline, kind: baseline}
  - {name: llm, kind: openai, base_url: BASE_URL, model: judge-model, api_key_env: VIGIL_TEST_JUDGE_KEY}
monitors:
  - {name: relevancy, scorer: answer_relevancy, judge: offline, sampling_rate: 1.0}
  - name: complaints
    scorer: answer_relevancy
    judge: llm
    reason: template
    sampling_rate: 0.0
    always_sample: {feedback: negative}
  - name: complaints-half
    scorer: answer_relevancy
    judge: llm
    reason: template
    sampling_rate: 0.5
    always_sample: {feedback: negative}
    filters: {agents: [support-bot]}
"""

STATEMENTS = {"statements": ["Returns are accepted within 30 days."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers the question"}]}


def _reply(body: dict) -> Reply:
    step = body["response_format"]["json_schema"]["name"]
    return Reply.json(STATEMENTS if step.endswith("preprocess") else VERDICTS)


@pytest.fixture
def judge():
    with ScriptedJudge(_reply) as server:
        yield server


@pytest.fixture
def worker(redis_url, tmp_path, judge):
    config = tmp_path / "vigil.yaml"
    config.write_text(CONFIG.replace("BASE_URL", judge.base_url))
    process = WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_TEST_JUDGE_KEY="k")
    yield process
    if process.process is not None:
        process.stop()


def scorings(judge: ScriptedJudge, turns: list[dict]) -> dict[str, int]:
    """How many times each turn was scored on the scripted judge: its answer's statement-extraction requests."""
    counts = {}
    for turn in turns:
        counts[turn["trace_id"]] = sum(1 for r in judge.requests
                                       if r.body["response_format"]["json_schema"]["name"].endswith("preprocess")
                                       and turn["output"] in r.prompt)
    return counts


@pytest.fixture
def monitor(redis_url, tmp_path):
    made = Monitor(redis_url, project="acme", agent="support-bot", spool_path=tmp_path / "spool.jsonl",
                   flush_interval=0.05)
    yield made
    made.shutdown(timeout=10)


def capture(monitor: Monitor, turn: dict) -> None:
    assert monitor.capture(turn)


def scores_per_trace(store, monitor: str) -> dict[str, int]:
    """Rows per trace as inserted (no FINAL): a turn scored twice would show 2 here."""
    return dict(store.query(f"SELECT trace_id, count() FROM scores WHERE monitor = '{monitor}' "
                            "GROUP BY trace_id").result_rows)


def agreement(store) -> dict[str, dict]:
    now = datetime.now(UTC)
    rows = run_query(store, PANELS["judge_agreement"], start=now - timedelta(days=1), end=now + timedelta(hours=1))
    return {row["monitor"]: row for row in rows}


def test_feedback_from_the_sdk_reaches_clickhouse_and_the_agreement_query_pairs_it_with_scores(
        redis_url, worker, monitor):
    turns = [make_turn(i) for i in range(12)]
    thumbs = {t["trace_id"]: i % 3 != 0 for i, t in enumerate(turns)}  # every third turn gets a thumbs down
    worker.start()
    for turn in turns:
        capture(monitor, turn)
        monitor.feedback(turn["trace_id"], "thumbs", not thumbs[turn["trace_id"]], author="u1")
    for turn in turns:  # the user changes their mind: the same person's feedback replaces the first
        assert monitor.feedback(turn["trace_id"], "thumbs", thumbs[turn["trace_id"]], author="u1")
    assert monitor.flush(timeout=30)
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    stored = dict(store.query("SELECT trace_id, value FROM feedback FINAL").result_rows)
    assert stored == {trace: float(up) for trace, up in thumbs.items()}
    judged = dict(store.query("SELECT trace_id, score / scale FROM scores FINAL "
                              "WHERE monitor = 'relevancy' AND status = 'scored'").result_rows)
    assert set(judged) == set(thumbs)
    expected = sum((judged[t] >= 0.5) == up for t, up in thumbs.items())
    row = agreement(store)["relevancy"]
    assert (row["pairs"], row["agreed"], row["negative_feedback"]) == (12, expected, 4)
    assert row["agreement"] == pytest.approx(expected / 12)
    assert row["agreement_low"] <= row["agreement"] <= row["agreement_high"]


def test_vigil_feedback_import_sends_good_lines_and_names_each_bad_line_and_field(redis_url, worker, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("VIGIL_SPOOL_PATH", str(tmp_path / "import-spool.jsonl"))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join([
        '{"trace_id": "t-1", "name": "correct", "value": 1, "author": "ana"}',
        '{"trace_id": "t-2", "name": "correct", "value": 7, "author": "ana"}',
        "not json at all",
        '{"trace_id": "t-3", "name": "rating", "value": 4, "scale": 5, "comment": "a bit long"}',
        '{"trace_id": "t-4", "name": "correct", "value": 1, "source": "robot"}',
        '["a", "list"]',
    ]) + "\n")
    worker.start()

    result = CliRunner().invoke(main, ["feedback", "import", str(labels), "--redis-url", redis_url])

    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert errors[0].startswith("line 2: value:") and "0..1" in errors[0]
    assert errors[1].startswith("line 3: not JSON")
    assert errors[2].startswith("line 5: source:")
    assert errors[3].startswith("line 6: a feedback line is a JSON object")
    assert "2 feedback items sent from 6 lines; 4 bad lines; all delivered" in result.stdout
    wait_drained(redis_url, worker)
    assert worker.stop() == 0
    rows = connect(worker.dsn).query(
        "SELECT trace_id, name, value, scale, source, comment FROM feedback FINAL ORDER BY trace_id").result_rows
    assert rows == [("t-1", "correct", 1.0, 1.0, "reviewer", ""),
                    ("t-3", "rating", 4.0, 5.0, "reviewer", "a bit long")]


def _turns_by_half_sampling(count: int) -> tuple[list[dict], list[dict]]:
    """Turns `complaints-half` (rate 0.5) samples anyway, and turns it skips."""
    sampled_anyway, skipped = [], []
    i = 0
    while len(sampled_anyway) < count or len(skipped) < count:
        turn = make_turn(i)
        i += 1
        target = sampled_anyway if sampled(turn["trace_id"], 0.5) else skipped
        if len(target) < count:
            target.append(turn)
    return sampled_anyway, skipped


def test_negative_feedback_after_ingest_scores_the_turn_exactly_once(redis_url, worker, monitor, judge):
    anyway, skipped = _turns_by_half_sampling(3)
    complained, praised, twice = skipped
    worker.start()
    for turn in [*anyway, *skipped]:
        capture(monitor, turn)
    assert monitor.flush(timeout=30)
    wait_drained(redis_url, worker)  # the turns are stored and scored by `relevancy` (and half by complaints-half)

    monitor.feedback(complained["trace_id"], "thumbs", False)
    monitor.feedback(praised["trace_id"], "thumbs", True)
    monitor.feedback(twice["trace_id"], "thumbs", False, author="u1")
    monitor.feedback(twice["trace_id"], "rating", 1, scale=5, author="u2")
    for turn in anyway:
        monitor.feedback(turn["trace_id"], "thumbs", False)
    assert monitor.flush(timeout=30)
    wait_drained(redis_url, worker)
    monitor.feedback(complained["trace_id"], "thumbs", False, author="another user")  # more complaints, later
    assert monitor.flush(timeout=30)
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    # complained and twice: once by each feedback-sampling monitor; the ones half-sampled anyway: once by
    # complaints (for the feedback) and once by complaints-half (its ordinary sample, not again); praised: never.
    assert scorings(judge, [*anyway, *skipped]) == {
        **{t["trace_id"]: 2 for t in anyway}, complained["trace_id"]: 2, twice["trace_id"]: 2,
        praised["trace_id"]: 0}
    store = connect(worker.dsn)
    scored = {complained["trace_id"], twice["trace_id"]} | {t["trace_id"] for t in anyway}
    assert scores_per_trace(store, "complaints") == dict.fromkeys(scored, 1)
    assert scores_per_trace(store, "complaints-half") == dict.fromkeys(scored, 1)


def test_another_projects_negative_feedback_on_the_same_trace_id_costs_the_turn_no_rescore(
        redis_url, worker, monitor, judge, tmp_path):
    """Trace ids are a project's own: a complaint sent under project bank about acme's turn's trace id leaves acme's
    turn unscored by the feedback monitors (before and after the turn arrives); acme's own complaint scores it."""
    _, (after, before) = _turns_by_half_sampling(2)
    other = Monitor(redis_url, project="bank", agent="support-bot", spool_path=tmp_path / "bank.jsonl",
                    flush_interval=0.05)
    try:
        worker.start()
        other.feedback(before["trace_id"], "thumbs", False)  # before acme's turn arrives
        assert other.flush(timeout=30)
        wait_drained(redis_url, worker)
        capture(monitor, after)
        capture(monitor, before)
        assert monitor.flush(timeout=30)
        wait_drained(redis_url, worker)
        other.feedback(after["trace_id"], "thumbs", False)  # after it is stored
        assert other.flush(timeout=30)
        wait_drained(redis_url, worker)
        foreign = scorings(judge, [after, before])
        monitor.feedback(after["trace_id"], "thumbs", False)
        assert monitor.flush(timeout=30)
        wait_drained(redis_url, worker)
        assert worker.stop() == 0
    finally:
        other.shutdown(timeout=10)

    assert foreign == {after["trace_id"]: 0, before["trace_id"]: 0}
    assert scorings(judge, [after, before]) == {after["trace_id"]: 2, before["trace_id"]: 0}  # each monitor once


def test_negative_feedback_before_its_turn_arrives_scores_the_turn_exactly_once(redis_url, worker, monitor, judge):
    _, (early, late_praised) = _turns_by_half_sampling(2)
    worker.start()
    monitor.feedback(early["trace_id"], "thumbs", False)
    monitor.feedback(late_praised["trace_id"], "thumbs", True)
    assert monitor.flush(timeout=30)
    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 60
    while not client.exists(negative_key("acme", early["trace_id"])):  # the worker has taken the feedback in
        assert time.monotonic() < deadline, worker.output()[-3000:]
        time.sleep(0.05)

    capture(monitor, early)
    capture(monitor, late_praised)
    assert monitor.flush(timeout=30)
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    assert scorings(judge, [early, late_praised]) == {early["trace_id"]: 2, late_praised["trace_id"]: 0}
    store = connect(worker.dsn)
    assert scores_per_trace(store, "complaints") == {early["trace_id"]: 1}
    assert scores_per_trace(store, "complaints-half") == {early["trace_id"]: 1}
    funnel = dict(store.query("SELECT stage, count FROM pipeline_counters WHERE monitor = 'complaints'").result_rows)
    assert funnel["sampled"] == funnel["scored"] == 1


def test_a_monitors_filters_still_apply_to_the_turns_it_scores_for_feedback(redis_url, worker, monitor, judge):
    turn = make_turn(0, agent="travel-assistant")  # complaints-half looks at support-bot only
    worker.start()
    capture(monitor, turn)
    assert monitor.flush(timeout=30)
    wait_drained(redis_url, worker)
    monitor.feedback(turn["trace_id"], "thumbs", False)
    assert monitor.flush(timeout=30)
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    assert scores_per_trace(store, "complaints") == {turn["trace_id"]: 1}
    assert scores_per_trace(store, "complaints-half") == {}
    assert scorings(judge, [turn]) == {turn["trace_id"]: 1}


def test_a_feedback_item_the_worker_cannot_read_is_dead_lettered_naming_the_field_and_the_rest_go_on(
        redis_url, worker):
    good = {"feedback": {"trace_id": "t-good", "name": "thumbs", "value": 1}}
    send(redis_url, [{"feedback": {"trace_id": "t-bad", "name": "thumbs", "value": 9}}, good,
                     {"feedback": "not an object"}])
    worker.start()
    wait_drained(redis_url, worker)
    assert worker.stop() == 0

    store = connect(worker.dsn)
    dead = sorted(store.query("SELECT error_type, reason FROM dead_letters FINAL").result_rows)
    assert [error for error, _ in dead] == ["invalid_feedback", "invalid_feedback"]
    assert any(reason.startswith("feedback: value:") and "0..1" in reason for _, reason in dead)
    assert store.query("SELECT trace_id FROM feedback FINAL").result_rows == [("t-good",)]
