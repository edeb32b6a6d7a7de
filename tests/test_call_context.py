"""One call context from the score task to the judge transport, through the production path: a real `vigil worker`
process, a real Redis, and the scripted OpenAI-compatible judge. Its monitor shares the judge fairly between
monitors; its scorer version keys the reply cache."""

from __future__ import annotations

import time
import uuid

import redis
import yaml
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.scorers.answer_relevancy import AnswerRelevancy
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, send, wait_drained

STATEMENTS = {"statements": ["Parcels ship within two days.", "The warehouse cat is named Miso."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers it"}, {"result": "no", "reason": "off topic"}]}
NEXT_VERSION = str(int(AnswerRelevancy.version) + 1)  # what the next release's Answer Relevancy would carry


def answer_as_answer_relevancy(delay: float = 0.0):
    def script(body: dict) -> Reply:
        step = body["response_format"]["json_schema"]["name"]
        return Reply.json(STATEMENTS if step.endswith("preprocess") else VERDICTS, delay=delay)
    return script


def turn(agent: str, marker: str) -> dict:
    return {"trace_id": uuid.uuid4().hex, "project": "acme", "agent": agent,
            "input": [{"role": "user", "content": f"When does parcel {marker} ship?"}],
            "output": f"Parcel {marker} ships within two days. The warehouse cat is named Miso."}


def write_config(path, server: ScriptedJudge, *, max_concurrency: int = 64) -> None:
    monitor = {"scorer": "answer_relevancy", "judge": "llm", "reason": "template"}
    path.write_text(yaml.safe_dump({
        "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "judge-model",
                    "rpm": 60000, "max_concurrency": max_concurrency, "cache_ttl_s": 3600}],
        "monitors": [{**monitor, "name": "bulk", "filters": {"agents": ["bulk-bot"]}},
                     {**monitor, "name": "vip", "filters": {"agents": ["vip-bot"]}}],
    }))


def test_two_monitors_on_one_judge_share_it_fairly_in_a_real_worker(redis_url, tmp_path):
    """Given one judge that takes one call at a time and a monitor with a backlog of 30 turns, when a second
    monitor's turns arrive, then they are served in alternation with the backlog, not behind it."""
    config = tmp_path / "vigil.yaml"
    # Each call takes 0.2 s, so the backlog outlasts the vip turns' ingest and fan-out by seconds even on a loaded
    # host (at 0.05 s a slow ingest let the backlog drain first, and the test measured the host, not the limiter).
    with ScriptedJudge(answer_as_answer_relevancy(delay=0.2)) as server:
        write_config(config, server, max_concurrency=1)
        worker = WorkerProcess(redis_url, tmp_path / "vigil", config).start()
        try:
            send(redis_url, [turn("bulk-bot", f"B{i}") for i in range(30)])
            deadline = time.monotonic() + 60
            while len(server.requests) < 3:  # the bulk monitor's backlog is queued at the judge
                assert time.monotonic() < deadline, worker.output()[-3000:]
                time.sleep(0.02)
            send(redis_url, [turn("vip-bot", f"V{i}") for i in range(4)])
            wait_drained(redis_url, worker)
        finally:
            assert worker.stop() == 0

    order = ["vip" if "Parcel V" in r.prompt or "parcel V" in r.prompt else "bulk" for r in server.requests]
    first, last = order.index("vip"), len(order) - 1 - order[::-1].index("vip")
    assert order.count("vip") == 8 and order.count("bulk") == 60  # two calls per turn, none lost
    assert last < len(order) - 1 and order[-1] == "bulk", "the backlog was still waiting when vip was done"
    span = order[first:last + 1]
    assert span.count("vip") / len(span) >= 0.4, f"vip waited behind the backlog: {''.join(m[0] for m in order)}"


def test_a_new_scorer_version_is_never_answered_from_the_old_versions_cache(redis_url, tmp_path):
    """Given a turn scored once, when the same scorer version scores it again its judge replies come from the
    cache; when a release with a new scorer version scores it, every call goes to the judge again. The cache is
    a Redis of its own (VIGIL_CACHE_URL), so it outlives each worker process."""
    config = tmp_path / "vigil.yaml"
    scored = turn("vip-bot", "C1")
    with ScriptedJudge(answer_as_answer_relevancy()) as server, EmbeddedRedis(
            options=("--maxmemory", "16mb", "--maxmemory-policy", "allkeys-lru")) as cache_server:
        write_config(config, server)
        sent_after = []
        for home, extra in (("v1", {}), ("v1-again", {}), ("next", {"VIGIL_TEST_ANSWER_RELEVANCY_VERSION": NEXT_VERSION})):
            worker = WorkerProcess(redis_url, tmp_path / home, config, VIGIL_CACHE_URL=cache_server.url, **extra)
            worker.start(module="tests.versioned_worker" if extra else "vigil.worker")
            try:
                # a turn id sent again with the same content is a no-op (vigil.worker.pipeline.ownership): each
                # release here scores the turn as a fresh deployment would, so the id's record goes first
                for key in redis.Redis.from_url(redis_url).scan_iter("vigil.turn.*"):
                    redis.Redis.from_url(redis_url).delete(key)
                send(redis_url, [scored])
                wait_drained(redis_url, worker)
            finally:
                assert worker.stop() == 0
            sent_after.append(len(server.requests))
            calls = connect(worker.dsn).query("SELECT status FROM judge_calls").result_rows
            version = connect(worker.dsn).query("SELECT scorer_version FROM scores").result_rows
            assert len(calls) == 2, worker.output()[-3000:]
            assert {r[0] for r in calls} == ({"cached"} if home == "v1-again" else {"ok"})
            assert version == [(NEXT_VERSION if extra else AnswerRelevancy.version,)]
        assert redis.Redis.from_url(cache_server.url).keys("vigil:judge:reply:*"), "the replies were cached"

    assert sent_after == [2, 2, 4]
    assert not redis.Redis.from_url(redis_url).keys("vigil:judge:reply:*"), "nothing cached in the broker"
