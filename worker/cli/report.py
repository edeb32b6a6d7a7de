"""``vigil report``: a table per monitor, ``--json`` for machines, ``--html FILE`` for a static page with charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from worker.report.build import build_report
from worker.report.html import write_html
from worker.report.text import print_report
from worker.store.clickhouse import connect_for_reading, require_tables

__all__ = ["report"]


@click.command("report")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB store).")
@click.option("--hours", type=float, default=None, help="Only the last N hours (default: all the data).")
@click.option("--monitor", "monitors", multiple=True, help="Only these monitors (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a static HTML page with charts to this file.")
def report(dsn: str | None, hours: float | None, monitors: tuple[str, ...], as_json: bool,
           html_path: str | None) -> None:
    """Scores per monitor: counts per status, mean score, coverage, the worst turns with reasons.

    Reads the store in $VIGIL_HOME (default .vigil), also while `vigil worker` runs, or CLICKHOUSE_DSN.

    \b
    Examples:
      vigil report
      vigil report --hours 24 --monitor answer_relevancy
      vigil report --json | jq '.monitors[] | {monitor, mean_score}'
      vigil report --html report.html
    """
    client = connect_for_reading(dsn)
    require_tables(client, "scores", "scores_1h", "pipeline_events", "alerts")
    now = datetime.now(UTC)
    start = now - timedelta(hours=hours) if hours else None
    result = build_report(client, start=start, now=now, variables={"monitor": list(monitors) or None})
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        print_report(result)
    if html_path:
        click.echo(f"HTML report: {write_html(result, html_path)}", err=as_json)
