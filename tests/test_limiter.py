"""The global judge limiter, against a real Redis: buckets, waits, adaptation, fairness, concurrency.

Bucket arithmetic runs on an injected clock (``RedisRateBackend(clock=...)``), so every wait is exact; the
dispatcher tests run on the real clock with short windows and assert orders and counts, never durations.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.asyncio import Redis
from vigil.worker.judge.limiter import (
    Limiter,
    RateLimits,
    RedisRateBackend,
    limiter_key,
)


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def redis(redis_url):
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


def backend(redis: Redis, clock: Clock | None = None, judge: str = "j", **limits) -> RedisRateBackend:
    return RedisRateBackend(redis, judge, RateLimits(**limits), clock=clock)


async def test_a_full_bucket_grants_its_burst_then_says_exactly_how_long_to_wait(redis):
    clock = Clock()
    limiter = backend(redis, clock, rpm=600, guard_s=0.0, burst=3)  # refills (600-3+1)/60 per second

    decisions = [await limiter.acquire("m", 0) for _ in range(4)]

    assert [d.granted for d in decisions] == [True, True, True, False]
    assert decisions[3].wait_s == pytest.approx(60 / 598)
    clock.now += decisions[3].wait_s
    assert (await limiter.acquire("m", 0)).granted


@pytest.mark.parametrize("rpm, guard_s", [(10, 0.5), (60, 0.5), (600, 0.5), (600, 2.0)], ids=str)
async def test_no_window_holds_more_than_the_limit_even_when_calls_arrive_up_to_guard_late(redis, rpm, guard_s):
    """Given a greedy caller that asks again exactly when told, for five windows,
    when each granted call reaches the server up to ``guard_s`` late,
    then no 60-second window (half-open, as the server counts) holds more than ``rpm`` arrivals."""
    clock, jitter = Clock(), random.Random(7)
    limits = RateLimits(rpm=rpm, guard_s=guard_s)
    limiter = RedisRateBackend(redis, "j", limits, clock=clock)
    arrivals = []
    while clock.now < 1_000_000.0 + 300:
        decision = await limiter.acquire("m", 0)
        if decision.granted:
            arrivals.append(clock.now + jitter.uniform(0, guard_s))
        else:
            clock.now += decision.wait_s
    arrivals.sort()
    most = max(sum(1 for b in arrivals[i:] if b - a < 60.0) for i, a in enumerate(arrivals))
    assert most <= rpm
    assert len(arrivals) >= int(limits.request_capacity + 300 * limits.request_rate)  # and it runs at the limit


async def test_tokens_are_estimated_before_the_call_and_reconciled_after(redis):
    clock = Clock()
    # holds 600 tokens, refills 90 a second
    limiter = backend(redis, clock, rpm=None, tpm=6000, guard_s=0.0, token_burst_fraction=0.1)

    assert (await limiter.acquire("m", 1000)).granted  # a request bigger than the bucket goes into debt
    waiting = await limiter.acquire("m", 100)
    await limiter.reconcile(300 - 1000)  # it used 300 tokens, not the 1000 estimated
    after_refund = await limiter.acquire("m", 100)

    assert not waiting.granted and waiting.wait_s == pytest.approx((100 + 400) / 90)
    assert after_refund.granted


async def bucket_tokens(redis: Redis, judge: str = "j") -> float:
    return float(await redis.hget(limiter_key(judge), "tok"))


async def commands(redis: Redis, name: str) -> int:
    return int((await redis.info("commandstats")).get(f"cmdstat_{name}", {}).get("calls", 0))


async def test_a_call_that_used_fewer_tokens_gives_them_back_with_the_next_acquire_not_a_command_of_its_own(redis):
    """Given a bucket of 600 tokens on a stopped clock, when a call estimated at 500 reports 200 used,
    then the bucket is unchanged until this process acquires again, and that acquire puts the 300 back first."""
    limiter = Limiter(backend(redis, Clock(), rpm=None, tpm=6000, guard_s=0.0, token_burst_fraction=0.1),
                      max_concurrency=4)
    async with limiter.slot("m", 500) as slot:
        pass
    increments = await commands(redis, "hincrbyfloat")

    await slot.reconcile(200)
    owed = await bucket_tokens(redis)
    async with limiter.slot("m", 50):
        pass

    assert owed == 100  # 600 - 500: nothing given back yet
    assert await bucket_tokens(redis) == 100 + 300 - 50
    assert await commands(redis, "hincrbyfloat") == increments


async def test_a_refund_never_fills_the_bucket_past_its_capacity(redis):
    limiter = Limiter(backend(redis, Clock(), rpm=None, tpm=6000, guard_s=0.0, token_burst_fraction=0.1),
                      max_concurrency=4)
    async with limiter.slot("m", 100) as slot:
        await slot.reconcile(0)  # a refusal: all 100 back

    async with limiter.slot("m", 10):
        pass

    assert await bucket_tokens(redis) == 600 - 10


async def test_a_call_that_used_more_tokens_than_estimated_is_charged_at_once(redis):
    limiter = Limiter(backend(redis, Clock(), rpm=None, tpm=6000, guard_s=0.0, token_burst_fraction=0.1),
                      max_concurrency=4)
    async with limiter.slot("m", 100) as slot:
        await slot.reconcile(300)

    assert await bucket_tokens(redis) == 600 - 300  # other workers see it before this process calls again


async def test_a_429_lowers_every_workers_rate_once_per_window_and_it_recovers_gradually(redis):
    clock = Clock()
    worker_a = backend(redis, clock, rpm=60, guard_s=0.0, burst=1, recovery_per_window=0.1, decrease=0.9)
    worker_b = backend(redis, clock, rpm=60, guard_s=0.0, burst=1, recovery_per_window=0.1, decrease=0.9)

    assert await worker_a.penalize() == (pytest.approx(0.9), True)
    assert await worker_b.penalize() == (pytest.approx(0.9), False)  # the same storm: no second cut this window
    refused = await worker_b.acquire("m", 0)  # the 429 also emptied the request bucket
    clock.now += 30
    half_recovered = await worker_b.factor()
    clock.now += 30
    second_cut, _ = await worker_a.penalize()

    assert not refused.granted and refused.wait_s == pytest.approx(1.0 + 1 / 0.9)  # held 1 s, then one token
    assert half_recovered == pytest.approx(0.95)
    assert second_cut == pytest.approx(1.0 * 0.9)


async def test_a_429_holds_every_worker_for_retry_after_when_the_server_sent_one(redis):
    clock = Clock()
    limiter = backend(redis, clock, rpm=60, guard_s=0.0, burst=1)

    await limiter.penalize(retry_after=5.0)
    decision = await limiter.acquire("m", 0)

    factor = RateLimits(rpm=60).decrease  # the 429 also cut the rate: one token now takes 1 / factor seconds
    assert decision.wait_s == pytest.approx(5.0 + 1 / factor)


async def test_without_retry_after_the_hold_doubles_while_the_first_call_after_it_is_refused_again(redis):
    clock = Clock()
    limiter = backend(redis, clock, rpm=60, guard_s=0.0, burst=1, refusal_hold_s=1.0)
    holds = []
    for _ in range(4):
        await limiter.penalize()
        decision = await limiter.acquire("m", 0)
        holds.append(decision.wait_s - 1 / decision.factor)  # the hold, then one token
        clock.now += decision.wait_s + 0.5  # the probe goes out after the hold, and is refused

    assert holds == [pytest.approx(h) for h in (1.0, 2.0, 4.0, 8.0)]


async def test_a_busy_monitor_that_always_asks_first_still_gets_only_every_other_token(redis):
    clock = Clock()
    limiter = backend(redis, clock, rpm=60, guard_s=0.0, burst=1)
    for _ in range(10):  # the busy monitor has the judge to itself for a while
        decision = await limiter.acquire("busy", 0, more=True)
        clock.now += decision.wait_s

    clock.now += 1.0

    grants = []
    for _ in range(12):
        for monitor in ("busy", "quiet"):  # one token per round, and "busy" asks first every time
            if (await limiter.acquire(monitor, 0, more=True)).granted:
                grants.append(monitor)
        clock.now += 1.0

    assert grants == ["busy", "quiet"] * 6


async def test_a_monitor_back_from_idle_gets_no_banked_credit(redis):
    clock = Clock()
    limiter = backend(redis, clock, rpm=60, guard_s=0.0, burst=1)
    assert (await limiter.acquire("early", 0)).granted
    for _ in range(20):  # "early" is idle while "busy" takes twenty tokens
        clock.now += 1.0
        assert (await limiter.acquire("busy", 0, more=True)).granted

    grants = []
    for _ in range(6):
        clock.now += 1.0
        for monitor in ("busy", "early"):
            if (await limiter.acquire(monitor, 0, more=True)).granted:
                grants.append(monitor)

    assert grants == ["busy", "early"] * 3  # not six for "early" in a row


async def collect(limiter: Limiter, monitor: str, calls: int, order: list[str]) -> None:
    async def one() -> None:
        async with limiter.slot(monitor, 0):
            order.append(monitor)
    await asyncio.gather(*(one() for _ in range(calls)))


FAST = {"rpm": 40, "window_s": 1.0, "guard_s": 0.0, "burst": 1}  # 40 calls a second


async def test_two_monitors_in_one_process_share_the_judge_in_turn(redis):
    limiter = Limiter(backend(redis, **FAST), max_concurrency=100)
    order: list[str] = []
    busy = asyncio.create_task(collect(limiter, "busy", 40, order))
    while len(order) < 5:
        await asyncio.sleep(0.01)

    await collect(limiter, "quiet", 8, order)
    await busy

    after = order[order.index("quiet"):]
    assert after[:16].count("quiet") >= 7


async def test_two_monitors_in_two_worker_processes_share_the_judge_in_turn(redis_url):
    """Each ``Limiter`` with its own Redis connection stands for one worker process."""
    clients = [Redis.from_url(redis_url), Redis.from_url(redis_url)]
    process_a, process_b = (Limiter(backend(c, **FAST), max_concurrency=100) for c in clients)
    order: list[str] = []
    busy = asyncio.create_task(collect(process_a, "busy", 40, order))
    while len(order) < 5:
        await asyncio.sleep(0.01)

    await collect(process_b, "quiet", 8, order)
    await busy
    for client in clients:
        await client.aclose()

    after = order[order.index("quiet"):]
    assert after[:16].count("quiet") >= 7


async def test_calls_in_flight_never_exceed_max_concurrency_and_wait_in_arrival_order():
    limiter = Limiter(None, max_concurrency=2)
    release = asyncio.Event()
    started: list[int] = []
    peak = 0

    async def call(i: int) -> None:
        nonlocal peak
        async with limiter.slot("m"):
            started.append(i)
            peak = max(peak, limiter.in_flight)
            await release.wait()

    tasks = [asyncio.create_task(call(i)) for i in range(5)]
    while len(started) < 2:
        await asyncio.sleep(0)
    first_two = list(started)
    release.set()
    await asyncio.gather(*tasks)

    assert first_two == [0, 1] and started == [0, 1, 2, 3, 4]
    assert peak == 2 and limiter.in_flight == 0


async def test_a_caller_that_gives_up_waiting_leaves_no_slot_behind(redis):
    limiter = Limiter(backend(redis, rpm=1, window_s=3600.0), max_concurrency=4)
    async with limiter.slot("m"):
        pass

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            async with limiter.slot("m"):
                pass

    assert limiter.in_flight == 0 and limiter.waiting() == {}
