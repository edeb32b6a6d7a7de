"""A judge's `429 Retry-After: 86400` must not hold every worker for a day: Retry-After is capped at
MAX_RETRY_AFTER_S, and `vigil judge resume` lifts a hold as it lifts a pause. Real Redis, real transport, the
scripted judge."""

from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner
from redis.asyncio import Redis
from vigil.schemas import JudgeConfig
from vigil.worker.cli import main
from vigil.worker.judge.limiter import MAX_RETRY_AFTER_S, RateLimits, RedisRateBackend
from vigil.worker.judge.transport import JudgeTransport

from tests.judge_server import Reply


@pytest.fixture
async def redis(redis_url):
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


def limiter(redis: Redis) -> RedisRateBackend:
    return RedisRateBackend(redis, "judge", RateLimits(rpm=600, guard_s=0.0))


async def test_a_day_long_retry_after_holds_the_judge_for_at_most_the_cap(redis):
    await limiter(redis).penalize(retry_after=86_400.0)
    decision = await limiter(redis).acquire("m", 0)
    assert not decision.granted
    assert MAX_RETRY_AFTER_S <= decision.wait_s < MAX_RETRY_AFTER_S + 2


async def test_a_429_with_a_day_long_retry_after_from_the_judge_is_retried_after_the_cap(judge_server, redis):
    """Through the transport (no rate limit configured, so no shared hold): the call is retried after the cap, not
    after a day. The transport's sleep is injected, so the test waits for nothing."""
    judge_server.replies.extend([Reply.error(429, "come back tomorrow", headers={"Retry-After": "86400"}),
                                 Reply(content="fine")])
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    config = JudgeConfig(name="judge", base_url=judge_server.base_url, model="m", rpm=None, max_retry_age_s=120)
    transport = JudgeTransport(config, redis=redis, sleep=sleep, rand=lambda: 0.0)
    try:
        result = await asyncio.wait_for(transport._send("step", [{"role": "user", "content": "q"}], None, "m"), 5)
    except TimeoutError:
        pytest.fail("the call waited on the day-long hold")
    finally:
        await transport.aclose()
    assert result.text == "fine"
    assert slept and max(slept) == MAX_RETRY_AFTER_S


def test_vigil_judge_resume_lifts_a_hold_for_every_worker(redis_url):
    async def hold() -> None:
        client = Redis.from_url(redis_url)
        await limiter(client).penalize(retry_after=30.0)
        await client.aclose()

    async def wait_now() -> float:
        client = Redis.from_url(redis_url)
        try:
            return (await limiter(client).acquire("m", 0)).wait_s
        finally:
            await client.aclose()

    asyncio.run(hold())
    result = CliRunner().invoke(main, ["judge", "resume", "judge"], env={"REDIS_URL": redis_url})
    assert result.exit_code == 0, result.output
    assert "resumed" in result.output
    assert asyncio.run(wait_now()) < 1.0  # at most one token's refill (0.1 s at 600 rpm), not the 30 s hold
