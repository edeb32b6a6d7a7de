"""Run labelled items through a scorer and its judge, as production does, and gather the report.

Every item goes through the scorer's ``score(turn, judge)`` with the real judge stack (limiter, cache, pauses),
up to ``concurrency`` at a time. Items whose turns are identical (same trace, same text) are scored once and share
the result, so a dataset where several annotators labelled the same answers costs one judge run per answer.
A paused judge stops the run (``JudgePaused`` propagates): an evaluation against a judge that refuses is no result.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from vigil.schemas import JudgeUsage, ScoreResult, ScoreStatus, Turn
from vigil.schemas.pass_line import DEFAULT_LINE, passes
from vigil.worker.eval.items import Dataset, EvalItem
from vigil.worker.eval.stats import Agreement, Judged, Pair, agreement, pairs
from vigil.worker.judge.base import Judge, JudgePaused
from vigil.worker.judge.baseline import word_recall
from vigil.worker.scorers.base import Scorer

__all__ = ["Cost", "EvalReport", "ItemRow", "Outcome", "evaluate", "reference_agreement", "score_items"]


class ItemRow(BaseModel):
    id: str
    group: str | None
    human: float
    status: str  # scored | unscored | failed | abstained
    score: float | None  # on the scorer's scale
    reason: str | None = None
    scale: float = 1.0
    error_type: str | None = None
    comment: str | None = None  # what the people said of the item


class Cost(BaseModel):
    judge_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    scored_turns: int = 0  # distinct turns scored (items sharing a turn share one run)
    p50_latency_ms: float | None = None  # per scored turn, wall time
    p95_latency_ms: float | None = None


class EvalReport(BaseModel):
    run_id: str
    dataset: str
    format: str
    dataset_sha256: str
    scorer: str
    scorer_version: str
    params: dict[str, Any] = Field(default_factory=dict)
    judge: str
    judge_model: str
    started_at: datetime
    ended_at: datetime
    agreement: Agreement
    cost: Cost
    reference: Agreement | None = None  # plain word recall of the items' reference answers, where they carry one
    items: list[ItemRow]
    bad_lines: list[str] = Field(default_factory=list)

    def judged(self) -> list[Judged]:
        return [_judged(row) for row in self.items]

    def disagreements(self, limit: int = 10) -> list[Pair]:
        """The pairs the judge ordered against the people, strongest human preference first."""
        wrong = [p for p in pairs(self.judged()) if not p.correct]
        return sorted(wrong, key=lambda p: (-p.margin, p.better.id))[:limit]

    def misjudged(self) -> list[ItemRow]:
        """The single items the judge and the people judged differently, the judge's surest verdict first: the
        judge's verdict is its score at the line kappa reads (``agreement.kappa_threshold``), the people's the
        higher of the two human levels. None where kappa is not measured (human values on more than two levels);
        items the judge gave no score are counted in the agreement table, not listed."""
        line = self.agreement.kappa_threshold
        if line is None:
            return []
        good = max(row.human for row in self.items)
        found = [(row, judged) for row, judged in zip(self.items, self.judged(), strict=True)
                 if judged.score is not None and passes(judged.score, 1.0, line) != (row.human == good)]
        return [row for row, judged in sorted(found, key=lambda f: (-abs(f[1].score - line), f[0].id))]


@dataclass
class Outcome:
    result: ScoreResult | None
    latency_ms: float
    error: str | None = None  # an exception the scorer let through (a bug): the item is failed


def _status(result: ScoreResult | None) -> str:
    if result is None:
        return "failed"
    if result.label == "abstained":
        return "abstained"
    return str(result.status)


def _row(item: EvalItem, outcome: Outcome) -> ItemRow:
    result = outcome.result
    if result is None:
        return ItemRow(id=item.id, group=item.group, human=item.human, status="failed", score=None,
                       reason=outcome.error, error_type="exception", comment=item.comment)
    score = result.score if result.status is ScoreStatus.SCORED else None
    return ItemRow(id=item.id, group=item.group, human=item.human, status=_status(result), score=score,
                   reason=result.reason, scale=result.scale, error_type=result.error_type, comment=item.comment)


def _judged(row: ItemRow) -> Judged:
    score = None if row.score is None else row.score / (row.scale or 1.0)
    return Judged(row.id, row.group, row.human, row.status, score)


def _turn_key(turn: Turn) -> str:
    return turn.model_dump_json(exclude={"started_at", "ended_at"})


async def score_items(
    items: Sequence[EvalItem], scorer: Scorer, judge: Judge, *, concurrency: int,
    on_done: Callable[[int], None] | None = None,
) -> dict[str, Outcome]:
    """Each distinct turn scored once, ``concurrency`` at a time; outcomes keyed by the turn (``_turn_key``).
    ``on_done(k)`` is called as items finish, with how many items the finished turn stands for."""
    limit = asyncio.Semaphore(max(1, concurrency))
    by_key: dict[str, list[EvalItem]] = {}
    for item in items:
        by_key.setdefault(_turn_key(item.turn), []).append(item)

    async def one(key: str, turn: Turn) -> tuple[str, Outcome]:
        async with limit:
            started = time.perf_counter()
            try:
                result, error = await scorer.score(turn, judge), None
            except JudgePaused:
                raise
            except Exception as exc:  # noqa: BLE001 (a scorer bug fails this item, not the run)
                result, error = None, f"{type(exc).__name__}: {exc}"
            outcome = Outcome(result, (time.perf_counter() - started) * 1000, error)
        if on_done:
            on_done(len(by_key[key]))
        return key, outcome

    tasks = [asyncio.ensure_future(one(key, members[0].turn)) for key, members in by_key.items()]
    try:
        return dict(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()


def cost_of(outcomes: Sequence[Outcome]) -> Cost:
    usage = JudgeUsage.of([call for o in outcomes if o.result for call in o.result.calls])
    latencies = [o.latency_ms for o in outcomes]
    p50, p95 = (np.percentile(latencies, [50, 95]).tolist() if latencies else (None, None))
    return Cost(judge_calls=usage.calls, cache_hits=usage.cache_hits, prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens, cost_usd=usage.cost_usd, scored_turns=len(outcomes),
                p50_latency_ms=p50, p95_latency_ms=p95)


def reference_agreement(items: Sequence[EvalItem]) -> Agreement | None:
    """The same agreement for plain word recall of each item's reference answer; None when no item carries one."""
    judged = [Judged(i.id, i.group, i.human, "scored", word_recall(i.turn.output, i.turn.reference))
              for i in items if i.turn.reference and i.turn.reference.strip()]
    return agreement(judged) if judged else None


async def evaluate(
    dataset: Dataset, scorer: Scorer, judge: Judge, *, concurrency: int, params: dict[str, Any] | None = None,
    limit: int | None = None, on_done: Callable[[int], None] | None = None, pass_line: float = DEFAULT_LINE,
) -> EvalReport:
    """Score the dataset's items (the first ``limit`` of them) and measure the judge's agreement with the labels,
    the judge's verdict read at ``pass_line`` (the monitor's, ``VigilConfig.pass_line``)."""
    items = dataset.items[:limit] if limit is not None else dataset.items
    started = datetime.now(UTC)
    outcomes = await score_items(items, scorer, judge, concurrency=concurrency, on_done=on_done)
    rows = [_row(item, outcomes[_turn_key(item.turn)]) for item in items]
    return EvalReport(
        run_id=uuid.uuid4().hex, dataset=dataset.path, format=dataset.format, dataset_sha256=dataset.sha256,
        scorer=scorer.name, scorer_version=scorer.version, params=params or {}, judge=judge.name,
        judge_model=judge.model, started_at=started, ended_at=datetime.now(UTC),
        agreement=agreement([_judged(r) for r in rows], pass_line), cost=cost_of(list(outcomes.values())),
        reference=reference_agreement(items), items=rows, bad_lines=[str(b) for b in dataset.bad],
    )
