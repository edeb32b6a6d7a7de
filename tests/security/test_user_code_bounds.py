"""Users' code cannot stall a worker: a regex check given an answer chosen to make a backtracking engine run for ever,
a burst of turns on a Python scorer with four threads, and Python scorers (``isolation: process``) that hold the GIL
or allocate without end. A real `vigil worker` scores one hostile turn and 40 ordinary ones: every turn gets every
monitor's result, the hostile one's bad scorers fail at their limits with reasons naming them, the rest are scored."""

from __future__ import annotations

import pytest
import yaml
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

HOSTILE = "a" * 40 + "b HOLD EAT"  # 2^40 ways for (a+)+$ to fail on a backtracking engine; HOLD, EAT: see below
FN = "tests.user_scorer_functions:"
SCORERS = [
    {"name": "no_runs", "kind": "regex", "pattern": "(a+)+$", "match": "must_not"},
    {"name": "quick", "kind": "python", "function": FN + "hangs", "params": {"seconds": 0.05}},  # 4 threads
    {"name": "gil", "kind": "python", "function": FN + "holds_the_gil", "isolation": "process", "timeout_s": 3,
     "concurrency": 2},
    {"name": "hungry", "kind": "python", "function": FN + "eats_memory", "isolation": "process", "memory_mb": 256,
     "timeout_s": 60, "concurrency": 2},
]


@pytest.fixture(scope="module")
def scores(redis_server, tmp_path_factory) -> dict[str, dict[str, tuple[str, float | None, str, str]]]:
    home = tmp_path_factory.mktemp("user-code")
    config = home / "vigil.yaml"
    config.write_text(yaml.safe_dump({"scorers": SCORERS, "monitors": [
        {"name": s["name"], "scorer": s["name"]} for s in SCORERS]}))
    hostile = {**make_turn(0), "output": HOSTILE}
    turns = [hostile] + [make_turn(i) for i in range(1, 41)]
    send(redis_server.url, turns)  # one batch: 41 score tasks at once
    worker = WorkerProcess(redis_server.url, home / "vigil", config).start()
    try:
        wait_drained(redis_server.url, worker, timeout=300)
    finally:
        assert worker.stop() == 0
    store = connect(worker.dsn)
    rows = store.query("SELECT trace_id, monitor, status, score, error_type, reason FROM scores FINAL").result_rows
    store.close()
    by_trace: dict[str, dict[str, tuple]] = {}
    for trace, monitor, status, score, error_type, reason in rows:
        by_trace.setdefault("hostile" if trace == hostile["trace_id"] else trace, {})[monitor] = (
            status, score, error_type, reason)
    return by_trace


def test_every_turn_gets_every_monitors_result(scores):
    assert len(scores) == 41
    assert all(set(monitors) == {s["name"] for s in SCORERS} for monitors in scores.values())


def test_the_ordinary_turns_are_all_scored_through_a_burst_on_four_threads(scores):
    ordinary = [monitors for trace, monitors in scores.items() if trace != "hostile"]
    assert {monitors[name][:3] for monitors in ordinary for name in monitors} == {("scored", 1.0, "")}


def test_the_regex_answers_a_backtracking_bomb_at_once(scores):
    assert scores["hostile"]["no_runs"][:2] == ("scored", 1.0)


def test_a_scorer_holding_the_gil_is_killed_at_its_limit(scores):
    assert scores["hostile"]["gil"] == (
        "failed", None, "timeout",
        f"{FN}holds_the_gil did not return within 3 s: its process was killed (timeout_s)")


def test_a_scorer_allocating_without_end_is_stopped_at_its_memory_limit(scores):
    assert scores["hostile"]["hungry"] == (
        "failed", None, "memory", f"{FN}eats_memory ran out of memory: over its 256 MB (memory_mb)")
