"""A worker restarted under a backlog: its 100 threads take 100 score tasks at once, two monitors each, and all 200
judge calls of the process share one asyncio Redis pool of 100 connections (the judge's pause flag, its last
error). A pool that raised when all its connections were out turned that moment into ``failed`` scores
(``MaxConnectionsError: Too many connections``); pools wait for a free connection instead, and a score that fails for
a reason of vigil's own is tried again, never recorded as the turn's failure.

The moment is made, not hoped for: the judge holds the first call of every monitor until all 200 have arrived, Redis
is paused (``CLIENT PAUSE``, 2 s: shorter than a pool's wait and a client's socket timeout), then the judge refuses
them all at once (``response_format`` not supported), so each of the 200 calls asks Redis for something while no
command is answered: 200 callers on a pool of 100. Before pools waited, 100 scores of 200 were recorded failed every
run."""

from __future__ import annotations

import threading

import redis
import yaml
from vigil.schemas.broker import INGEST_QUEUE, POOL_CONNECTIONS, POOL_WAIT_S, SCORE_QUEUE
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained, wait_while_alive

THREADS = 100  # `vigil worker`'s default --concurrency, and so the size of each of its Redis pools
BACKLOG = THREADS  # every thread takes a task at once
MONITORS = ("cites", "cites_again")  # each turn's monitors score concurrently: two calls per task
PAUSE_S = 2  # Redis answers nothing this long: under a pool's wait (30 s) and redis-py's socket timeout (5 s)
assert PAUSE_S < POOL_WAIT_S and BACKLOG * len(MONITORS) > POOL_CONNECTIONS


def test_a_worker_restarted_under_a_backlog_of_score_tasks_records_no_failed_score(redis_url, tmp_path):
    """Given 100 score tasks of two monitors waiting (fanned out by an ingest-only worker, then stopped), when a
    worker with the default 100 threads starts and its 200 judge calls all need Redis at once, then every turn
    gets its scores and none is ``failed``."""
    config = tmp_path / "vigil.yaml"
    client = redis.Redis.from_url(redis_url)
    first_wave = threading.Event()

    def script(body: dict) -> Reply:
        if body.get("response_format", {}).get("type") == "json_schema":
            return Reply.error(400, "response_format json_schema is not supported", gate=first_wave)
        return Reply.json({"reason": "It cites a document.", "verdict": True})

    with ScriptedJudge(script) as server:
        config.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "judge-model",
                        "api_key_env": "VIGIL_TEST_JUDGE_KEY", "max_concurrency": BACKLOG * len(MONITORS)}],
            "scorers": [{"name": "cites", "kind": "llm_judge", "output": {"type": "boolean"},
                         "prompt": "Answer: {{output}}\nDoes the answer cite a document?"}],
            "monitors": [{"name": name, "scorer": "cites", "judge": "llm"} for name in MONITORS],
        }))
        turns = [make_turn(i) for i in range(BACKLOG)]
        for start in range(0, BACKLOG, 50):
            send(redis_url, turns[start:start + 50])
        env = {"VIGIL_TEST_JUDGE_KEY": "k"}
        fan_out = WorkerProcess(redis_url, tmp_path / "vigil", config, **env).start("-Q", INGEST_QUEUE, "--no-writer")
        try:
            wait_while_alive(fan_out, lambda: client.llen(INGEST_QUEUE) == 0 and client.llen(SCORE_QUEUE) == BACKLOG,
                             f"{BACKLOG} score tasks waiting")
        finally:
            assert fan_out.stop() == 0
        worker = WorkerProcess(redis_url, tmp_path / "vigil", config, **env).start("--concurrency", str(THREADS))
        try:
            wait_while_alive(worker, lambda: len(server.requests) >= BACKLOG * len(MONITORS),
                             f"all {BACKLOG * len(MONITORS)} first judge calls held by the judge")
            client.client_pause(PAUSE_S * 1000, all=True)
            first_wave.set()
            wait_drained(redis_url, worker, timeout=300)
        finally:
            first_wave.set()
            assert worker.stop() == 0

    store = connect(worker.dsn)
    rows = store.query("SELECT status, error_type, count() FROM scores FINAL GROUP BY status, error_type").result_rows
    store.close()
    assert rows == [("scored", "", BACKLOG * len(MONITORS))]
    assert len(server.requests) == 2 * BACKLOG * len(MONITORS)  # each monitor's call refused once, then answered
