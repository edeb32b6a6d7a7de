"""``build_report``: run the dashboard panels' SQL over one time range and gather the rows into a ``Report``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client
from vigil.worker.report.compare import latest_changes
from vigil.worker.report.model import (
    AgreementRow,
    AlertMark,
    AlertRow,
    BandPoint,
    DeadLetterGroup,
    DeliveryRow,
    DetectorMode,
    DistributionBin,
    FunnelRow,
    JudgeEval,
    JudgeSummary,
    LagPoint,
    MonitorChart,
    MonitorSummary,
    PausedJudge,
    Point,
    Report,
    ScoreSeries,
    SpendRow,
    UnscoredReason,
    WorstTurn,
)
from vigil.worker.report.status import latest_alerts, status
from vigil.worker.store.queries import PANELS, REPORT_QUERIES, Query, render

__all__ = ["build_report", "chart_interval", "pick_interval", "run_query"]

_INTERVALS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400)
_DEFAULT_SPAN = timedelta(hours=24)
MIN_TURNS_PER_BUCKET = 8  # a mean of fewer sampled scores has an interval too wide to read a change from


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)  # every vigil DateTime column is UTC
    return value


def run_query(client: Client, query: Query, **render_args: Any) -> list[dict[str, Any]]:
    """Render and run one named query; rows as dicts keyed by the query's declared columns (NaN → None)."""
    result = client.query(render(query.sql, **render_args))
    return [dict(zip(query.columns, map(_clean, row), strict=True)) for row in result.result_rows]


def pick_interval(start: datetime, end: datetime, *, max_points: int = 120) -> int:
    """The smallest bucket (in seconds) that keeps a chart at or under ``max_points`` points."""
    span = max((end - start).total_seconds(), 60.0)
    return next((s for s in _INTERVALS if span / s <= max_points), _INTERVALS[-1])


def chart_interval(minutes: Sequence[tuple[datetime, int]], start: datetime, end: datetime, *,
                   min_turns: int = MIN_TURNS_PER_BUCKET, max_points: int = 120) -> int:
    """The bucket width for one monitor's chart, chosen from how its scored turns spread over time.

    ``minutes`` holds (minute, scored turns) where there were any. The smallest width (at most ``max_points``
    buckets over the range) whose typical bucket, the median of the non-empty ones, holds ``min_turns`` scores;
    the widest when none does. Bursty traffic gets narrow buckets where it is dense, sparse traffic wide ones.
    """
    floor = pick_interval(start, end, max_points=max_points)
    for width in (w for w in _INTERVALS if w >= floor):
        buckets: dict[int, int] = {}
        for minute, turns in minutes:
            key = int(minute.timestamp()) // width
            buckets[key] = buckets.get(key, 0) + turns
        counts = sorted(buckets.values())
        if counts and counts[(len(counts) - 1) // 2] >= min_turns:
            return width
    return _INTERVALS[-1]


def _marks(alerts: list[AlertRow], agent: str, monitor: str, end: datetime) -> list[AlertMark]:
    """The alerts about ``agent``'s ``monitor`` (an alert that names no agent is about every agent of its monitor),
    each from the change it names (else when it fired) to ``end`` while it fires, else to its resolution."""
    return [AlertMark(start=a.since or a.fired_at, end=end if a.state == "firing" else a.updated_at,
                      firing=a.state == "firing", sentence=a.message)
            for a in latest_alerts(alerts) if a.monitor == monitor and agent in (a.about() or [agent])]


def _density(client: Client, args: dict[str, Any]) -> dict[tuple[str, str], list[tuple[datetime, int]]]:
    density: dict[tuple[str, str], list[tuple[datetime, int]]] = {}
    for row in run_query(client, REPORT_QUERIES["score_density"], **args):
        density.setdefault((row["agent"], row["monitor"]), []).append((row["minute"], row["scored"]))
    return density


def _charts(client: Client, args: dict[str, Any], alerts: list[AlertRow],
            only: set[tuple[str, str]] | None = None, min_turns: int = MIN_TURNS_PER_BUCKET) -> list[MonitorChart]:
    """One chart per (agent, monitor) (or those in ``only``): each its own bucket width, the panel's SQL run once
    per width."""
    density = {k: v for k, v in _density(client, args).items() if only is None or k in only}
    start, end = args["start"], args["end"]
    widths = {key: chart_interval(minutes, start, end, min_turns=min_turns) for key, minutes in density.items()}
    charts = {key: MonitorChart(agent=key[0], monitor=key[1], interval_s=width, start=start, end=end,
                                alerts=_marks(alerts, key[0], key[1], end)) for key, width in widths.items()}
    for width in sorted(set(widths.values())):
        for row in run_query(client, PANELS["score_mean_ci"], **{**args, "interval_s": width}):
            key = (row["agent"], row["monitor"])
            if widths.get(key) == width and row["mean_score"] is not None:
                charts[key].points.append(BandPoint(time=row["time"], turns=row["turns"], mean=row["mean_score"],
                                                    ci_low=row["ci_low"], ci_high=row["ci_high"]))
    return [charts[key] for key in sorted(charts, key=lambda k: (k[1], k[0]))]


ZOOM = 3  # a firing alert's chart shows this many times the time since the change before it, to compare with
FIRING_MIN_TURNS = 3  # its buckets are narrower (wider intervals): the change itself is what it must show


def _firing_charts(client: Client, args: dict[str, Any], firing: list[AlertRow],
                   charts: list[MonitorChart]) -> list[MonitorChart]:
    """The charts of the agents each firing alert is about, from ``ZOOM`` times its age before the change to the
    end (within the report's range), so the change is not a sliver at the right edge of weeks of history."""
    out: list[MonitorChart] = []
    for alert in firing:
        about = alert.about() or [c.agent for c in charts if c.monitor == alert.monitor]
        keys = {(agent, alert.monitor) for agent in about}
        since = alert.since or alert.fired_at
        start = max(args["start"], since - ZOOM * max(args["end"] - since, timedelta(hours=1)))
        out += _charts(client, {**args, "start": start}, [alert], keys, min_turns=FIRING_MIN_TURNS)
    return out


def _data_start(client: Client, end: datetime) -> datetime:
    """Where the data starts (the report covers all of it by default), or a day before ``end`` when empty."""
    rows = client.query("SELECT min(bucket), count() FROM scores_1h").result_rows
    first, count = rows[0] if rows else (None, 0)
    if not count or first is None:
        return end - _DEFAULT_SPAN
    return min(_clean(first), end - timedelta(hours=1))


def _series(rows: list[dict[str, Any]]) -> list[ScoreSeries]:
    grouped: dict[tuple[str, str, str], ScoreSeries] = {}
    for row in rows:
        key = (row["agent"], row["monitor"], row["scorer_version"])
        series = grouped.setdefault(key, ScoreSeries(agent=key[0], monitor=key[1], scorer_version=key[2]))
        if row["mean_score"] is not None:
            series.points.append(Point(time=row["time"], value=row["mean_score"]))
    return [grouped[key] for key in sorted(grouped)]


def build_report(
    client: Client,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    now: datetime | None = None,
    variables: Mapping[str, Sequence[str] | None] | None = None,
) -> Report:
    """The dashboard's main panels from ``start`` (default: where the data starts) to ``end`` (default: ``now``)."""
    now = now or datetime.now(UTC)
    end = end or now
    start = start or _data_start(client, end)
    interval_s = pick_interval(start, end)
    args = {"start": start, "end": end, "interval_s": interval_s, "variables": variables}

    def rows(name: str) -> list[dict[str, Any]]:
        return run_query(client, PANELS[name], **args)

    alerts = [AlertRow(**r) for r in rows("recent_alerts")]
    charts = _charts(client, args, alerts)
    report = Report(
        generated_at=now, start=start, end=end, interval_s=interval_s,
        monitors=[MonitorSummary(**r) for r in rows("monitor_summary")],
        funnel=[FunnelRow(**r) for r in rows("coverage_funnel")],
        delivery=[DeliveryRow(**r) for r in run_query(client, REPORT_QUERIES["delivery"], **args)],
        score_over_time=_series(rows("score_over_time")),
        charts=charts,
        distribution=[DistributionBin(**r) for r in rows("score_distribution")],
        queue_lag=[LagPoint(**r) for r in rows("queue_lag")],
        worst_turns=[WorstTurn(**r) for r in rows("worst_turns")],
        judges=[JudgeSummary(**r) for r in rows("judge_summary")],
        spend=[SpendRow(**r) for r in rows("judge_spend")],
        paused_judges=[PausedJudge(**r) for r in rows("paused_judges")],
        alerts=alerts,
        judge_evals=[JudgeEval(**r) for r in rows("judge_evals")],
        agreement=[AgreementRow(**r) for r in rows("judge_agreement")],
        dead_letters=[DeadLetterGroup(**r) for r in rows("dead_letters")],
        unscored_reasons=[UnscoredReason(**r) for r in rows("unscored_reasons")],
    )
    detector = [DetectorMode(**r) for r in run_query(client, REPORT_QUERIES["detector_modes"], **args)]
    said = status(report, detector)
    return report.model_copy(update={"status": said, "comparisons": latest_changes(client, since=start),
                                     "firing_charts": _firing_charts(client, args, said.firing, charts)})
