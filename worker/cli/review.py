"""``vigil review``: the review page (label turns in a browser); ``vigil review export``: its labels as a dataset."""

from __future__ import annotations

import getpass
import os
import socket
import sys
from pathlib import Path

import click
from vigil.worker.cli.options import redis_url_option
from vigil.worker.cli.suggest import SuggestingGroup

__all__ = ["review"]

_TABLES = ("scores", "traces", "feedback", "alerts")


def default_reviewer() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


def holds_store(dsn: str | None) -> bool:
    """Whether ``connect_for_reading(dsn)`` opened the embedded store in this process (no worker holds it)."""
    from vigil.worker.store.clickhouse import chdb_dir, default_dsn
    from vigil.worker.store.read_server import read_endpoint

    directory = chdb_dir(dsn or default_dsn())
    return directory is not None and read_endpoint(directory) is None


def _names(host: str, extra: tuple[str, ...]) -> tuple[str, ...]:
    """The names the page answers to besides loopback and ``host``: ``extra``, and beyond loopback this machine's."""
    from vigil.worker.serving.guard import is_loopback

    return extra if is_loopback(host) else (*extra, socket.gethostname(), socket.getfqdn())


@click.group("review", cls=SuggestingGroup, invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Beyond loopback the page asks for a token (VIGIL_REVIEW_TOKEN, else a "
                   "random one, printed in the address).")
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True, help="0: any free port.")
@click.option("--reviewer", default=default_reviewer, show_default="the OS user",
              help="The name on this page's labels (each browser may set its own on the page).")
@click.option("--allow-host", "allowed_hosts", multiple=True,
              help="A host name the page may be reached by (repeatable; also VIGIL_ALLOWED_HOSTS). Bound beyond "
                   "loopback, this machine's own names are allowed too.")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB store).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), envvar="VIGIL_CONFIG",
              default=None, help="Monitor config whose `reviewers:` each sign in with a token of their own "
                                 "(default: VIGIL_CONFIG).")
@redis_url_option
@click.pass_context
def review(ctx: click.Context, host: str, port: int, reviewer: str, allowed_hosts: tuple[str, ...],
           dsn: str | None, config_path: str | None, redis_url: str) -> None:
    """Label production turns in the browser: judge right / wrong, a score, a comment, per monitor.

    Reads the store in $VIGIL_HOME (also while `vigil worker` runs, through it) or CLICKHOUSE_DSN; labels go to
    the workers through REDIS_URL as feedback rows (source reviewer), like `vigil feedback import`.

    \b
    Examples:
      vigil review                                   http://127.0.0.1:8766/review/
      vigil review --reviewer ana --port 0
      vigil review --config vigil.yaml --host 0.0.0.0   each of its reviewers: signs in with their own token
      vigil review export --monitor answer_relevancy --out labels.jsonl
      vigil eval --monitor answer_relevancy --dataset labels.jsonl
    """
    if ctx.invoked_subcommand is not None:
        return
    from vigil.schemas import load_config
    from vigil.worker.review.service import open_service
    from vigil.worker.review.web import ReviewServer
    from vigil.worker.store.clickhouse import connect_for_reading, require_tables

    reviewers = tuple(load_config(config_path).reviewers) if config_path else ()
    client = connect_for_reading(dsn)
    require_tables(client, *_TABLES)
    service = open_service(client, redis_url, reviewer=reviewer, holds_store=holds_store(dsn))
    try:
        server = ReviewServer(service, host=host, port=port, token=os.environ.get("VIGIL_REVIEW_TOKEN") or None,
                              hosts=_names(host, allowed_hosts), reviewers=reviewers)
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc.strerror} (try --port 0)") from None
    who = (f"{len(reviewers)} reviewers of {config_path}, each opening it with ?token=THEIR_TOKEN" if reviewers
           else f"reviewer {reviewer}")
    click.echo(f"review page: {server.url} ({who}; Ctrl-C stops)", err=True)
    if service.direct:
        click.echo("no broker at REDIS_URL and no worker running: labels go straight into the store this command "
                   "holds (a `vigil worker` started later scores nothing for them: always_sample needs the broker)",
                   err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


@review.command("export")
@click.option("--monitor", required=True, help="The monitor whose labels to export.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the dataset here (default: stdout).")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB store).")
def export_command(monitor: str, out_path: Path | None, dsn: str | None) -> None:
    """The monitor's review labels as a `vigil eval` dataset (JSON lines: id, human on 0..1, turn)."""
    from vigil.worker.review.export import export_items, write_jsonl
    from vigil.worker.store.clickhouse import connect_for_reading, require_tables

    client = connect_for_reading(dsn)
    try:
        require_tables(client, *_TABLES)
        items = list(export_items(client, monitor))
    finally:
        client.close()  # an embedded store is let go at once, not when the client is collected
    if not items:
        raise click.ClickException(f"--monitor: no review labels of {monitor!r} in the store (label turns with "
                                   "`vigil review` first; labels reach the store through a running worker)")
    if out_path is None:
        write_jsonl(iter(items), sys.stdout)
    else:
        with out_path.open("w", encoding="utf-8") as out:
            write_jsonl(iter(items), out)
    click.echo(f"{len(items)} labelled turns of {monitor} -> {out_path or 'stdout'}; measure a judge on them with "
               f"`vigil eval --monitor {monitor} --dataset {out_path or 'FILE'}`", err=True)
