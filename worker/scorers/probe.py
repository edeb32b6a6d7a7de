"""The golden-set probe: the multi-turn evaluation of a live agent over a dataset, every result written to ClickHouse.

``vigil probe --dataset golden.jsonl --agent-url URL`` (``vigil.worker.cli.probe``) asks the agent each golden question, runs the T1–T7 dialogue
(``vigil.worker.scorers.multi_turn``) and writes, per question, a ``traces`` row (the question and the agent's first
answer), a ``scores`` row (scorer ``multi_turn``, environment ``probe``) and its ``judge_calls`` rows. Each run has
its own id, so every run is a new point in the time series, and a re-run under the same ``--run-id`` replaces its
rows instead of adding to them. The probe opens the store itself: on chDB, no other process may hold it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from statistics import fmean

from clickhouse_connect.driver.client import Client
from pydantic import BaseModel
from vigil.schemas import MonitorConfig, ScoreResult, ScoreStatus, Turn
from vigil.schemas.rows import JudgeCallRow, score_row, trace_row
from vigil.worker.judge import Judge
from vigil.worker.judge.base import CallContext
from vigil.worker.scorers.multi_turn import Agent, MultiTurn
from vigil.worker.scorers.rag_correctness import GoldenItem

__all__ = ["ProbeLabels", "rows_for", "run_probe", "summary", "write_rows"]


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
    on_result: Callable[[int, GoldenItem, ScoreResult, datetime], None] | None = None, monitor: str = "probe",
) -> list[ScoreResult]:
    """The dialogue for every item, ``concurrency`` at a time; ``on_result(index, item, result, started_at)`` as
    each finishes. Results come back in the items' order. The judge calls are the ``monitor``'s, origin ``probe``."""
    gate = asyncio.Semaphore(concurrency)
    context = CallContext(monitor=monitor, scorer=scorer.name, scorer_version=scorer.version, origin="probe")

    async def one(index: int, item: GoldenItem) -> ScoreResult:
        async with gate:
            started = datetime.now(UTC)
            result = await scorer.evaluate(question=item.question, reference=item.reference, agent=agent,
                                           judge=judge, context=context)
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
                output=history[0]["answer"] if history else "", reference=item.reference, tags=["probe"],
                origin="probe")
    monitor = MonitorConfig(name=labels.monitor, scorer="multi_turn", judge=labels.judge)
    score = score_row(turn, monitor, result)
    calls = [JudgeCallRow.of(call, i, score=score) for i, call in enumerate(result.calls)]
    return {"traces": [trace_row(turn)], "scores": [score], "judge_calls": calls}


def write_rows(client: Client, tables: dict[str, list[BaseModel]]) -> None:
    for table, rows in tables.items():
        if rows:
            columns = list(type(rows[0]).model_fields)
            client.insert(table, [[getattr(row, c) for c in columns] for row in rows], column_names=columns)


def summary(results: Sequence[ScoreResult]) -> str:
    counts = {status: sum(1 for r in results if r.status is status) for status in ScoreStatus}
    line = ", ".join(f"{n} {status}" for status, n in counts.items())
    scored = [r.details for r in results if r.status is ScoreStatus.SCORED]
    if scored:
        means = {key: fmean(d[key] for d in scored) for key in ("wscore", "lscore", "mscore")}
        line += "; mean " + ", ".join(f"{key} {value:.3f}" for key, value in means.items())
    return line
