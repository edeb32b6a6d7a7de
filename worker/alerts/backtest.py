"""``vigil alerts backtest``: when would a rule have fired? Scores from a JSON-lines file or the store, through the
live decision code (``replay.episodes``), each alert with its change-point estimate and segments.

A file holds one score a line, ``{"ts": <epoch seconds or ISO 8601>, "monitor": "...", "score": 0.73,
"metadata": {...}}`` (``score`` on 0..1, ``metadata`` optional: its keys and values are the segments; ``trace_id``,
``cost_usd`` and ``tokens`` optional, for budgets). A rule that names no monitor applies to every monitor of the
file; every monitor must be in the config.

Budgets (``budget:`` on a monitor) are replayed first (``thin``): each monitor's turns go through the pace ingest
uses (``vigil.worker.pipeline.budget.replay``), and the rules see only the scores the budget would have kept; how
many each day kept is reported beside the alerts. From the store, each alert also says what its monitor's anchor
set says of the cause (``vigil.worker.alerts.anchors``), as the live alert does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from clickhouse_connect.driver.client import Client
from pydantic import BaseModel, Field, ValidationError, field_validator
from vigil.schemas import AlertRule, VigilConfig
from vigil.worker.alerts import anchors
from vigil.worker.alerts.model import Subject
from vigil.worker.alerts.replay import Episode, episodes
from vigil.worker.alerts.segments import Blame, Segment, blame, count_segments
from vigil.worker.alerts.sentence import say
from vigil.worker.alerts.watch import segments as store_segments
from vigil.worker.pipeline.budget import replay
from vigil.worker.pipeline.sampling import sample_point

__all__ = ["BacktestAlert", "BudgetDay", "Stream", "backtest", "parse_since", "read_scores", "sequential_rules", "stored_scores", "thin"]


class ScoreLine(BaseModel):
    ts: float
    monitor: str = Field(min_length=1)
    score: float = Field(ge=0, le=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    trace_id: str = ""  # where the turn falls for sampling (default: the line's place)
    cost_usd: float = Field(default=0.0, ge=0)
    tokens: int = Field(default=0, ge=0)

    @field_validator("ts", mode="before")
    @classmethod
    def _epoch(cls, value: Any) -> float:
        if isinstance(value, str):
            try:
                at = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"not epoch seconds or ISO 8601: {value!r}") from None
            return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()
        return value


class Stream(BaseModel):
    """One monitor's scores in time order; ``dims`` per score when they came from a file (segments in memory),
    ``version`` when they came from the store (segments by the store's query)."""

    model_config = {"arbitrary_types_allowed": True}

    ts: np.ndarray
    xs: np.ndarray
    dims: list[dict[str, Any]] | None = None
    version: str | None = None
    trace_ids: list[str] | None = None  # with the judge's cost of each score, what a budget replay reads
    usd: np.ndarray | None = None
    tokens: np.ndarray | None = None

    def where(self, keep: list[bool]) -> Stream:
        """The scores ``keep`` marks."""
        mask = np.asarray(keep, dtype=bool)
        pick = lambda seq: None if seq is None else [v for v, k in zip(seq, keep, strict=True) if k]
        return Stream(ts=self.ts[mask], xs=self.xs[mask], dims=pick(self.dims), version=self.version,
                      trace_ids=pick(self.trace_ids), usd=None if self.usd is None else self.usd[mask],
                      tokens=None if self.tokens is None else self.tokens[mask])


class BudgetDay(BaseModel):
    """One day of a monitor's budget replay: the scores it had and those the budget would have kept."""

    monitor: str
    day: str
    scores: int
    kept: int


class BacktestAlert(BaseModel):
    rule: str
    monitor: str
    fired_at: datetime
    resolved_at: datetime | None
    since: datetime | None
    estimate: float | None = None  # the drop, score / scale
    estimate_low: float | None = None
    estimate_high: float | None = None
    segments: list[Segment]
    agents: list[str] = Field(default_factory=list)
    sentence: str = ""  # the alert's sentence over its window: from the change to the firing

    def public(self) -> dict[str, Any]:
        """The ``--json`` object of one alert."""
        out = self.model_dump(mode="json", include={"rule", "monitor", "fired_at", "resolved_at", "since",
                                                     "estimate", "agents", "sentence"})
        return out | {"segments": [s.public() for s in self.segments]}


def read_scores(path: Path) -> dict[str, Stream]:
    """A JSON-lines file's scores by monitor; a bad line is an error naming the line and the field."""
    by: dict[str, list[tuple[float, float, dict[str, Any]]]] = defaultdict(list)
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                item = ScoreLine.model_validate_json(line)
            except ValidationError as exc:
                error = exc.errors()[0]
                where = ".".join(str(p) for p in error["loc"]) or "line"
                raise ValueError(f"{path}:{number}: {where}: {error['msg']}") from None
            by[item.monitor].append((item.ts, item.score, item.metadata,
                                     item.trace_id or f"{path.name}:{number}", item.cost_usd, item.tokens))
    streams = {}
    for monitor, items in by.items():
        items.sort(key=lambda i: i[0])
        streams[monitor] = Stream(ts=np.asarray([i[0] for i in items]), xs=np.asarray([i[1] for i in items]),
                                  dims=[i[2] for i in items], trace_ids=[i[3] for i in items],
                                  usd=np.asarray([i[4] for i in items], dtype=float),
                                  tokens=np.asarray([i[5] for i in items], dtype=float))
    return streams


_STORE = """
SELECT monitor, scorer_version, toUnixTimestamp64Milli(trace_time) / 1000 AS at, score / if(scale > 0, scale, 1),
       trace_id, cost_usd, prompt_tokens + completion_tokens
FROM scores FINAL
WHERE status = 'scored' AND score IS NOT NULL AND label != 'abstained' AND trace_time >= {since:DateTime64(3)}
  AND monitor IN {monitors:Array(String)}
ORDER BY monitor, at"""


def stored_scores(client: Client, monitors: Iterable[str], since: datetime) -> dict[str, Stream]:
    """Each monitor's stored scores since ``since`` (its newest scorer version's, as the live check watches)."""
    rows = client.query(_STORE, parameters={"since": since, "monitors": sorted(monitors)}).result_rows
    by: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by[row[0]].append(row)
    streams = {}
    for monitor, items in by.items():
        version = items[-1][1]  # the newest score's
        kept = [r for r in items if r[1] == version]
        streams[monitor] = Stream(ts=np.asarray([r[2] for r in kept], dtype=float),
                                  xs=np.asarray([r[3] for r in kept], dtype=float), version=version,
                                  trace_ids=[r[4] for r in kept], usd=np.asarray([r[5] for r in kept], dtype=float),
                                  tokens=np.asarray([r[6] for r in kept], dtype=float))
    return streams


def thin(config: VigilConfig, streams: dict[str, Stream]) -> tuple[dict[str, Stream], list[BudgetDay]]:
    """Each budgeted monitor's stream as its budget would have kept it (its own ``budget:``; the deployment's is
    shared across monitors and not replayed), with the scores kept per day."""
    out, days = dict(streams), []
    for monitor in config.monitors:
        stream = streams.get(monitor.name)
        if monitor.budget is None or stream is None or stream.trace_ids is None:
            continue
        ts = stream.ts.tolist()
        keep = replay(ts, [sample_point(t) for t in stream.trace_ids], stream.usd.tolist(), stream.tokens.tolist(),
                      monitor.budget, monitor.sampling_rate)
        out[monitor.name] = stream.where(keep)
        per_day: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for at, kept in zip(ts, keep, strict=True):
            day = per_day[datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")]
            day[0], day[1] = day[0] + 1, day[1] + kept
        days += [BudgetDay(monitor=monitor.name, day=d, scores=n, kept=k) for d, (n, k) in sorted(per_day.items())]
    return out, days


def sequential_rules(config: VigilConfig, rule_name: str | None) -> list[AlertRule]:
    """The config's sequential regression rules (or the one named); a mistake says which names there are."""
    rules = [r for r in config.alerts if r.kind == "regression" and r.method == "sequential"]
    if rule_name is not None:
        named = [r for r in config.alerts if r.name == rule_name]
        if not named:
            raise ValueError(f"--rule: no alert rule named {rule_name!r} (rules: "
                             f"{', '.join(r.name for r in config.alerts) or 'none'})")
        if named[0] not in rules:
            raise ValueError(f"--rule: {rule_name!r} is not a sequential regression rule (backtest replays those)")
        rules = named
    if not rules:
        raise ValueError("the config has no sequential regression rule to backtest (kind: regression)")
    return rules


def _file_segments(stream: Stream, episode: Episode) -> Blame:
    since, fired = episode.event.since, episode.event.fired_at
    if since is None or stream.dims is None:
        return Blame()
    start, end = since.timestamp(), fired.timestamp()
    lo = int(np.searchsorted(stream.ts, start - 86400.0))
    hi = int(np.searchsorted(stream.ts, end, side="right"))
    counts, total = count_segments(stream.xs[lo:hi].tolist(), stream.dims[lo:hi],
                                   (stream.ts[lo:hi] >= start).tolist())
    return blame(counts, total)


def backtest(config: VigilConfig, streams: dict[str, Stream], *, rule_name: str | None = None,
             client: Client | None = None, progress: Callable[[int], None] | None = None) -> list[BacktestAlert]:
    """Every alert episode the config's sequential regression rules would have raised on ``streams``."""
    known = {m.name for m in config.monitors}
    unknown = sorted(set(streams) - known)
    if unknown:
        raise ValueError(f"monitor {unknown[0]!r} is not in the config (monitors: {', '.join(sorted(known)) or 'none'})")
    alerts = []
    for rule in sequential_rules(config, rule_name):
        for monitor in sorted(streams) if rule.monitor is None else [rule.monitor]:
            stream = streams.get(monitor)
            if stream is None or not len(stream.ts):
                continue
            found, _ = episodes(rule, Subject(monitor=monitor), stream.ts, stream.xs, progress=progress)
            for episode in found:
                e = episode.event
                if stream.dims is not None:
                    found = _file_segments(stream, episode)
                elif client is not None and e.since is not None:
                    found = store_segments(client, monitor, stream.version or "", e.since, e.fired_at)
                else:
                    found = Blame()
                sentence = say(e.blamed(found), until=e.fired_at)
                if client is not None and e.since is not None and \
                        (cause := anchors.attribute(client, monitor, e.since, e.fired_at)) is not None:
                    sentence += f"; {cause.sentence()}"
                alerts.append(BacktestAlert(rule=rule.name, monitor=monitor, fired_at=e.fired_at,
                                            resolved_at=episode.resolved_at, since=e.since, estimate=e.drop,
                                            estimate_low=e.drop_low, estimate_high=e.drop_high,
                                            segments=found.segments, agents=found.agents, sentence=sentence))
    return sorted(alerts, key=lambda a: (a.fired_at, a.rule, a.monitor))


def parse_since(text: str, now: datetime) -> datetime:
    """``30d``, ``12h``, ``90m`` back from ``now``, or an ISO 8601 time."""
    units = {"d": "days", "h": "hours", "m": "minutes"}
    if text[:-1].isdigit() and text[-1:] in units:
        return now - timedelta(**{units[text[-1]]: int(text[:-1])})
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--since: {text!r} is neither a span like 30d / 12h / 90m nor an ISO 8601 time") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)

