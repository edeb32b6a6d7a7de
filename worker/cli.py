"""The ``vigil`` command. Each subcommand lives beside the concept it drives; this module only gathers them."""

from __future__ import annotations

import sys

import click
from pydantic import ValidationError

from schemas import load_config

__all__ = ["main"]


@click.group()
def main() -> None:
    """vigil: online quality monitoring for LLM agents."""


@main.group()
def config() -> None:
    """Monitor configuration."""


@config.command("check")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def config_check(path: str) -> None:
    """Validate a monitor config YAML; errors name the field."""
    try:
        cfg = load_config(path)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            click.echo(f"{path}: {where}: {error['msg']}", err=True)
        sys.exit(1)
    click.echo(f"{path}: ok ({len(cfg.judges)} judges, {len(cfg.monitors)} monitors, {len(cfg.alerts)} alert rules)")


# Subcommands defined elsewhere register here, one import line each.
from worker.serve import migrate_command, worker_command  # noqa: E402

main.add_command(worker_command)
main.add_command(migrate_command)
from worker.demo import demo_command  # noqa: E402

main.add_command(demo_command)
from worker.report.cli import report  # noqa: E402

main.add_command(report)
from worker.alerts.cli import alerts  # noqa: E402

main.add_command(alerts)
from worker.scorers.command import score_command  # noqa: E402

main.add_command(score_command)
from worker.scorers.probe import probe_command  # noqa: E402

main.add_command(probe_command)
from worker.judge.command import judge  # noqa: E402

main.add_command(judge)
from worker.emit import emit_command  # noqa: E402

main.add_command(emit_command)
from worker.beat import beat_command  # noqa: E402

main.add_command(beat_command)
