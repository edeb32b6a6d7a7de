"""``vigil emit FILE.jsonl``: backfill turns through the same path agents use (the SDK hook), with a progress bar."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from vigil.worker.cli.options import redis_url_option

__all__ = ["emit_command", "emit_file"]


def emit_file(path: Path, redis_url: str, *, spool_path: Path | None = None, console: Console | None = None):
    """Capture every line of ``path`` through a ``producers.Monitor`` and flush; returns the ReplayResult."""
    from vigil.producers import Monitor
    from vigil.producers.replay import replay

    monitor = Monitor(redis_url=redis_url, spool_path=spool_path)
    try:
        with Progress(TextColumn("emitting {task.fields[name]}"), BarColumn(), DownloadColumn(),
                      TextColumn("{task.fields[captured]} turns"), TimeElapsedColumn(),
                      console=console or Console(stderr=True)) as progress:
            task = progress.add_task("emit", total=path.stat().st_size, name=path.name, captured=0)
            return replay(path, monitor, on_progress=lambda p: progress.update(
                task, completed=p.bytes_read, captured=p.captured))
    finally:
        monitor.shutdown(timeout=30)


@click.command("emit")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@redis_url_option
def emit_command(path: Path, redis_url: str) -> None:
    """Backfill a JSON-lines file of turns through the SDK hook into the ingest queue."""
    result = emit_file(path, redis_url)
    click.echo(f"{result.captured} of {result.lines} lines captured; "
               f"{'all delivered' if result.delivered else 'NOT all delivered yet (spooled, see counters)'}; "
               f"invalid lines: {result.invalid_lines or 'none'}; counters: {result.counters.model_dump()}")
    if result.invalid_lines or not result.delivered:
        raise SystemExit(1)
