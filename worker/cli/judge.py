"""``vigil judge status`` and ``vigil judge resume NAME``: what an operator needs when a judge stops answering.

The state comes from where it lives: the configured judges (``VIGIL_CONFIG``), their pauses (``pause``), adaptive
rate factors (``limiter``) and last errors (``last_error``) in the workers' Redis (``REDIS_URL``), and their calls,
errors and last call in the store (``judge_calls``, read as ``vigil report`` reads it, also while a worker runs).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os

import click
from redis.asyncio import Redis
from rich.console import Console
from rich.table import Table
from vigil.schemas import VigilConfig
from vigil.schemas.broker import broker
from vigil.worker.cli.options import read_store
from vigil.worker.cli.suggest import SuggestingGroup
from vigil.worker.judge.last_error import LastError, last_errors
from vigil.worker.judge.limiter import RateLimits, clear_hold, limiter_key
from vigil.worker.judge.pause import paused_judges, resume

__all__ = ["judge", "print_budgets"]

_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def _redis() -> Redis:
    url = os.environ.get("REDIS_URL")
    if not url:
        unset = click.ClickException("REDIS_URL is not set: the judges' shared state lives in the workers' Redis")
        unset.exit_code = 2  # a setup mistake, as a usage error is
        raise unset
    return broker(url).async_redis(decode_responses=True, socket_connect_timeout=5, socket_timeout=10)


async def _status() -> tuple[dict, dict[str, float], dict[str, LastError]]:
    """Pauses, each judge's rate factor recovered up to now at the default recovery rate, and its last error."""
    redis = _redis()
    recovery = RateLimits(rpm=None).recovery_per_s
    try:
        paused, errors = await paused_judges(redis), await last_errors(redis)
        factors = {}
        async for key in redis.scan_iter(match=limiter_key("*")):
            factor, at = await redis.hmget(key, "factor", "at")
            since = max(0.0, float(dt.datetime.now(dt.UTC).timestamp()) - float(at or 0))
            factors[key.split("{", 1)[1].rsplit("}", 1)[0]] = min(1.0, float(factor or 1) + recovery * since)
        return paused, factors, errors
    finally:
        await redis.aclose()


async def _resume(name: str) -> tuple[bool, list[str]]:
    """Lift the pause and any 429 hold; True when either was in force."""
    redis = _redis()
    try:
        paused, held = await resume(redis, name), await clear_hold(redis, name)
        return paused or held, sorted(await paused_judges(redis))
    finally:
        await redis.aclose()


def print_budgets(config: VigilConfig) -> None:
    """Each monitor's judge spend today, the day's forecast at the last hours' traffic and its budget
    (``vigil.worker.pipeline.budget``), from the workers' Redis (``REDIS_URL``)."""
    import time

    from vigil.worker.pipeline.budget import lines

    client = broker(os.environ["REDIS_URL"]).redis(socket_connect_timeout=5, socket_timeout=10)
    try:
        spend = lines(client, config, time.time())
    finally:
        client.close()
    if spend:
        table = Table("monitor", "spent today", "forecast for the day", "budget", "state")
        for line in spend:
            table.add_row(line.owner, line.spent, line.forecast, line.budget, line.state)
        Console(width=200).print(table)


def _configured() -> dict[str, str]:
    """The judges of ``VIGIL_CONFIG`` (name -> kind and model), or none when it is unset."""
    from vigil.schemas import load_config

    path = os.environ.get("VIGIL_CONFIG")
    if not path:
        return {}
    return {j.name: f"{j.kind} {j.model}" if j.kind == "openai" else "baseline (offline)"
            for j in load_config(path).judges}


def _calls(dsn: str | None) -> tuple[dict[str, dict], str | None]:
    """Each judge's calls, errors and last call from the store; with why not, when the store cannot be read."""
    from vigil.worker.report.build import run_query
    from vigil.worker.store.clickhouse import (
        StoreError,
        require_tables,
    )
    from vigil.worker.store.queries import PANELS

    try:
        client = read_store(dsn)
        require_tables(client, "judge_calls")
        rows = run_query(client, PANELS["judge_summary"], start=_EPOCH, end=dt.datetime.now(dt.UTC))
    except StoreError as exc:
        return {}, str(exc)
    return {row["judge"]: row for row in rows}, None


@click.group(cls=SuggestingGroup)
def judge() -> None:
    """Judges: their state, pauses and rate limits.

    \b
    Examples:
      vigil judge status
      vigil judge resume gpt-judge
    """


@judge.command("status")
@click.option("--dsn", default=None, help="ClickHouse DSN for the call counts (default: CLICKHOUSE_DSN, else the "
                                          "embedded chDB store).")
def judge_status(dsn: str | None) -> None:
    """Every judge: configured (VIGIL_CONFIG), paused or active (reason, since), its rate factor (1 = the full
    configured rate), its calls, errors and last call from the store, and the last error it answered with; then
    each monitor's judge spend today, the forecast for the day at the last hours' traffic, and its budget."""
    paused, factors, errors = asyncio.run(_status())
    configured = _configured()
    calls, unread = _calls(dsn)
    names = sorted(set(configured) | set(paused) | set(factors) | set(calls) | set(errors))
    if not names:
        raise click.ClickException("no judge found: none configured (set VIGIL_CONFIG), none paused or rate-limited "
                                   "in Redis, no judge call in the store" + (f" ({unread})" if unread else ""))
    table = Table("judge", "kind", "state", "since (UTC)", "reason", "rate factor", "calls", "errors", "last call")
    for name in names:
        pause = paused.get(name)
        since = dt.datetime.fromtimestamp(pause.since, dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if pause else ""
        row = calls.get(name)
        table.add_row(name, configured.get(name, "(not in VIGIL_CONFIG)" if configured else ""),
                      "paused" if pause else "active", since, pause.reason if pause else "",
                      f"{factors.get(name, 1.0):.2f}", str(row["calls"] + row["cache_hits"]) if row else "0",
                      str(row["errors"]) if row else "0",
                      row["last_call"].strftime("%Y-%m-%d %H:%M:%S") if row and row["last_call"] else "")
    Console(width=200).print(table)
    for name in names:
        if error := errors.get(name):
            at = dt.datetime.fromtimestamp(error.at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            click.echo(f"{name}: last error {at} UTC, {error.status}: {error.message}")
    if os.environ.get("VIGIL_CONFIG"):
        from vigil.schemas import load_config

        print_budgets(load_config(os.environ["VIGIL_CONFIG"]))
    if unread:
        click.echo(f"calls: not read ({unread})", err=True)


@judge.command("resume")
@click.argument("name")
def judge_resume(name: str) -> None:
    """Lift the pause, and any rate-limit hold, on judge NAME; its waiting work runs again. An error when NAME is
    neither paused nor held."""
    configured = _configured()
    if configured and name not in configured:
        raise click.ClickException(f"unknown judge {name!r}: VIGIL_CONFIG has {', '.join(sorted(configured))}")
    resumed, still_paused = asyncio.run(_resume(name))
    if not resumed:
        raise click.ClickException(f"judge {name!r} is not paused and not held by a 429 (paused: "
                                   f"{', '.join(still_paused) or 'none'})")
    released = _release(name)
    click.echo(f"judge {name!r} resumed" + (f"; {released} waiting score tasks are back on the queue (the rest "
                                            "follow as the queue has room)" if released else ""))


def _release(name: str) -> int:
    """Put the judge's parked work back on the score queue now, as far as the queue's bound has room."""
    from vigil.worker.pipeline.parked import release, room
    from vigil.worker.settings import get_settings

    client = broker(os.environ["REDIS_URL"]).redis(socket_connect_timeout=5, socket_timeout=10)
    try:
        return release(client, name, room(client, get_settings().score_queue_max))
    finally:
        client.close()
