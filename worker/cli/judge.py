"""``vigil judge status`` and ``vigil judge resume NAME``: what an operator needs when a judge stops answering.

Both read the shared state in Redis (``REDIS_URL``): pauses (``pause``) and each judge's adaptive rate factor
(``limiter``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys

import click
from redis.asyncio import Redis
from rich.console import Console
from rich.table import Table

from worker.judge.limiter import RateLimits, limiter_key
from worker.judge.pause import paused_judges, resume

__all__ = ["judge"]


def _redis() -> Redis:
    url = os.environ.get("REDIS_URL")
    if not url:
        click.echo("REDIS_URL is not set: the judges' shared state lives in the workers' Redis", err=True)
        sys.exit(2)
    return Redis.from_url(url, decode_responses=True)


async def _status() -> tuple[dict, dict[str, float]]:
    """Pauses, and each judge's rate factor recovered up to now at the default recovery rate."""
    redis = _redis()
    recovery = RateLimits(rpm=None).recovery_per_s
    try:
        paused = await paused_judges(redis)
        factors = {}
        async for key in redis.scan_iter(match=limiter_key("*")):
            factor, at = await redis.hmget(key, "factor", "at")
            since = max(0.0, float(dt.datetime.now(dt.UTC).timestamp()) - float(at or 0))
            factors[key.split("{", 1)[1].rsplit("}", 1)[0]] = min(1.0, float(factor or 1) + recovery * since)
        return paused, factors
    finally:
        await redis.aclose()


async def _resume(name: str) -> bool:
    redis = _redis()
    try:
        return await resume(redis, name)
    finally:
        await redis.aclose()


@click.group()
def judge() -> None:
    """Judges: pauses and rate limits."""


@judge.command("status")
def judge_status() -> None:
    """Paused judges (reason, since) and every judge's current rate factor (1 = full configured rate)."""
    paused, factors = asyncio.run(_status())
    table = Table("judge", "state", "since (UTC)", "reason", "rate factor")
    for name in sorted(set(paused) | set(factors)):
        pause = paused.get(name)
        since = dt.datetime.fromtimestamp(pause.since, dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if pause else ""
        table.add_row(name, "paused" if pause else "active", since, pause.reason if pause else "",
                      f"{factors.get(name, 1.0):.2f}")
    if not table.row_count:
        click.echo("no judge state in Redis yet (no judge has been called)")
        return
    Console(width=160).print(table)


@judge.command("resume")
@click.argument("name")
def judge_resume(name: str) -> None:
    """Lift the pause on judge NAME; its waiting work runs again."""
    if asyncio.run(_resume(name)):
        click.echo(f"judge {name!r} resumed")
    else:
        click.echo(f"judge {name!r} was not paused")
