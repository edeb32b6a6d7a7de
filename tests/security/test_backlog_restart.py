"""A worker restarted under a backlog: hundreds of score tasks wait when it starts, its 100 threads take them at once,
and every one of them asks Redis for something (the judge's rate limit, its pause flag, the reply cache, the write
queue). A connection pool that raises when all its connections are out turned that moment into ``failed`` scores
(``MaxConnectionsError: Too many connections``); pools wait for a free connection instead, and a score that fails for
a reason of vigil's own is tried again, never recorded as the turn's failure."""

from __future__ import annotations

import redis
import yaml
from vigil.schemas.broker import INGEST_QUEUE, SCORE_QUEUE
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained, wait_while_alive

BACKLOG = 500
MONITORS = ("cites", "cites_again")  # each turn's monitors score concurrently: two calls per task


def test_a_worker_restarted_under_a_backlog_of_score_tasks_records_no_failed_score(redis_url, tmp_path):
    """Given 500 score tasks waiting (fanned out by an ingest-only worker, then stopped), when a worker with the
    default 100 threads starts, then every turn gets its scores and none is ``failed``."""
    config = tmp_path / "vigil.yaml"
    client = redis.Redis.from_url(redis_url)
    with ScriptedJudge(lambda body: Reply.json({"reason": "It cites a document.", "verdict": True}, delay=0.2)) \
            as server:
        config.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "judge-model",
                        "api_key_env": "VIGIL_TEST_JUDGE_KEY", "rpm": 600_000}],
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
        worker = WorkerProcess(redis_url, tmp_path / "vigil", config, **env).start()
        try:
            wait_drained(redis_url, worker, timeout=300)
        finally:
            assert worker.stop() == 0

    store = connect(worker.dsn)
    rows = store.query("SELECT status, error_type, count() FROM scores FINAL GROUP BY status, error_type").result_rows
    store.close()
    assert rows == [("scored", "", BACKLOG * len(MONITORS))]
