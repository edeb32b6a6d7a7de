"""While a judge is paused, its work waits in Redis (parked per judge), not in a worker's memory as countdown
tasks; once the judge may be called again, every parked turn is scored once. A real `vigil worker`, a real Redis,
the scripted judge answering 401 until its key is fixed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import redis
from vigil.worker.judge.pause import PAUSED_KEY
from vigil.worker.pipeline.app import app, configure
from vigil.worker.store import connect

from tests.judge_server import ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained
from tests.test_pipeline_judge import config_for, judge_replies

TURNS, BATCH, CONCURRENCY = 120, 20, 4


def held_by_workers(redis_url: str) -> tuple[int, int]:
    """Tasks the worker holds in memory: (scheduled for later, reserved), from Celery's remote control. The test
    starts one worker, so each query returns with its reply (``limit=1``) instead of waiting out the timeout for
    workers that do not exist (5 s each)."""
    configure(redis_url)
    inspect = app.control.inspect(timeout=5, limit=1)
    scheduled, reserved = inspect.scheduled(), inspect.reserved()
    assert scheduled is not None and reserved is not None, "no worker answered"
    return sum(map(len, scheduled.values())), sum(map(len, reserved.values()))


def wait_for(condition, worker: WorkerProcess, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}:\n{worker.output()[-3000:]}"
        time.sleep(0.1)


def test_a_paused_judges_work_waits_in_redis_not_in_worker_memory_and_is_all_scored_after_resume(redis_url, tmp_path):
    """Given a judge paused by a 401, when 120 turns arrive, then they wait parked in Redis: the worker holds no
    scheduled (countdown) task and at most one reserved task per thread, and the judge is not called again; after
    the key is fixed and `vigil judge resume` runs, every turn is scored exactly once."""
    authorised = {"yes": False}
    config = tmp_path / "vigil.yaml"
    client = redis.Redis.from_url(redis_url)
    turns = [make_turn(i) for i in range(TURNS)]
    with ScriptedJudge(judge_replies(authorised)) as server:
        config_for(server, config)
        worker = WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_PAUSED_RETRY="0.5",
                               VIGIL_TEST_JUDGE_KEY="k").start("-c", str(CONCURRENCY))
        try:
            send(redis_url, turns[:1])
            wait_for(lambda: client.hexists(PAUSED_KEY, "llm"), worker, "the judge was never paused")
            for i in range(1, TURNS, BATCH):
                send(redis_url, turns[i:i + BATCH])
            wait_for(lambda: client.llen("vigil.parked.llm") == TURNS, worker, "not every turn was parked")
            calls = len(server.requests)
            scheduled, reserved = held_by_workers(redis_url)
            assert scheduled == 0 and reserved <= CONCURRENCY
            assert len(server.requests) == calls <= CONCURRENCY, "a paused judge is not called"

            authorised["yes"] = True
            env = {**os.environ, "REDIS_URL": redis_url}
            subprocess.run([sys.executable, "-m", "vigil.worker", "judge", "resume", "llm"], env=env, check=True,
                           capture_output=True)
            wait_drained(redis_url, worker)
        finally:
            assert worker.stop() == 0

    rows = connect(worker.dsn).query("SELECT trace_id, status, count() FROM scores GROUP BY trace_id, status")
    assert sorted(r[0] for r in rows.result_rows) == sorted(t["trace_id"] for t in turns)
    assert {(r[1], r[2]) for r in rows.result_rows} == {("scored", 1)}
