"""``vigil score``: run one scorer on one trace file and print the result as JSON.

``--scorer NAME`` runs a built-in scorer with ``--param``s and a judge from the command line; ``--config FILE
--monitor NAME`` scores the turn exactly as that monitor would in the worker: the config checked as the worker
checks it, the same scorer object (built-in or the config's own), the same judge, the monitor's call context.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click
from pydantic import ValidationError
from vigil.schemas import JudgeConfig, MonitorConfig, ScoreResult, ScoreStatus, Turn
from vigil.worker.judge import Judge, JudgePaused, build_judge
from vigil.worker.scorers import SCORERS, build_scorer
from vigil.worker.scorers.base import Scorer

__all__ = ["score_command"]


def _param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r}: expected key=value", param_hint="--param")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


async def _run(scorer: Scorer, judge: Judge, turn: Turn, monitor: str) -> ScoreResult:
    try:
        return await scorer.score(turn, judge, scorer.context_for(turn, monitor=monitor))
    finally:
        if hasattr(judge, "aclose"):  # an LLM judge's HTTP client (naming LLMJudge here would import openai)
            await judge.aclose()


@click.command("score")
@click.option("--scorer", "scorer_name", type=click.Choice(sorted(SCORERS)), help="The built-in scorer to run.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A monitor config (with --monitor): score as that monitor does in the worker.")
@click.option("--monitor", "monitor_name", help="The monitor of --config to score as.")
@click.option("--trace", "trace_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A JSON file holding one turn.")
@click.option("--judge-base-url", envvar="VIGIL_JUDGE_BASE_URL",
              help="An OpenAI-compatible endpoint; without one, the offline baseline judge scores.")
@click.option("--model", envvar="VIGIL_JUDGE_MODEL", help="The judge model (needed with --judge-base-url).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="A scorer param; VALUE is read as JSON when it parses (10, true, [\"a\"]), else as text.")
@click.option("--reason", type=click.Choice(["llm", "template", "none"]), default="llm", show_default=True,
              help="How the reason is written.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help="Seconds to keep trying the judge (each call and its retries) before the score fails.")
def score_command(scorer_name: str | None, config_path: Path | None, monitor_name: str | None, trace_path: Path,
                  judge_base_url: str | None, model: str | None, params: tuple[str, ...], reason: str,
                  timeout: float) -> None:
    """Score one trace and print the result as JSON on stdout (exit 1 when the score failed, 2 when the judge is
    paused); logs and errors go to stderr, so the output pipes into jq.

    \b
    Examples:
      vigil score --scorer answer_relevancy --trace turn.json
      vigil score --scorer prompt_alignment --trace turn.json --param evaluation_mode=both
      vigil score --scorer answer_relevancy --trace turn.json \\
          --judge-base-url http://localhost:8000/v1 --model gpt-4o-mini --timeout 20 | jq .score
      vigil score --config vigil.yaml --monitor refund_policy --trace turn.json
    """
    if (config_path is None) != (monitor_name is None):
        raise click.UsageError("--config and --monitor go together")
    if config_path is not None and (scorer_name or params or judge_base_url):
        raise click.UsageError("--monitor takes the scorer, params and judge from --config: drop --scorer, --param "
                               "and --judge-base-url")
    if config_path is None and not scorer_name:
        raise click.UsageError("give --scorer NAME, or --config FILE --monitor NAME")
    if judge_base_url and not model:
        raise click.UsageError("--model is required with --judge-base-url")
    try:
        turn = Turn.model_validate_json(trace_path.read_bytes())
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()]
        raise click.ClickException(f"{trace_path}: not a turn: {'; '.join(problems)}") from None
    if config_path is not None:
        scorer, judge, monitor = _from_config(config_path, monitor_name or "")
    else:
        scorer, judge, monitor = _from_options(scorer_name or "", judge_base_url, model, params, reason, timeout)
    try:
        result = asyncio.run(_run(scorer, judge, turn, monitor))
    except JudgePaused as exc:
        raise click.ClickException(str(exc)) from None  # the judge refused the credentials or model
    click.echo(result.model_dump_json(indent=2))
    if result.status is ScoreStatus.FAILED:
        click.echo(f"vigil: error: the score failed ({result.error_type or 'error'}): "
                   f"{' '.join((result.reason or '').split())[:400]}", err=True)
        sys.exit(1)


def _from_config(path: Path, monitor_name: str) -> tuple[Scorer, Judge, str]:
    """The monitor's scorer and judge, built as the worker builds them from a config it has checked."""
    from vigil.worker.cli.config import ConfigError, check_config

    try:
        config = check_config(path).config
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if monitor_name not in {m.name for m in config.monitors}:
        known = ", ".join(m.name for m in config.monitors) or "none"
        raise click.UsageError(f"--monitor: no monitor {monitor_name!r} in {path} (known: {known})")
    monitor = config.monitor(monitor_name)
    judge = build_judge(config.judge(monitor.judge) if monitor.judge else None)
    return build_scorer(monitor, config), judge, monitor.name


def _from_options(scorer_name: str, judge_base_url: str | None, model: str | None, params: tuple[str, ...],
                  reason: str, timeout: float) -> tuple[Scorer, Judge, str]:
    if judge_base_url:
        judge_config = JudgeConfig(name="cli", base_url=judge_base_url, model=model, timeout_s=timeout,
                                   max_retry_age_s=timeout)
    else:
        judge_config = JudgeConfig(name="baseline", kind="baseline")
    try:
        scorer = build_scorer(MonitorConfig(name="cli", scorer=scorer_name, params=dict(map(_param, params)),
                                            judge=judge_config.name, reason=reason))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    return scorer, build_judge(judge_config), "cli"
