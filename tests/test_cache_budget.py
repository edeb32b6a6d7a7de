"""The judge reply cache has its own budget and never competes with the broker, on real parts: real redis-servers
(the broker started with ``--maxmemory`` and ``noeviction``, as production runs it), the real judge transport and
the scripted judge server. Replies used to be kept in the broker's Redis with a TTL only, so a busy cache made a full
broker refuse turns."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from vigil.schemas import JudgeConfig
from vigil.schemas.broker import INGEST_QUEUE
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.judge import cache as reply_cache
from vigil.worker.judge.transport import JudgeTransport
from vigil.worker.settings import get_settings

from tests.judge_server import Reply
from tests.pipeline import make_turn, ship

REPLY_CHARS = 40_000  # a long reply (the reason of a judge that explains at length)
CACHE_BUDGET = 400_000  # bytes: room for about nine such replies
REQUESTS = 150  # 6 MB of replies: more than the broker's headroom and fifteen times the cache's budget


@pytest.fixture
def full_broker():
    with EmbeddedRedis(options=("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")) as server:
        yield server


@pytest.fixture
def settings_env(monkeypatch):
    """Set vigil's environment for the code under test (its settings are read once per process)."""
    def apply(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        reply_cache.local_cache.cache_clear()

    monkeypatch.delenv("VIGIL_CACHE_URL", raising=False)
    yield apply
    get_settings.cache_clear()
    reply_cache.local_cache.cache_clear()


def long_replies(judge_server) -> None:
    judge_server.script = lambda body: Reply('{"verdict": "' + "y" * REPLY_CHARS + '"}', prompt_tokens=9)


def question(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Question {i}: is the sky blue?"}]


def config(judge_server) -> JudgeConfig:
    return JudgeConfig(name="judge", base_url=judge_server.base_url, model="m", cache_ttl_s=3600)


async def test_filling_the_cache_past_its_budget_never_makes_a_full_broker_refuse_a_turn(
        judge_server, full_broker, settings_env):
    settings_env(VIGIL_CACHE_MAX_BYTES=str(CACHE_BUDGET))  # VIGIL_CACHE_URL unset: the in-process cache
    long_replies(judge_server)
    broker = redis.Redis.from_url(full_broker.url)
    headroom = int(broker.config_get("maxmemory")["maxmemory"]) - broker.info("memory")["used_memory"]
    assert REQUESTS * REPLY_CHARS > headroom  # the replies would not fit in the broker
    client = AsyncRedis.from_url(full_broker.url)
    transport = JudgeTransport(config(judge_server), redis=client)  # the transport has the broker (limiter, pauses)
    try:
        for i in range(REQUESTS):
            await transport.chat(step="s", messages=question(i))

        ship(full_broker.url, [make_turn(1)])  # the broker still takes turns
        assert broker.llen(INGEST_QUEUE) == 1
        assert broker.keys("vigil:judge:reply:*") == []
        local = reply_cache.local_cache()
        assert 0 < local.bytes <= CACHE_BUDGET

        asked = len(judge_server.requests)
        latest = await transport.chat(step="s", messages=question(REQUESTS - 1))
        assert [c.cached for c in latest.calls] == [True] and len(judge_server.requests) == asked
        oldest = await transport.chat(step="s", messages=question(0))  # evicted, least recently used first
        assert [c.cached for c in oldest.calls] == [False] and len(judge_server.requests) == asked + 1
    finally:
        await transport.aclose()
        await client.aclose()


async def test_with_a_cache_url_workers_share_replies_in_that_redis_with_their_ttl_and_none_in_the_broker(
        judge_server, full_broker, settings_env):
    long_replies(judge_server)
    with EmbeddedRedis(options=("--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")) as cache_server:
        settings_env(VIGIL_CACHE_URL=cache_server.url)
        client = AsyncRedis.from_url(full_broker.url)
        one, other = (JudgeTransport(config(judge_server), redis=client) for _ in range(2))  # two workers
        try:
            for i in range(REQUESTS):
                await one.chat(step="s", messages=question(i))
            shared = await other.chat(step="s", messages=question(REQUESTS - 1))
            assert [c.cached for c in shared.calls] == [True]
            assert len(judge_server.requests) == REQUESTS

            cache = redis.Redis.from_url(cache_server.url)
            keys = cache.keys("vigil:judge:reply:*")
            assert 0 < len(keys) < REQUESTS  # the cache's own Redis evicted, within its own maxmemory
            assert all(0 < cache.ttl(key) <= 3600 for key in keys)
            broker = redis.Redis.from_url(full_broker.url)
            assert broker.keys("vigil:judge:reply:*") == []
            ship(full_broker.url, [make_turn(2)])
            assert broker.llen(INGEST_QUEUE) == 1
        finally:
            for transport in (one, other):
                await transport.aclose()
            await client.aclose()


async def test_a_cache_redis_that_refuses_writes_costs_a_miss_never_a_judge_call(judge_server, settings_env):
    long_replies(judge_server)
    with EmbeddedRedis(options=("--maxmemory-policy", "noeviction")) as cache_server:
        redis.Redis.from_url(cache_server.url).config_set("maxmemory", 1)  # every write refused (OOM)
        settings_env(VIGIL_CACHE_URL=cache_server.url)
        transport = JudgeTransport(config(judge_server))
        try:
            first = await transport.chat(step="s", messages=question(1))
            again = await transport.chat(step="s", messages=question(1))
        finally:
            await transport.aclose()
    assert [c.status for c in first.calls + again.calls] == ["ok", "ok"]
    assert len(judge_server.requests) == 2


@pytest.mark.parametrize(("options", "complaint"), [
    (("--maxmemory", "2mb", "--maxmemory-policy", "noeviction"), "does not evict"),
    ((), "no maxmemory"),
    (("--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"), None),
], ids=["refuses when full", "unbounded", "bounded and evicting"])
def test_a_cache_redis_that_would_refuse_writes_or_grow_without_bound_is_named_at_start(options, complaint,
                                                                                       full_broker):
    with EmbeddedRedis(options=options) as cache_server:
        problem = reply_cache.cache_redis_problem(redis.Redis.from_url(cache_server.url),
                                                  redis.Redis.from_url(full_broker.url))
    assert (problem is None) if complaint is None else (complaint in problem)


def test_a_cache_url_naming_the_broker_itself_is_named_at_start(full_broker):
    other_db = full_broker.url.rsplit("/", 1)[0] + "/1"  # another database, the same server and memory
    problem = reply_cache.cache_redis_problem(redis.Redis.from_url(other_db), redis.Redis.from_url(full_broker.url))
    assert problem is not None and "the broker's Redis server" in problem
