"""The golden-set probe: the multi-turn evaluation of a live agent over a dataset, every result written to ClickHouse.

``vigil probe --dataset golden.jsonl --agent-url URL`` asks the agent each golden question, runs the T1–T7 dialogue
(``worker.scorers.multi_turn``) and writes, per question, a ``traces`` row (the question and the agent's first
answer), a ``scores`` row (scorer ``multi_turn``, environment ``probe``) and its ``judge_calls`` rows. Each run has
its own id, so every run is a new point in the time series, and a re-run under the same ``--run-id`` replaces its
rows instead of adding to them. The probe opens the store itself: on chDB, no other process may hold it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from statistics import fmean

import click
from clickhouse_connect.driver.client import Client
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from schemas import JudgeConfig, MonitorConfig, ScoreResult, ScoreStatus, Turn
from schemas.rows import JudgeCallRow, trace_row
from worker.judge import Judge, JudgePaused, build_judge
from worker.rows import score_row
from worker.scorers.multi_turn import Agent, MultiTurn, OpenAIAgent
from worker.scorers.rag_correctness import GoldenItem, load_golden
from worker.store import connect, migrate

__all__ = ["ProbeLabels", "probe_command", "rows_for", "run_probe", "write_rows"]


@dataclass(frozen=True)
class ProbeLabels:
    """How a probe run's rows are labelled."""

    run_id: str
    monitor: str = "probe"
    project: str = "default"
    agent: str = "agent"
    judge: str = "probe-judge"
    environment: str = "probe"


async def run_probe(
    items: Sequence[GoldenItem], *, scorer: MultiTurn, agent: Agent, judge: Judge, concurrency: int = 4,
    on_result: Callable[[int, GoldenItem, ScoreResult, datetime], None] | None = None,
) -> list[ScoreResult]:
    """The dialogue for every item, ``concurrency`` at a time; ``on_result(index, item, result, started_at)`` as
    each finishes. Results come back in the items' order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, item: GoldenItem) -> ScoreResult:
        async with gate:
            started = datetime.now(UTC)
            result = await scorer.evaluate(question=item.question, reference=item.reference, agent=agent,
                                           judge=judge)
        if on_result is not None:
            on_result(index, item, result, started)
        return result

    return list(await asyncio.gather(*(one(i, item) for i, item in enumerate(items))))


def rows_for(index: int, item: GoldenItem, result: ScoreResult, labels: ProbeLabels,
             started_at: datetime) -> dict[str, list[BaseModel]]:
    """The ``traces``, ``scores`` and ``judge_calls`` rows of one probed question."""
    history = result.details.get("history") or []
    turn = Turn(trace_id=f"probe:{labels.run_id}:{item.id or index}", session_id=labels.run_id,
                project=labels.project, agent=labels.agent, environment=labels.environment, started_at=started_at,
                input=[{"role": "user", "content": item.question}],
                output=history[0]["answer"] if history else "", reference=item.reference, tags=["probe"])
    monitor = MonitorConfig(name=labels.monitor, scorer="multi_turn", judge=labels.judge)
    score = score_row(turn, monitor, result)
    calls = [JudgeCallRow.of(call, i, score=score) for i, call in enumerate(result.calls)]
    return {"traces": [trace_row(turn)], "scores": [score], "judge_calls": calls}


def write_rows(client: Client, tables: dict[str, list[BaseModel]]) -> None:
    for table, rows in tables.items():
        if rows:
            columns = list(type(rows[0]).model_fields)
            client.insert(table, [[getattr(row, c) for c in columns] for row in rows], column_names=columns)


def _summary(results: Sequence[ScoreResult]) -> str:
    counts = {status: sum(1 for r in results if r.status is status) for status in ScoreStatus}
    line = ", ".join(f"{n} {status}" for status, n in counts.items())
    scored = [r.details for r in results if r.status is ScoreStatus.SCORED]
    if scored:
        means = {key: fmean(d[key] for d in scored) for key in ("wscore", "lscore", "mscore")}
        line += "; mean " + ", ".join(f"{key} {value:.3f}" for key, value in means.items())
    return line


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
    console.print(f"probe {labels.run_id}: {len(items)} questions, agent {agent_url} ({agent_model}), judge "
                  f"{judge.model}{' (offline baseline)' if judge_config.kind == 'baseline' else ''}, "
                  f"at most {turns} turns")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("probing", total=len(items))

        def record(index: int, item: GoldenItem, result: ScoreResult, started_at: datetime) -> None:
            write_rows(client, rows_for(index, item, result, labels, started_at))
            progress.advance(task)

        async def probe() -> list[ScoreResult]:
            agent = OpenAIAgent(agent_url, model=agent_model, api_key=os.environ.get(agent_api_key_env))
            try:
                return await run_probe(items, scorer=scorer, agent=agent, judge=judge, concurrency=concurrency,
                                       on_result=record)
            finally:
                await agent.aclose()

        try:
            results = asyncio.run(probe())
        except JudgePaused as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"probe {labels.run_id}: {_summary(results)}")
