"""The pipeline with an LLM judge (the scripted OpenAI-compatible server) and a real `vigil worker` process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import redis
import yaml
from vigil.worker.judge.pause import PAUSED_KEY
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

STATEMENTS = {"statements": ["Returns are accepted within 30 days.", "Our office dog is called Biscuit."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers the question"},
                        {"result": "unsure", "reason": "loosely related"}]}


def judge_replies(authorised: dict[str, bool]):
    def script(body: dict) -> Reply:
        if not authorised["yes"]:
            return Reply.error(401, "invalid api key")
        step = body["response_format"]["json_schema"]["name"]
        return Reply.json(STATEMENTS if step.endswith("preprocess") else VERDICTS)
    return script


def config_for(server: ScriptedJudge, path) -> None:
    path.write_text(yaml.safe_dump({
        "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "judge-model",
                    "api_key_env": "VIGIL_TEST_JUDGE_KEY", "rpm": 6000}],
        "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm", "reason": "template"}],
    }))


def test_a_paused_judge_holds_the_work_and_after_resume_every_turn_is_scored_once(redis_url, tmp_path):
    """Given a judge that answers 401, when turns arrive, then nothing fails: the work waits while `vigil judge
    status` shows the pause; after the key is fixed and `vigil judge resume` runs, every turn is scored once."""
    authorised = {"yes": False}
    config = tmp_path / "vigil.yaml"
    client = redis.Redis.from_url(redis_url)
    with ScriptedJudge(judge_replies(authorised)) as server:
        config_for(server, config)
        turns = [make_turn(i) for i in range(10)]
        send(redis_url, turns)
        worker = WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_PAUSED_RETRY="1",
                               VIGIL_TEST_JUDGE_KEY="k").start()
        try:
            deadline = time.monotonic() + 60
            # paused, and every turn's work parked: the calls in flight when the first 401 paused it came back too
            while not (client.hexists(PAUSED_KEY, "llm") and client.llen("vigil.parked.llm") == len(turns)):
                assert time.monotonic() < deadline, worker.output()[-3000:]
                time.sleep(0.1)
            refused = len(server.requests)
            assert {r.status for r in server.requests} == {401} and refused <= len(turns)
            time.sleep(2)  # two paused-retry periods: the waiting work must not reach the judge again
            assert len(server.requests) == refused, "a paused judge is not called"
            assert client.llen("vigil.parked.llm") > 0, "the work waits in Redis, parked for its judge"
            env = {**os.environ, "REDIS_URL": redis_url}
            status = subprocess.run([sys.executable, "-m", "vigil.worker", "judge", "status"], env=env,
                                    capture_output=True, text=True, check=True).stdout
            assert "llm" in status and "401" in status

            authorised["yes"] = True
            subprocess.run([sys.executable, "-m", "vigil.worker", "judge", "resume", "llm"], env=env, check=True,
                           capture_output=True)
            wait_drained(redis_url, worker)
        finally:
            assert worker.stop() == 0

    rows = connect(worker.dsn).query("SELECT trace_id, status, score FROM scores FINAL").result_rows
    assert sorted(r[0] for r in rows) == sorted(t["trace_id"] for t in turns)
    assert {(r[1], r[2]) for r in rows} == {("scored", 0.65)}  # (1 yes + 0.3 · 1 unsure) / 2 statements
