"""``vigil compare``: is B worse than A? Two values of one segment key (release, model, agent, a metadata key)
compared per monitor, with the difference's 95% interval, the turns on each side and a sequential verdict."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click
from vigil.worker.cli.options import read_store

__all__ = ["compare"]


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--by", "key", default="release", show_default=True,
              help="The segment key: release, model, agent, environment, project, or any metadata key.")
@click.option("--monitor", default=None, help="Only this monitor (default: every monitor with turns on a side).")
@click.option("--since", default="30d", show_default=True, help="How far back (30d, 12h, ISO 8601).")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object: {"comparisons": [...]}.')
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB store).")
def compare(a: str, b: str, key: str, monitor: str | None, since: str, as_json: bool, dsn: str | None) -> None:
    """Compare the turns where KEY = B with those where KEY = A, per monitor.

    \b
    Examples:
      vigil compare --by release v6 v7
      vigil compare --monitor answer_relevancy --by model gpt-4o gpt-4o-mini --since 7d
    """
    from vigil.worker.alerts.backtest import parse_since
    from vigil.worker.report.compare import compare as comparisons
    from vigil.worker.store.clickhouse import require_tables

    try:
        start = parse_since(since, datetime.now(UTC))
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--since: "), param_hint="--since") from None
    client = read_store(dsn)
    require_tables(client, "scores", "traces")
    try:
        found = comparisons(client, key, a, b, since=start, monitor=monitor)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--by: "), param_hint="--by") from None
    if as_json:
        click.echo(json.dumps({"comparisons": [c.model_dump(mode="json") for c in found]}))
        return
    for c in found:
        click.echo(c.sentence())
    if not found:
        click.echo(f"no scored turns with {key} = {a} or {key} = {b} since {start:%Y-%m-%d %H:%M} UTC")
