"""``vigil alerts check`` runs the alert rules once (the beat task runs the same ``check_alerts``); ``vigil alerts
backtest`` replays scores through the sequential rules' live decision code to show when they would have fired."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click
from vigil.schemas import VigilConfig, load_config
from vigil.worker.cli.options import read_store
from vigil.worker.cli.suggest import SuggestingGroup

__all__ = ["alerts"]

_CONFIG = click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), envvar="VIGIL_CONFIG",
                       default=None, help="Monitor config YAML whose alert rules to run (default: VIGIL_CONFIG).")
_DSN = click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB "
                                                "store).")


@click.group("alerts", cls=SuggestingGroup)
def alerts() -> None:
    """Regression alerts over the scores."""


@alerts.command("check")
@_CONFIG
@_DSN
@click.option("--explain", is_flag=True, help="Also print every rule's verdict on every subject, and why it did "
                                              "or did not fire.")
def check(config_path: str | None, dsn: str | None, explain: bool) -> None:
    """Check every alert rule now; print what fired, was re-sent or resolved.

    \b
    Examples:
      VIGIL_CONFIG=vigil.yaml vigil alerts check
      vigil alerts check --config vigil.yaml --explain
    """
    from vigil.worker.alerts.check import DEFAULT_RULES, check_alerts, evaluate, record
    from vigil.worker.store.clickhouse import require_tables

    config = load_config(config_path) if config_path else VigilConfig()
    if not config.alerts:
        config = config.model_copy(update={"alerts": DEFAULT_RULES})
        click.echo(f"no alert rules configured; using the defaults: {', '.join(r.name for r in DEFAULT_RULES)}")
    client = read_store(dsn)
    require_tables(client, "scores_1m", "scores_1h", "alerts", "detector_checks")
    if explain:
        from vigil.worker.alerts.explain import explain as explained

        outcomes = evaluate(client, config)
        for line in explained(outcomes, config):
            click.echo(line)
        events = [o.event for o in outcomes if o.event]
        record(client, events)
    else:
        events = check_alerts(client, config)
    for event in events:
        click.echo(event.text(slack=False))  # a terminal: no Slack emoji or code markup
        if explain:
            for i, segment in enumerate(event.segments, 1):
                click.echo(f"  {i}. {segment.describe()}")
    click.echo(f"{len(events)} alert event(s)")


@alerts.command("backtest")
@_CONFIG
@click.option("--scores", "scores_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help='JSON lines, one score a line: {"ts", "monitor", "score" (0..1), "metadata"}. Default: the store.')
@click.option("--since", default="30d", show_default=True, help="From the store: how far back (30d, 12h, ISO 8601).")
@click.option("--rule", "rule_name", default=None, help="Replay only this rule (default: every sequential "
                                                        "regression rule).")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object: {"alerts": [...]}.')
@_DSN
def backtest_command(config_path: str | None, scores_path: Path | None, since: str, rule_name: str | None,
                     as_json: bool, dsn: str | None) -> None:
    """When would the regression rules have fired? Replays scores at the live cadence (one check per 60 s of
    stream time) through the same decision code as the beat.

    \b
    Examples:
      vigil alerts backtest --config vigil.yaml --scores scores.jsonl
      vigil alerts backtest --config vigil.yaml --since 30d --rule score-regression --json
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from vigil.worker.alerts.backtest import (
        backtest,
        parse_since,
        read_scores,
        sequential_rules,
        stored_scores,
        thin,
    )

    if config_path is None:
        raise click.UsageError("--config is required (or set VIGIL_CONFIG)")
    config = load_config(config_path)
    rules = sequential_rules(config, rule_name)
    client = None
    if scores_path is not None:
        streams = read_scores(scores_path)
    else:
        from vigil.worker.store.clickhouse import require_tables

        client = read_store(dsn)
        require_tables(client, "scores", "traces")
        monitors = {m.name for m in config.monitors}
        if all(r.monitor for r in rules):
            monitors = {r.monitor for r in rules if r.monitor}
        streams = stored_scores(client, monitors, parse_since(since, datetime.now(UTC)))
    streams, days = thin(config, streams)  # what each monitor's budget would have kept
    total = sum(len(s.ts) for s in streams.values()) * len(rules)
    err = Console(stderr=True)
    with Progress(TextColumn("replaying scores"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=as_json and not err.is_terminal) as progress:
        task = progress.add_task("backtest", total=total)
        found = backtest(config, streams, rule_name=rule_name, client=client,
                         progress=lambda n: progress.advance(task, n))
    if as_json:
        click.echo(json.dumps({"alerts": [a.public() for a in found], "budget": [d.model_dump() for d in days]}))
        return
    for d in days:
        click.echo(f"budget of {d.monitor} on {d.day}: {d.kept} of {d.scores} scores kept")
    for a in found:
        resolved = f"resolved {a.resolved_at:%Y-%m-%d %H:%M}" if a.resolved_at else "still firing at the end"
        click.echo(f"fired {a.fired_at:%Y-%m-%d %H:%M} UTC ({a.rule}; {resolved}): {a.sentence}")
        for i, s in enumerate(a.segments, 1):
            click.echo(f"  {i}. {s.describe()}")
    scores = sum(len(s.ts) for s in streams.values())
    click.echo(f"{len(found)} alert(s) from {scores} score(s) of {len(streams)} monitor(s), {len(rules)} rule(s)")
