"""A sampled turn's text is in Redis once while its score waits (the score task carries a reference), and gone
once it is scored. A real `vigil worker` (first consuming only ingest, so score tasks wait; then scoring), a real
Redis, the scripted judge."""

from __future__ import annotations

import base64
import json
import time
import uuid

import redis
import yaml
from vigil.worker.pipeline.app import INGEST_QUEUE, SCORE_QUEUE
from vigil.worker.pipeline.backlog import backlog
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

TURNS = 12


def judge(body: dict) -> Reply:
    step = body["response_format"]["json_schema"]["name"]
    return Reply.json({"statements": ["Returns are accepted."]} if step.endswith("preprocess")
                      else {"results": [{"result": "yes", "reason": "on topic"}]})


def count_in(value: str, marker: str) -> int:
    """Occurrences of ``marker`` in a Redis value, looking inside JSON and kombu's base64 message bodies too."""
    found = value.count(marker)
    try:
        decoded = json.loads(value)
    except ValueError:
        return found
    items = decoded if isinstance(decoded, list) else [decoded]
    for item in items:
        if isinstance(item, str):
            found += count_in(item, marker) - item.count(marker)  # what only its decoding reveals
        elif isinstance(item, dict) and isinstance(item.get("body"), str) and \
                item.get("properties", {}).get("body_encoding") == "base64":
            found += base64.b64decode(item["body"]).decode("utf-8", "replace").count(marker)
    return found


def copies(client: redis.Redis, marker: str) -> int:
    """How many times ``marker`` sits anywhere in Redis."""
    total = 0
    for key in client.scan_iter():
        kind = client.type(key).decode()
        values = {"string": lambda k: [client.get(k)], "hash": client.hvals, "set": client.smembers,
                  "list": lambda k: client.lrange(k, 0, -1), "zset": lambda k: client.zrange(k, 0, -1)}[kind](key)
        total += sum(count_in(v.decode("utf-8", "replace"), marker) for v in values if v is not None)
    return total


def test_a_waiting_turns_text_is_in_redis_once_and_gone_after_it_is_scored(redis_url, tmp_path):
    """Given score tasks waiting (the worker consumes only ingest), each turn's text is in Redis exactly once (not
    in the score message nor the delivery journal); after a worker scores them, none is left."""
    client = redis.Redis.from_url(redis_url)
    config = tmp_path / "vigil.yaml"
    turns = [{**make_turn(i), "output": f"Returns within 30 days. marker-{uuid.uuid4().hex}"} for i in range(TURNS)]
    markers = [t["output"].rsplit(" ", 1)[1] for t in turns]
    with ScriptedJudge(judge) as server:
        config.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "m",
                        "api_key_env": "VIGIL_TEST_JUDGE_KEY", "rpm": 60000}],
            "monitors": [{"name": "a", "scorer": "answer_relevancy", "judge": "llm", "reason": "template"},
                         {"name": "b", "scorer": "answer_relevancy", "judge": "llm", "reason": "template"}]}))
        send(redis_url, turns)
        ingest_only = WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_TEST_JUDGE_KEY="k").start(
            "-Q", INGEST_QUEUE)
        try:
            deadline = time.monotonic() + 120
            while (now := backlog(client))[SCORE_QUEUE] < TURNS or any(
                    now[k] for k in (INGEST_QUEUE, "vigil.write", "writing", "unacked")):
                assert time.monotonic() < deadline, f"{now}\n{ingest_only.output()[-3000:]}"
                time.sleep(0.1)
            waiting = [copies(client, m) for m in markers]
        finally:
            assert ingest_only.stop() == 0
        worker = WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_TEST_JUDGE_KEY="k").start()
        try:
            wait_drained(redis_url, worker)
            after = [copies(client, m) for m in markers]
        finally:
            assert worker.stop() == 0

    assert waiting == [1] * TURNS
    assert after == [0] * TURNS
    scored = connect(worker.dsn).query("SELECT count() FROM scores FINAL WHERE status = 'scored'").result_rows[0][0]
    assert scored == 2 * TURNS


def test_the_stored_turn_stays_while_any_task_holds_it_and_then_leaves_nothing_but_is_known_done(redis_url):
    from vigil.worker.pipeline import turn_store

    client = redis.Redis.from_url(redis_url)
    pipe = client.pipeline()
    turn_id, first = turn_store.store(pipe, {"output": "kept"}, ttl_s=60)
    pipe.execute()
    parked = turn_store.add_holders(client, turn_id, 2)  # the task parks two monitors' work for two judges

    assert not turn_store.release(client, turn_id, first)
    assert not turn_store.release(client, turn_id, parked[0])
    assert turn_store.fetch(client, turn_id, ttl_s=60) == {"output": "kept"}
    assert turn_store.release(client, turn_id, parked[1])
    assert not client.exists(f"vigil:turn:{turn_id}")  # no tombstone: a flood of turns leaves nothing once scored
    assert turn_store.fetch(client, turn_id, ttl_s=60) == turn_store.DONE  # a redelivery goes quietly
    assert turn_store.fetch(client, turn_id, ttl_s=60, now=time.time() + 61) == turn_store.EXPIRED
    assert not turn_store.release(client, turn_id, parked[1])  # a redelivery lets go again: no-op
    assert turn_store.fetch(client, uuid.uuid4().hex, ttl_s=60) == turn_store.EXPIRED  # not an id of this store
    assert turn_store.add_holders(client, "gone", 1) and not client.exists("vigil:turn:gone")  # never recreated


def test_a_score_task_whose_stored_turn_expired_is_dead_lettered_naming_the_ttl(redis_url, tmp_path):
    from vigil.worker.pipeline.app import app, configure

    config = tmp_path / "vigil.yaml"
    config.write_text(yaml.safe_dump({"judges": [{"name": "base", "kind": "baseline"}],
                                      "monitors": [{"name": "a", "scorer": "answer_relevancy", "judge": "base"}]}))
    configure(redis_url)
    app.send_task("vigil.score", args=[None, ["a"], None, [uuid.uuid4().hex, "holder"]], queue=SCORE_QUEUE)
    worker = WorkerProcess(redis_url, tmp_path / "vigil", config).start()
    try:
        wait_drained(redis_url, worker)
    finally:
        assert worker.stop() == 0
    rows = connect(worker.dsn).query("SELECT error_type, reason FROM dead_letters FINAL").result_rows
    assert [(error_type, "VIGIL_TURN_TTL" in reason) for error_type, reason in rows] == [("turn_expired", True)]
