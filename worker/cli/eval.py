"""``vigil eval``: a labelled dataset through a scorer and its judge; how often the judge agrees with people.

Exit status: 0, or 1 when the dataset had bad lines (the others were still evaluated and reported) or the judge is
paused, 2 for a usage mistake.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from vigil.schemas import JudgeConfig, MonitorConfig, VigilConfig
from vigil.worker.judge import JudgePaused, build_judge

__all__ = ["eval_command"]


def _params(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--params") from None
    if not isinstance(value, dict):
        raise click.BadParameter("expected a JSON object", param_hint="--params")
    return value


def _setup(monitor_name: str | None, scorer: str | None, params: str | None, base_url: str | None,
           model: str | None) -> tuple[MonitorConfig, JudgeConfig | None, VigilConfig | None]:
    if monitor_name:
        if scorer or params or base_url:
            raise click.UsageError("--monitor takes the scorer, params and judge from VIGIL_CONFIG: "
                                   "drop --scorer, --params and --judge-base-url")
        from vigil.worker.settings import monitor_config

        try:
            config = monitor_config()
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"VIGIL_CONFIG: {str(exc).splitlines()[0]}") from None
        if monitor_name not in {m.name for m in config.monitors}:
            known = ", ".join(m.name for m in config.monitors)
            raise click.UsageError(f"--monitor: no monitor {monitor_name!r} in the config (known: {known})")
        monitor = config.monitor(monitor_name)
        return monitor, config.judge(monitor.judge) if monitor.judge else None, config
    if not scorer:
        raise click.UsageError("give --scorer NAME (or --monitor NAME from VIGIL_CONFIG)")
    if base_url and not model:
        raise click.UsageError("--model is required with --judge-base-url")
    judge = (JudgeConfig(name="eval", base_url=base_url, model=model) if base_url
             else JudgeConfig(name="baseline", kind="baseline"))
    try:
        monitor = MonitorConfig(name="eval", scorer=scorer, params=_params(params), judge=judge.name)
    except ValueError as exc:
        raise click.UsageError(str(exc).splitlines()[-1].strip()) from None
    return monitor, judge, None


async def _run(dataset, scorer, judge, *, concurrency, params, limit, pass_line, progress: Progress | None):
    from vigil.worker.eval.runner import evaluate

    total = len(dataset.items[:limit] if limit is not None else dataset.items)
    task = progress.add_task("eval", total=total) if progress else None
    try:
        return await evaluate(dataset, scorer, judge, concurrency=concurrency, params=params, limit=limit,
                              pass_line=pass_line, on_done=(lambda k: progress.advance(task, k)) if progress else None)
    finally:
        if hasattr(judge, "aclose"):
            await judge.aclose()


@click.command("eval")
@click.option("--dataset", "dataset_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The labelled items.")
@click.option("--format", "dataset_format", type=click.Choice(["jsonl", "ragchecker", "llmbar"]), default="jsonl",
              show_default=True, help="jsonl: {id, group?, human, turn} a line; ragchecker / llmbar: those "
              "published files as they are.")
@click.option("--scorer", default=None, help="The scorer to evaluate.")
@click.option("--params", default=None, metavar="JSON", help="The scorer's params, a JSON object.")
@click.option("--monitor", "monitor_name", default=None,
              help="Take scorer, params and judge from this monitor of VIGIL_CONFIG.")
@click.option("--judge-base-url", envvar="VIGIL_JUDGE_BASE_URL",
              help="An OpenAI-compatible endpoint; without one, the offline baseline judge (a heuristic) scores.")
@click.option("--model", envvar="VIGIL_JUDGE_MODEL", help="The judge model (needed with --judge-base-url).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N items.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: agreement, cost, reference, items, misjudged (the items the judge got "
                   "wrong, by id).")
@click.option("--keep/--no-keep", default=True, show_default=True,
              help="Keep the run in the judge_evals table (CLICKHOUSE_DSN, else the embedded store; while a worker "
                   "holds that, through its writer on REDIS_URL).")
def eval_command(dataset_path: Path, dataset_format: str, scorer: str | None, params: str | None,
                 monitor_name: str | None, judge_base_url: str | None, model: str | None, limit: int | None,
                 as_json: bool, keep: bool) -> None:
    """How often a judge agrees with people: accuracy and kappa, the items it got wrong with the people's comments,
    pairwise accuracy where the dataset has pairs, rank correlations, cost."""
    from vigil.worker.eval.items import load_dataset
    from vigil.worker.eval.keep import NotKept
    from vigil.worker.eval.keep import keep as keep_run
    from vigil.worker.eval.show import print_eval
    from vigil.worker.scorers import build_scorer
    from vigil.worker.settings import get_settings

    monitor, judge_config, config = _setup(monitor_name, scorer, params, judge_base_url, model)
    try:
        scorer_obj = build_scorer(monitor, config)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        dataset = load_dataset(dataset_path, dataset_format)  # type: ignore[arg-type]
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    for bad in dataset.bad:
        click.echo(f"{dataset_path}: {bad}", err=True)
    if not dataset.items:
        raise click.ClickException(f"{dataset_path}: no item could be read")

    judge = build_judge(judge_config)
    err = Console(stderr=True)
    try:
        with Progress(TextColumn(f"judging {dataset_path.name}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, transient=True) as progress:
            concurrency = judge_config.max_concurrency if judge_config else 16  # no judge: the CPU's work alone
            report = asyncio.run(_run(dataset, scorer_obj, judge, concurrency=concurrency,
                                      params=monitor.params, limit=limit,
                                      pass_line=(config or VigilConfig()).pass_line(monitor), progress=progress))
    except JudgePaused as exc:
        raise click.ClickException(str(exc)) from None

    if keep:
        try:
            where = keep_run(report, redis_url=get_settings().redis_url)
            note = f"kept as run {report.run_id} in judge_evals ({where})"
        except NotKept as exc:
            note = f"not kept: {exc}"
        click.echo(note, err=True)
    if as_json:
        body = report.model_dump(mode="json", include={"run_id", "dataset", "format", "dataset_sha256", "scorer",
                                                       "scorer_version", "params", "judge", "judge_model",
                                                       "started_at", "ended_at", "agreement", "cost", "reference",
                                                       "items", "bad_lines"})
        click.echo(json.dumps(body | {"misjudged": [row.id for row in report.misjudged()]}))
    else:
        print_eval(report)
    if dataset.bad:
        sys.exit(1)
