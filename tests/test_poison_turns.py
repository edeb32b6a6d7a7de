"""Turns vigil cannot take, on real parts: each is a dead letter with its reason and the good turns in the same
batch are kept; what it can take (a newer SDK's extra field, a large valid turn, a judge's garbled answer) it takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from vigil.schemas import Turn
from vigil.schemas.trace import MAX_PAYLOAD_BYTES, WIRE_VERSION
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def run_worker(redis_url: str, home: Path, config: Path = CONFIG, **env: str) -> WorkerProcess:
    worker = WorkerProcess(redis_url, home, config, **env).start()
    try:
        wait_drained(redis_url, worker)
    finally:
        assert worker.stop() == 0
    return worker


def nested(depth: int) -> dict:
    value: dict = {"leaf": "x"}
    for _ in range(depth):
        value = {"k": value}
    return value


def scored(worker: WorkerProcess) -> set[str]:
    rows = connect(worker.dsn).query("SELECT trace_id FROM scores FINAL WHERE monitor = 'relevancy'").result_rows
    return {r[0] for r in rows}


def dead(worker: WorkerProcess) -> list[tuple[str, str]]:
    return connect(worker.dsn).query("SELECT reason, payload FROM dead_letters FINAL").result_rows


def test_a_turn_nested_too_deeply_is_dead_lettered_and_the_good_turns_of_its_batch_are_scored(redis_url, tmp_path):
    """Metadata nested 600 deep used to raise RecursionError in validation and lose the whole batch."""
    good = [make_turn(i) for i in range(9)]
    deep = {**make_turn(99), "metadata": {"m": nested(600)}}
    send(redis_url, [*good[:4], deep, *good[4:]])
    worker = run_worker(redis_url, tmp_path / "vigil")
    assert scored(worker) == {t["trace_id"] for t in good}
    [(reason, payload)] = dead(worker)
    assert "nested too deeply" in reason and deep["trace_id"] in payload


def test_a_valid_turn_near_the_size_limit_is_scored_as_it_came_not_re_serialised_with_defaults(redis_url, tmp_path):
    """60,000 short contexts: 1.6 MB as sent, over 2 MB once every default (id, score) is written out."""
    turn = {**make_turn(1), "contexts": [{"text": f"passage {i:05d}"} for i in range(60_000)]}
    assert len(json.dumps(turn)) < MAX_PAYLOAD_BYTES
    as_defaults = json.dumps(Turn.model_validate(turn).model_dump(mode="json"))
    assert len(as_defaults) > MAX_PAYLOAD_BYTES, "the case must be one a re-serialised turn would fail"
    send(redis_url, [turn])
    worker = run_worker(redis_url, tmp_path / "vigil")
    assert dead(worker) == []
    assert scored(worker) == {turn["trace_id"]}


def test_a_turn_from_a_newer_contract_is_taken_with_its_unknown_fields_ignored(redis_url, tmp_path):
    newer = {**make_turn(1), "schema_version": WIRE_VERSION + 1, "sentiment": {"model": "vigil-py 9"},
             "input": [{"role": "user", "content": "Where is my order?", "name": "alice"}]}
    current = {**make_turn(2), "schema_version": WIRE_VERSION, "sentiment": "this version knows no such field"}
    send(redis_url, [newer, current])
    worker = run_worker(redis_url, tmp_path / "vigil")
    assert scored(worker) == {newer["trace_id"]}
    [(reason, _)] = dead(worker)
    assert "sentiment: Extra inputs are not permitted" in reason


def test_a_judge_answering_200_with_a_body_that_is_not_json_gives_a_failed_score_and_its_judge_call(
        redis_url, tmp_path):
    with ScriptedJudge(lambda body: Reply(body="<html>upstream hiccup</html>")) as server:
        config = tmp_path / "vigil.yaml"
        config.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "judge-model"}],
            "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm"}],
        }))
        turn = make_turn(1)
        send(redis_url, [turn])
        worker = run_worker(redis_url, tmp_path / "vigil", config)
    store = connect(worker.dsn)
    [(status, error_type)] = store.query("SELECT status, error_type FROM scores FINAL").result_rows
    assert (status, error_type) == ("failed", "bad_response")
    calls = store.query("SELECT status FROM judge_calls FINAL").result_rows
    assert calls and {c[0] for c in calls} == {"bad_response"}
    assert "scorer raised" not in worker.output()


@pytest.mark.parametrize("version", [0, -1, "2", True])
def test_a_schema_version_that_is_not_a_positive_integer_is_refused_naming_it(version):
    with pytest.raises(ValueError, match="schema_version"):
        Turn.model_validate({**make_turn(1), "schema_version": version, "sentiment": "x"})
