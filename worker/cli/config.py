"""``vigil config check FILE``: validate a monitor config; errors name the field."""

from __future__ import annotations

import sys

import click
from pydantic import ValidationError

from schemas import load_config

__all__ = ["config"]


@click.group()
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
