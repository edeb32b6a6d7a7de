"""``vigil probe``: the golden-set probe of a live agent (``vigil.worker.scorers.probe``), results to ClickHouse."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import datetime

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from vigil.schemas import JudgeConfig, ScoreResult
from vigil.worker.cli.errors import redact
from vigil.worker.judge import JudgePaused, build_judge
from vigil.worker.scorers.multi_turn import MultiTurn, OpenAIAgent
from vigil.worker.scorers.probe import (
    ProbeLabels,
    rows_for,
    run_probe,
    summary,
    write_rows,
)
from vigil.worker.scorers.rag_correctness import GoldenItem, load_golden
from vigil.worker.store import connect, migrate

__all__ = ["probe_command"]


@click.command("probe")
@click.option("--dataset", required=True, type=click.Path(exists=True, dir_okay=False),
              help='Golden set JSONL: {"question", "reference", "id"?} per line.')
@click.option("--agent-url", required=True, help="The agent under test: an OpenAI-compatible base URL.")
@click.option("--agent-model", default="default", show_default=True)
@click.option("--agent-api-key-env", default="AGENT_API_KEY", show_default=True,
              help="The environment variable holding the agent's API key, if it needs one.")
@click.option("--agent-name", default=None, help="The agent label on the rows (default: --agent-model).")
@click.option("--judge-base-url", default=None, help="An OpenAI-compatible judge; without it, the offline baseline.")
@click.option("--model", "judge_model", default="default", show_default=True, help="The judge model.")
@click.option("--retriever-path", default=None, type=click.Path(exists=True),
              help="Knowledge base for the evaluation agent's contexts: a folder of .txt/.md or a JSONL.")
@click.option("--top-k", default=3, show_default=True, type=click.IntRange(1))
@click.option("--turns", default=5, show_default=True, type=click.IntRange(1, 20))
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1))
@click.option("--monitor", default="probe", show_default=True)
@click.option("--project", default="default", show_default=True)
@click.option("--run-id", default=None, help="Re-use to replace a run's rows (default: a new id).")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB).")
def probe_command(dataset: str, agent_url: str, agent_model: str, agent_api_key_env: str, agent_name: str | None,
                  judge_base_url: str | None, judge_model: str, retriever_path: str | None, top_k: int, turns: int,
                  concurrency: int, monitor: str, project: str, run_id: str | None, dsn: str | None) -> None:
    """Probe a live agent with a golden set: multi-turn evaluation (seed 002, method II), results to ClickHouse."""
    items = load_golden(dataset)
    judge_config = (JudgeConfig(name="probe-judge", base_url=judge_base_url, model=judge_model)
                    if judge_base_url else JudgeConfig(name="probe-baseline", kind="baseline"))
    judge = build_judge(judge_config)
    retriever = {"path": retriever_path, "top_k": top_k} if retriever_path else None
    scorer = MultiTurn(turns=turns, retriever=retriever)
    labels = ProbeLabels(run_id=run_id or uuid.uuid4().hex[:12], monitor=monitor, project=project,
                         agent=agent_name or agent_model, judge=judge_config.name)
    client = connect(dsn)
    migrate(client)
    console = Console(stderr=True)
    console.print(f"probe {labels.run_id}: {len(items)} questions, agent {redact(agent_url)} ({agent_model}), judge "
                  f"{judge.model}{' (offline baseline)' if judge_config.kind == 'baseline' else ''}, "
                  f"at most {turns} turns")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("probing", total=len(items))

        def record(index: int, item: GoldenItem, result: ScoreResult, started_at: datetime) -> None:
            write_rows(client, rows_for(index, item, result, labels, started_at))
            progress.advance(task)

        async def probe() -> list[ScoreResult]:
            agent = OpenAIAgent(agent_url, model=agent_model, api_key=os.environ.get(agent_api_key_env),
                                origin="probe")
            try:
                return await run_probe(items, scorer=scorer, agent=agent, judge=judge, concurrency=concurrency,
                                       on_result=record, monitor=monitor)
            finally:
                await agent.aclose()

        try:
            results = asyncio.run(probe())
        except JudgePaused as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"probe {labels.run_id}: {summary(results)}")
