"""The ``vigil`` command: one table of subcommands, each in its own module of this package.

A subcommand's module is imported only when it runs (or when ``--help`` lists it), so ``vigil report`` never pays
for Celery or the demo, and the demo's room (``worker.demo``) is reached only through ``vigil demo``.
"""

from __future__ import annotations

import importlib

import click

__all__ = ["COMMANDS", "main"]

# name -> "module:attribute"; the order is the order of ``vigil --help``.
COMMANDS: dict[str, str] = {
    "demo": "worker.demo:demo_command",
    "worker": "worker.cli.worker:worker_command",
    "intake": "worker.cli.intake:intake_command",
    "beat": "worker.cli.worker:beat_command",
    "migrate": "worker.cli.worker:migrate_command",
    "config": "worker.cli.config:config",
    "emit": "worker.cli.emit:emit_command",
    "score": "worker.cli.score:score_command",
    "probe": "worker.cli.probe:probe_command",
    "report": "worker.cli.report:report",
    "alerts": "worker.cli.alerts:alerts",
    "judge": "worker.cli.judge:judge",
    "eval": "worker.cli.eval:eval_command",
}


class _Table(click.Group):
    """A click group whose commands come from ``COMMANDS``, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=_Table)
def main() -> None:
    """vigil: online quality monitoring for LLM agents."""
