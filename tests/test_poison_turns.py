"""Turns vigil cannot take, on real parts: each is a dead letter with its reason and the good turns in the same
batch are kept; what it can take (a newer SDK's extra field, a large valid turn, a judge's garbled answer) it takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
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


# The three batches below, each its own message on the ingest queue, taken by one worker run: a batch is validated
# turn by turn, so what one holds decides nothing of another's, and each test reads only its own batch's rows.
DEEP = {**make_turn(99), "metadata": {"m": nested(600)}}
GOOD = [make_turn(i) for i in range(9)]
LARGE = {**make_turn(1), "contexts": [{"text": f"passage {i:05d}"} for i in range(60_000)]}
NEWER = {**make_turn(1), "schema_version": WIRE_VERSION + 1, "sentiment": {"model": "vigil-py 9"},
         "input": [{"role": "user", "content": "Where is my order?", "name": "alice"}]}
CURRENT = {**make_turn(2), "schema_version": WIRE_VERSION, "sentiment": "this version knows no such field"}


@pytest.fixture(scope="module")
def taken(redis_server, tmp_path_factory):
    """The batches sent, then a real `vigil worker` run until they are drained and stopped: (scored trace ids,
    dead letters as (reason, payload))."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    for batch in ([*GOOD[:4], DEEP, *GOOD[4:]], [LARGE], [NEWER, CURRENT]):
        send(redis_server.url, batch)
    worker = run_worker(redis_server.url, tmp_path_factory.mktemp("poison-turns") / "vigil")
    return scored(worker), dead(worker)


def of(batch: list[dict], taken: tuple[set[str], list[tuple[str, str]]]) -> tuple[set[str], list[tuple[str, str]]]:
    """What the worker scored and dead-lettered of ``batch``'s turns (a dead letter names its turn's trace id)."""
    ids = {turn["trace_id"] for turn in batch}
    scored_ids, letters = taken
    return scored_ids & ids, [(reason, payload) for reason, payload in letters if any(i in payload for i in ids)]


def test_a_turn_nested_too_deeply_is_dead_lettered_and_the_good_turns_of_its_batch_are_scored(taken):
    """Metadata nested 600 deep used to raise RecursionError in validation and lose the whole batch."""
    scored_ids, [(reason, payload)] = of([*GOOD, DEEP], taken)
    assert scored_ids == {t["trace_id"] for t in GOOD}
    assert "nested too deeply" in reason and DEEP["trace_id"] in payload


def test_a_valid_turn_near_the_size_limit_is_scored_as_it_came_not_re_serialised_with_defaults(taken):
    """60,000 short contexts: 1.6 MB as sent, over 2 MB once every default (id, score) is written out."""
    assert len(json.dumps(LARGE)) < MAX_PAYLOAD_BYTES
    as_defaults = json.dumps(Turn.model_validate(LARGE).model_dump(mode="json"))
    assert len(as_defaults) > MAX_PAYLOAD_BYTES, "the case must be one a re-serialised turn would fail"
    assert of([LARGE], taken) == ({LARGE["trace_id"]}, [])


def test_a_turn_from_a_newer_contract_is_taken_with_its_unknown_fields_ignored(taken):
    scored_ids, [(reason, _)] = of([NEWER, CURRENT], taken)
    assert scored_ids == {NEWER["trace_id"]}
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
