"""``vigil score``: run one scorer on one trace file and print the result as JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click
from pydantic import ValidationError
from vigil.schemas import JudgeConfig, MonitorConfig, ScoreResult, ScoreStatus, Turn
from vigil.worker.judge import Judge, JudgePaused, LLMJudge, build_judge
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


async def _run(scorer: Scorer, judge: Judge, turn: Turn) -> ScoreResult:
    try:
        return await scorer.score(turn, judge, scorer.context_for(turn, monitor="cli"))
    finally:
        if isinstance(judge, LLMJudge):
            await judge.aclose()


@click.command("score")
@click.option("--scorer", "scorer_name", required=True, type=click.Choice(sorted(SCORERS)), help="The scorer to run.")
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
def score_command(scorer_name: str, trace_path: Path, judge_base_url: str | None, model: str | None,
                  params: tuple[str, ...], reason: str, timeout: float) -> None:
    """Score one trace and print the result as JSON on stdout (exit 1 when the score failed, 2 when the judge is
    paused); logs and errors go to stderr, so the output pipes into jq.

    \b
    Examples:
      vigil score --scorer answer_relevancy --trace turn.json
      vigil score --scorer prompt_alignment --trace turn.json --param evaluation_mode=both
      vigil score --scorer answer_relevancy --trace turn.json \\
          --judge-base-url http://localhost:8000/v1 --model gpt-4o-mini --timeout 20 | jq .score
    """
    if judge_base_url and not model:
        raise click.UsageError("--model is required with --judge-base-url")
    try:
        turn = Turn.model_validate_json(trace_path.read_bytes())
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()]
        raise click.ClickException(f"{trace_path}: not a turn: {'; '.join(problems)}") from None
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
    try:
        result = asyncio.run(_run(scorer, build_judge(judge_config), turn))
    except JudgePaused as exc:
        raise click.ClickException(str(exc)) from None  # the judge refused the credentials or model
    click.echo(result.model_dump_json(indent=2))
    if result.status is ScoreStatus.FAILED:
        click.echo(f"vigil: error: the score failed ({result.error_type or 'error'}): "
                   f"{' '.join((result.reason or '').split())[:400]}", err=True)
        sys.exit(1)
