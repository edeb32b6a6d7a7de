"""Anchor sets: whether the judge's verdicts moved, told apart from whether the agent's answers did.

A monitor's anchors (``anchors: {dataset: FILE, every_minutes: 60}``) are labelled turns that never change: a
``vigil review export``, or any ``vigil eval`` JSON-lines file. On that schedule the writer re-scores them with the
monitor's current scorer and judge, through the judge stack production uses (limiter, pauses), never from the reply
cache (each run keys it apart: a cached reply would hide a judge that changed), and within the monitor's judge
budget (a paused budget skips the run; what a run spends is added to the ledger). One row per item per run lands in
``anchor_scores``.

The turns being fixed, a move of the judge's scores on them is the judge's doing (a provider's silent model update,
a prompt edit, a new judge model), never the agent's. So when a score alert fires for a monitor since T:

- each anchor item's mean score (score / scale) over the runs of the day before T is paired with its mean over the
  runs since T; the mean of the paired differences, with its 95% interval (Student's t), says whether the judge
  scores the same turns differently now;
- an interval wholly below zero, with the drop the alert saw: "the judge's verdicts on the anchor set changed since
  HH:MM (0.82 to 0.55 on the same 40 turns): likely judge drift";
- otherwise: "the judge is stable on the anchor set (0.82 to 0.81 on the same 40 turns): the agent changed";
- fewer than ``MIN_ITEMS`` items scored on both sides (no run since T yet, none before): nothing is said.

Agreement with the people's labels on each run (the verdict on the same side of the pass line as the label) is
kept in the rows for the report; attribution reads the paired scores, which need no pass line.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from clickhouse_connect.driver.client import Client
from vigil.schemas import MonitorConfig, ScoreResult, ScoreStatus, VigilConfig
from vigil.worker.judge.base import CallContext

__all__ = ["ANCHOR_COLUMNS", "MIN_ITEMS", "Attribution", "attribute", "run_anchors", "run_due"]

log = structlog.get_logger("vigil.anchors")

MIN_ITEMS = 5
BASELINE = timedelta(days=1)
ANCHOR_COLUMNS = ("run_id", "monitor", "scorer_version", "judge", "judge_model", "item_id", "human", "status",
                  "score", "scale", "reason", "cost_usd", "tokens", "run_at")
CLAIM_KEY = "vigil.anchors.claimed.{monitor}"


def _load(path: str) -> list[Any]:
    from vigil.worker.eval.items import load_dataset

    return list(load_dataset(Path(path), "jsonl").items)


async def _score_all(scorer: Any, judge: Any, monitor: MonitorConfig, items: Sequence[Any],
                     run_id: str) -> list[ScoreResult | BaseException]:
    import asyncio

    async def one(item: Any) -> ScoreResult:
        context = CallContext(monitor=monitor.name, scorer=scorer.name, scorer_version=scorer.version,
                              trace_id=f"anchor:{item.id}", fresh_run=run_id)
        return await scorer.score(item.turn, judge, context)

    return await asyncio.gather(*(one(item) for item in items), return_exceptions=True)


Insert = Callable[[list[list[Any]]], None]  # rows of anchor_scores, in ANCHOR_COLUMNS order


def run_anchors(rt: Any, insert: Insert, monitor: MonitorConfig, *, now: datetime) -> int:
    """Re-score ``monitor``'s anchor set once with its current scorer and judge; its rows go to ``insert`` (the
    ``anchor_scores`` table) and its spend to the budget ledger. Returns the number of items scored."""
    from vigil.worker.pipeline import budget, loop

    assert monitor.anchors is not None
    items = _load(monitor.anchors.dataset)
    scorer, judge = rt.scorer(monitor), rt.judge(monitor.judge)
    run_id = uuid.uuid4().hex[:16]
    results = loop.run(_score_all(scorer, judge, monitor, items, run_id))
    rows, usd, tokens = [], 0.0, 0
    for item, result in zip(items, results, strict=True):
        if isinstance(result, BaseException):
            status, score, scale, reason, cost, used, model = "failed", None, 1.0, str(result)[:500], 0.0, 0, ""
        else:
            usage = result.usage
            status = str(result.status)
            score = result.score if result.status == ScoreStatus.SCORED else None
            scale, reason, cost = result.scale, (result.reason or "")[:500], usage.cost_usd
            used, model = usage.prompt_tokens + usage.completion_tokens, result.judge_model or ""
        usd, tokens = usd + cost, tokens + used
        rows.append([run_id, monitor.name, scorer.version, monitor.judge or "", model, item.id, float(item.human),
                     status, score, scale, reason, cost, used, now])
    insert(rows)
    budget.spend(rt.redis, monitor.name, usd=usd, tokens=tokens, turns=0, now=now.timestamp())
    log.info("anchor set re-scored", monitor=monitor.name, items=len(rows), usd=round(usd, 6), tokens=tokens)
    return sum(r[7] == "scored" for r in rows)


def run_due(rt: Any, insert: Insert, config: VigilConfig, *, now: datetime | None = None) -> int:
    """Every monitor's anchor run that is due (one per ``every_minutes`` across the deployment, claimed in Redis),
    unless its judge budget is paused. Returns how many ran; a run that fails is logged and tried next time."""
    from vigil.worker.pipeline import budget

    now = now or datetime.now(UTC)
    ran = 0
    paced = budget.paces(rt.redis, config, now.timestamp())
    for monitor in config.monitors:
        if monitor.anchors is None or not monitor.judge:
            continue
        pace = budget.current(paced, monitor.name)
        if pace is not None and pace.paused:
            log.info("anchor run skipped: the monitor's judge budget is spent", monitor=monitor.name)
            continue
        ttl_ms = max(1, int(monitor.anchors.every_minutes * 60_000 * 0.9))
        if not rt.redis.set(CLAIM_KEY.format(monitor=monitor.name), str(time.time()), nx=True, px=ttl_ms):
            continue
        try:
            run_anchors(rt, insert, monitor, now=now)
            ran += 1
        except Exception as exc:  # noqa: BLE001 (the judge down, a file gone: the next interval tries again)
            log.warning("anchor run failed", monitor=monitor.name, error=f"{type(exc).__name__}: {exc}"[:300])
    return ran


@dataclass(frozen=True)
class Attribution:
    """What the anchors say of a change since ``since``: the paired means before and after and the interval of
    their difference."""

    before: float
    after: float
    low: float
    high: float
    items: int
    since: datetime

    @property
    def judge_moved(self) -> bool:
        """The judge scores the same turns lower: the interval of the paired difference lies below zero."""
        return self.high < 0

    def sentence(self) -> str:
        figures = f"{self.before:.2f} to {self.after:.2f} on the same {self.items} turns"
        if self.judge_moved:
            return (f"the judge's verdicts on the anchor set changed since {self.since:%H:%M} ({figures}): "
                    "likely judge drift")
        if self.low > 0:
            return f"the judge scores the anchor set higher ({figures}): the agent changed, by more than it shows"
        return f"the judge is stable on the anchor set ({figures}): the agent changed"


_PAIRED = """
SELECT item_id,
       avgIf(score / if(scale > 0, scale, 1), run_at < {since:DateTime64(3)}) AS before,
       avgIf(score / if(scale > 0, scale, 1), run_at >= {since:DateTime64(3)}) AS after
FROM anchor_scores FINAL
WHERE monitor = {monitor:String} AND status = 'scored' AND score IS NOT NULL
  AND run_at >= {since:DateTime64(3)} - INTERVAL 1 DAY AND run_at <= {until:DateTime64(3)}
GROUP BY item_id
HAVING countIf(run_at < {since:DateTime64(3)}) > 0 AND countIf(run_at >= {since:DateTime64(3)}) > 0"""


def attribute(client: Client, monitor: str, since: datetime, until: datetime) -> Attribution | None:
    """The anchors' verdict on a change of ``monitor`` since ``since``; None when too few items were scored on both
    sides to say."""
    rows = client.query(_PAIRED, parameters={"monitor": monitor, "since": since, "until": until}).result_rows
    pairs = [(b, a) for _, b, a in rows if b is not None and a is not None and not (math.isnan(b) or math.isnan(a))]
    if len(pairs) < MIN_ITEMS:
        return None
    # imported here: scipy.stats costs ~0.8 s of CPU, which only a process that computes an attribution pays
    from scipy import stats

    diffs = [a - b for b, a in pairs]
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return Attribution(before=sum(b for b, _ in pairs) / n, after=sum(a for _, a in pairs) / n,
                       low=mean - half, high=mean + half, items=n, since=since)
