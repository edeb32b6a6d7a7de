"""``vigil report``: a table per monitor, ``--json`` for machines, ``--html FILE`` for a static page with charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
from vigil.worker.cli.options import read_store, redis_url_option
from vigil.worker.report.build import build_report
from vigil.worker.report.html import write_html
from vigil.worker.report.model import Report
from vigil.worker.report.text import print_report
from vigil.worker.store.clickhouse import require_tables

__all__ = ["report"]


@click.command("report")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB store).")
@click.option("--hours", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Only the last N hours, N > 0 (default: all the data).")
@click.option("--monitor", "monitors", multiple=True, help="Only these monitors (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Write a static HTML page with charts to this file, instead of printing the text report.")
@click.option("--serve", is_flag=True, help="Serve the HTML report live on http://127.0.0.1:PORT (Ctrl-C stops).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port for --serve (0: any free port).")
@click.option("--refresh", "refresh_s", type=click.IntRange(min=1), default=30, show_default=True,
              help="Seconds between the served page's reloads.")
@click.option("--reviewer", default=None, show_default="the OS user",
              help="With --serve: the name on labels given on its review page (/review/).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), envvar="VIGIL_CONFIG",
              default=None, help="With --serve: the monitor config whose `reviewers:` each sign in to /review/ with a "
                                 "token of their own, as on `vigil review` (default: VIGIL_CONFIG).")
@redis_url_option
def report(dsn: str | None, hours: float | None, monitors: tuple[str, ...], as_json: bool,
           html_path: str | None, serve: bool, port: int, refresh_s: int, reviewer: str | None,
           config_path: str | None, redis_url: str) -> None:
    """Scores per monitor: counts per status, mean score, coverage, the worst turns with reasons.

    Reads the store in $VIGIL_HOME (default .vigil), also while `vigil worker` runs, or CLICKHOUSE_DSN.

    \b
    Examples:
      vigil report
      vigil report --hours 24 --monitor answer_relevancy
      vigil report --json | jq '.monitors[] | {monitor, mean_score}'
      vigil report --html report.html         # the page only; add --json for the JSON on stdout too
      vigil report --serve --port 8765       # live page, reloads every 30 s; /review/ labels turns
    """
    client = read_store(dsn)
    require_tables(client, "scores", "scores_1h", "pipeline_events", "alerts")

    def build() -> Report:
        now = datetime.now(UTC)
        start = now - timedelta(hours=hours) if hours else None
        return build_report(client, start=start, now=now, variables={"monitor": list(monitors) or None})

    if serve:
        def review(lock):
            from vigil.worker.cli.review import default_reviewer, holds_store
            from vigil.worker.review.service import open_service

            return open_service(client, redis_url, reviewer=reviewer or default_reviewer(), lock=lock,
                                holds_store=holds_store(dsn))

        from vigil.schemas import load_config
        from vigil.worker.report.turn import load_turn

        reviewers = tuple(load_config(config_path).reviewers) if config_path else ()
        _serve(build, port, refresh_s, review, lambda trace_id: load_turn(client, trace_id), reviewers)
        return
    result = build()
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    elif not html_path:  # the page is what was asked for; its path is the one line printed
        print_report(result)
    if html_path:
        click.echo(f"HTML report: {write_html(result, html_path)}", err=as_json)


def _serve(build, port: int, refresh_s: int, review, turn, reviewers) -> None:
    from vigil.worker.report.serve import ReportServer

    try:
        server = ReportServer(build, port=port, refresh_s=refresh_s, review=review, turn=turn,
                              reviewers=reviewers)
    except OSError as exc:
        raise click.ClickException(f"cannot serve on 127.0.0.1:{port}: {exc.strerror} (try --port 0)") from None
    click.echo(f"serving the report on {server.url} (reloads every {refresh_s} s) and the review page on "
               f"{server.url}review/ (Ctrl-C stops)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
