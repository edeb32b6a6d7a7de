"""Two worker processes, one judge, one limit: the scripted server counts, and never sees the limit exceeded.

Real parts throughout: two OS processes (spawned) each driving 10 concurrent calls through its own ``JudgeTransport``,
one real Redis, and the scripted server enforcing its own limit. To cover several windows in seconds rather than
minutes, the limit is "30 requests per 3 seconds" on both sides: the window length is a parameter of the limiter
(``RateLimits.window_s``) and of the server (``ScriptedJudge(window_s=...)``), and nothing else in the arithmetic
depends on it. The bucket arithmetic at 60 seconds is covered on an injected clock in ``test_limiter``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections import Counter

from vigil.schemas import JudgeConfig
from vigil.worker.judge.base import JudgeFailed
from vigil.worker.judge.limiter import RateLimits
from vigil.worker.judge.transport import JudgeTransport

from tests.judge_server import Reply, ScriptedJudge

LIMIT, WINDOW_S, RUN_S = 30, 3.0, 10.0


def _worker(base_url: str, redis_url: str, monitor: str, start: multiprocessing.synchronize.Barrier,
            results: multiprocessing.Queue) -> None:
    from redis.asyncio import Redis

    async def drive() -> Counter[str]:
        config = JudgeConfig(name="shared", base_url=base_url, model="m", rpm=LIMIT, max_concurrency=30)
        redis = Redis.from_url(redis_url)
        transport = JudgeTransport(config, redis=redis, limits=RateLimits.of(config, window_s=WINDOW_S))
        await asyncio.to_thread(start.wait)
        stop_at = time.monotonic() + RUN_S
        statuses: Counter[str] = Counter()

        async def caller() -> None:
            while time.monotonic() < stop_at:
                try:
                    result = await transport.chat(step="s", messages=[{"role": "user", "content": "q"}],
                                                  monitor=monitor)
                    statuses.update(c.status for c in result.calls)
                except JudgeFailed as exc:
                    statuses.update(c.status for c in exc.calls)

        await asyncio.gather(*(caller() for _ in range(10)))
        await transport.aclose()
        await redis.aclose()
        return statuses

    results.put((monitor, asyncio.run(drive())))


def test_two_worker_processes_together_never_exceed_the_limit_in_any_window(redis_url):
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(3), context.Queue()
    with ScriptedJudge(lambda body: Reply("yes", delay=0.05), rpm_limit=LIMIT, window_s=WINDOW_S) as server:
        workers = [context.Process(target=_worker, args=(server.base_url, redis_url, m, start, results))
                   for m in ("monitor-a", "monitor-b")]
        for worker in workers:
            worker.start()
        start.wait(timeout=60)
        done = dict(results.get(timeout=60 + RUN_S) for _ in workers)
        for worker in workers:
            worker.join(10)

    assert server.refused == 0
    assert LIMIT // 2 < server.max_in_window(WINDOW_S) <= LIMIT  # the limit was reached, never passed
    ok = {monitor: statuses["ok"] for monitor, statuses in done.items()}
    assert sum(ok.values()) == len(server.requests)
    assert min(ok.values()) >= 0.4 * sum(ok.values())  # and the two monitors shared it
