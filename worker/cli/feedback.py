"""``vigil feedback import FILE.jsonl``: reviewers' labels into vigil through the SDK's path (Redis, then the worker).

One feedback item a line, the arguments of ``Monitor.feedback`` as JSON::

    {"trace_id": "4bf92f35...", "name": "correct", "value": 0, "comment": "wrong refund window", "author": "ana"}

``source`` defaults to ``reviewer`` here; ``scale`` (default 1) and ``created_at`` (default: now) are optional.
The command never opens the store, so it works while a worker holds the embedded chDB store. A bad line is
reported on stderr with its line number and field; the other lines are still sent; the exit status is 1 if any
line was bad or not everything reached Redis.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from pydantic import BaseModel, ValidationError
from vigil.worker.cli.options import redis_url_option
from vigil.worker.cli.suggest import SuggestingGroup

__all__ = ["FeedbackImport", "feedback", "import_file"]


class FeedbackImport(BaseModel):
    lines: int = 0
    sent: int = 0
    errors: list[str] = []  # "line N: field: problem"
    delivered: bool = True


def import_file(path: Path, redis_url: str, *, spool_path: Path | None = None,
                flush_timeout: float = 60.0) -> FeedbackImport:
    """Validate each line as ``vigil.schemas.feedback.Feedback`` and send the good ones with ``Monitor.feedback``."""
    from vigil.producers import Monitor
    from vigil.schemas.feedback import Feedback, problems

    result = FeedbackImport()
    # The spool path from VIGIL_SPOOL_PATH unless given: a broker outage leaves the items there for the next run.
    monitor = Monitor(redis_url=redis_url, **({"spool_path": spool_path} if spool_path else {}))
    try:
        room = max(1, monitor.settings.max_queue // 2)
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                result.lines = number
                if not raw.strip():
                    continue
                try:
                    data = json.loads(raw)
                except ValueError as exc:
                    result.errors.append(f"line {number}: not JSON ({exc})")
                    continue
                if not isinstance(data, dict):
                    result.errors.append(f"line {number}: a feedback line is a JSON object, not {type(data).__name__}")
                    continue
                try:
                    item = Feedback.model_validate({"source": "reviewer", **data, "feedback_id": ""})
                except ValidationError as exc:
                    result.errors.append(f"line {number}: {problems(exc)}")
                    continue
                if monitor.counters().queued >= room:
                    monitor.flush(flush_timeout)
                result.sent += monitor.feedback(item.trace_id, item.name, item.value, item.comment or None,
                                                item.source, author=item.author, scale=item.scale,
                                                created_at=item.created_at)
        result.delivered = monitor.flush(flush_timeout) and monitor.counters().dropped_total == 0
    finally:
        monitor.shutdown(timeout=30)
    return result


@click.group("feedback", cls=SuggestingGroup)
def feedback() -> None:
    """Human feedback on turns."""


@feedback.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@redis_url_option
def import_command(path: Path, redis_url: str) -> None:
    """Send reviewers' labels (a JSON-lines file, one Monitor.feedback call a line) to vigil."""
    result = import_file(path, redis_url)
    for error in result.errors:
        click.echo(error, err=True)
    click.echo(f"{result.sent} feedback items sent from {result.lines} lines; "
               f"{len(result.errors)} bad lines; "
               f"{'all delivered' if result.delivered else 'NOT all delivered (spooled; run again later)'}")
    if result.errors or not result.delivered:
        raise SystemExit(1)
