"""``vigil alerts check``: run the regression detector once (the beat task runs the same ``check_alerts``)."""

from __future__ import annotations

import click
from vigil.schemas import VigilConfig, load_config
from vigil.worker.alerts.check import DEFAULT_RULES, check_alerts
from vigil.worker.store.clickhouse import connect_for_reading, require_tables

__all__ = ["alerts"]


@click.group("alerts")
def alerts() -> None:
    """Regression alerts over the scores."""


@alerts.command("check")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), envvar="VIGIL_CONFIG",
              default=None, help="Monitor config YAML whose alert rules to run (default: VIGIL_CONFIG).")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB store).")
def check(config_path: str | None, dsn: str | None) -> None:
    """Check every alert rule now; print what fired, was re-sent or resolved.

    \b
    Examples:
      VIGIL_CONFIG=vigil.yaml vigil alerts check
      vigil alerts check --config vigil.yaml
    """
    config = load_config(config_path) if config_path else VigilConfig()
    if not config.alerts:
        config = config.model_copy(update={"alerts": DEFAULT_RULES})
        click.echo(f"no alert rules configured; using the defaults: {', '.join(r.name for r in DEFAULT_RULES)}")
    client = connect_for_reading(dsn)
    require_tables(client, "scores_1m", "scores_1h", "alerts")
    events = check_alerts(client, config)
    for event in events:
        click.echo(event.text())
    click.echo(f"{len(events)} alert event(s)")
