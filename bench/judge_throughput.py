"""Judge throughput at the global limit: does vigil run a judge at its provider's rpm, and never over it?

    .venv/bin/python bench/judge_throughput.py            # a rich table; --json prints one JSON object

A scripted OpenAI-compatible server (``tests/judge_server.py``, a thread of this process) answers after a fixed
latency and enforces its own limit of ``--rpm`` requests in any 60 s, answering 429 above it. Two worker processes
(spawned) each drive ``--callers`` concurrent calls through their own ``JudgeTransport`` against one Redis (the
embedded redis-server), for ``--duration`` seconds per configuration:

- latency 0.5 s and 2 s with vigil's limit equal to the server's: the goal is ratio >= 0.97 and refused = 0;
- latency 0.5 s with vigil's limit 20% above the server's, with the adaptive rate, and without it (``decrease``
  1.0) for comparison: refusals should come down and throughput stay near the server's limit.

``achieved_rpm`` counts the requests the server accepted in [first arrival, first arrival + duration).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

__all__ = ["Config", "main", "run_config"]


@dataclass(frozen=True)
class Config:
    name: str
    latency_s: float
    vigil_rpm: int
    adaptive: bool = True


def _worker(base_url: str, redis_url: str, config: Config, callers: int, duration: float, monitor: str,
            start: multiprocessing.synchronize.Barrier, results: multiprocessing.Queue) -> None:
    import logging

    import structlog
    from redis.asyncio import Redis
    from vigil.schemas import JudgeConfig
    from vigil.worker.judge.base import JudgeFailed
    from vigil.worker.judge.limiter import RateLimits
    from vigil.worker.judge.transport import JudgeTransport

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is for the report

    async def drive() -> dict:
        judge = JudgeConfig(name="bench", base_url=base_url, model="m", rpm=config.vigil_rpm,
                            max_concurrency=callers, max_retry_age_s=600)
        redis = Redis.from_url(redis_url)
        limits = RateLimits.of(judge, **({} if config.adaptive else {"decrease": 1.0}))
        transport = JudgeTransport(judge, redis=redis, limits=limits)
        waits: list[float] = []
        failed = 0
        await asyncio.to_thread(start.wait)
        stop_at = time.monotonic() + duration + 2

        async def caller() -> None:
            nonlocal failed
            while time.monotonic() < stop_at:
                try:
                    result = await transport.chat(step="bench", monitor=monitor,
                                                  messages=[{"role": "user", "content": "Is the sky blue?"}])
                    waits.append(result.limiter_wait_s)
                except JudgeFailed:
                    failed += 1

        tasks = [asyncio.create_task(caller()) for _ in range(callers)]
        await asyncio.sleep(stop_at - time.monotonic())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        factor = await transport.backend.factor() if transport.backend else 1.0
        await transport.aclose()
        await redis.aclose()
        return {"waits": waits, "failed": failed, "factor": factor}

    results.put(asyncio.run(drive()))


def run_config(config: Config, *, server_rpm: int, duration: float, callers: int, redis_url: str) -> dict:
    """One configuration, start to finish: a fresh server, a flushed Redis, two worker processes."""
    import redis

    from tests.judge_server import Reply, ScriptedJudge

    redis.Redis.from_url(redis_url).flushall()
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(3), context.Queue()
    with ScriptedJudge(lambda body: Reply("yes", delay=config.latency_s), rpm_limit=server_rpm) as server:
        workers = [context.Process(target=_worker, args=(server.base_url, redis_url, config, callers, duration,
                                                         f"monitor-{i}", start, results)) for i in range(2)]
        for worker in workers:
            worker.start()
        start.wait(timeout=120)
        outcomes = [results.get(timeout=duration + 120) for _ in workers]
        for worker in workers:
            worker.join(30)
        requests = list(server.requests)
        max_60s = server.max_in_window(60.0)
    t0 = min(r.at for r in requests)
    accepted = sum(1 for r in requests if r.status != 429 and r.at < t0 + duration)
    refused_at = [r.at - t0 for r in requests if r.status == 429]
    waits = sorted(w for o in outcomes for w in o["waits"])
    achieved = accepted * 60.0 / duration
    return {
        **asdict(config),
        "limit_rpm": server_rpm,
        "achieved_rpm": round(achieved, 1),
        "ratio": round(achieved / server_rpm, 4),
        "refused": len(refused_at),
        "refused_per_minute": [sum(1 for t in refused_at if m * 60 <= t < (m + 1) * 60)
                               for m in range(int(duration // 60) + 1)],
        "max_accepted_in_60s": max_60s,
        "p95_limiter_wait_s": round(statistics.quantiles(waits, n=20)[-1], 3) if len(waits) > 1 else 0.0,
        "failed": sum(o["failed"] for o in outcomes),
        "final_rate_factor": round(min(o["factor"] for o in outcomes), 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rpm", type=int, default=600, help="the server's limit (requests per 60 s)")
    parser.add_argument("--duration", type=float, default=180.0,
                        help="seconds measured per configuration; keep it a multiple of 60 (the window)")
    parser.add_argument("--callers", type=int, default=100, help="concurrent calls per worker process")
    parser.add_argument("--only", help="run only the configurations whose name contains this")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)

    from vigil.worker.demo.embedded_redis import EmbeddedRedis

    over = round(args.rpm * 1.2)
    configs = [
        Config("at limit, 0.5 s", 0.5, args.rpm),
        Config("at limit, 2 s", 2.0, args.rpm),
        Config("limit +20%, adaptive, 0.5 s", 0.5, over),
        Config("limit +20%, fixed rate, 0.5 s", 0.5, over, adaptive=False),
    ]
    configs = [c for c in configs if not args.only or args.only in c.name]
    started = time.monotonic()
    with EmbeddedRedis() as redis_server:
        rows = [run_config(c, server_rpm=args.rpm, duration=args.duration, callers=args.callers,
                           redis_url=redis_server.url) for c in configs]
    report = {"benchmark": "judge_throughput", "worker_processes": 2, "callers_per_process": args.callers,
              "duration_s": args.duration, "wall_s": round(time.monotonic() - started, 1), "runs": rows}
    if args.json:
        print(json.dumps(report))
        return
    table = Table(title=f"judge throughput: 2 worker processes x {args.callers} callers, "
                        f"{args.duration:.0f} s per run, server limit {args.rpm} rpm")
    for column in ("run", "vigil rpm", "achieved rpm", "ratio", "refused", "refused/min", "max in 60 s",
                   "p95 wait s", "failed", "rate factor"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for r in rows:
        table.add_row(r["name"], str(r["vigil_rpm"]), f"{r['achieved_rpm']:.1f}", f"{r['ratio']:.3f}",
                      str(r["refused"]), " ".join(map(str, r["refused_per_minute"])), str(r["max_accepted_in_60s"]),
                      f"{r['p95_limiter_wait_s']:.2f}", str(r["failed"]), f"{r['final_rate_factor']:.2f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
