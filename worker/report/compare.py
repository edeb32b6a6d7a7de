"""Is B worse than A? Two values of one segment key (a release, a model, an agent, a metadata key) compared per
monitor: the means with the difference's 95% interval, the turns on each side, and a sequential test's verdict so
far, so a canary can be read while it runs.

The key is read as the segments are (``alerts.segments``): ``agent``, ``environment``, ``project`` and ``model`` are
the turn's own fields; any other key is a metadata key (``release`` included: ``schemas.trace.RELEASE_KEY``). Scores
are score / scale of scored turns (abstentions apart), every scorer version of the monitor together.

The verdict is an always-valid test (a normal-mixture sequential probability ratio, as in "always valid p-values"
for A/B tests): with the difference d estimated at variance v (Welch), its information I = 1/v, and a normal prior
of scale ``TAU`` on the true difference, the confidence sequence's half-width is

    h(I) = sqrt((ρ + I) · (2·log(1/α) + log(1 + I/ρ))) / I,   ρ = 1/TAU²

and it holds at every look at once, so checking the canary every minute does not inflate the false verdicts the
way a repeated t-test would. While |d| ≤ h there is no verdict yet; the turns a verdict needs are those at which
h would fall to |d| if the difference and the sides' proportions held (none when d is 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from clickhouse_connect.driver.client import Client
from pydantic import BaseModel

__all__ = ["ALPHA", "TAU", "Comparison", "Side", "compare", "half_width", "judge", "latest_changes"]

ALPHA = 0.05
TAU = 0.1  # the prior scale of a difference on 0..1 scores: a change of about a tenth is what canaries look for
_FIELDS = {"agent": "s.agent", "environment": "s.environment", "project": "s.project", "model": "t.model"}

_QUERY = """
SELECT s.monitor AS monitor, {value} AS value, count() AS n, avg(s.x) AS mean, varSamp(s.x) AS variance
FROM (
    SELECT trace_id, monitor, project, agent, environment, score / if(scale > 0, scale, 1) AS x
    FROM scores FINAL
    WHERE status = 'scored' AND score IS NOT NULL AND label != 'abstained' AND trace_time >= {{since:DateTime64(3)}}
      AND (monitor = {{monitor:String}} OR {{monitor:String}} = '')
      AND (agent = {{agent:String}} OR {{agent:String}} = '')
) AS s
LEFT ANY JOIN (
    SELECT trace_id, anyIf(model, model != '') AS model, argMax(metadata, length(mapKeys(metadata))) AS metadata
    FROM traces
    WHERE started_at >= {{since:DateTime64(3)}} - INTERVAL 1 HOUR
    GROUP BY trace_id
) AS t ON t.trace_id = s.trace_id
WHERE value IN ({{a:String}}, {{b:String}})
GROUP BY monitor, value
ORDER BY monitor, value"""


class Side(BaseModel):
    value: str
    n: int = 0
    mean: float | None = None
    variance: float | None = None


class Comparison(BaseModel):
    """One monitor's comparison of ``b`` against ``a`` (``difference``: b − a; negative: b scores lower)."""

    monitor: str
    key: str
    agent: str = ""  # '' when every agent's turns are compared
    a: Side
    b: Side
    difference: float | None = None
    low: float | None = None
    high: float | None = None
    verdict: Literal["worse", "better", "no verdict yet", "too few turns"]
    more_turns: int | None = None  # about how many more turns (both sides) a verdict needs, if the difference held

    def sentence(self) -> str:
        """``answer_relevancy: model = B scores 0.21 lower than A (95%: 0.12 to 0.30 lower; 40 vs 60 turns);
        sequential test: B is worse``."""
        a, b = self.a, self.b
        counts = f"{b.n} vs {a.n} turns"
        if self.difference is None or self.low is None or self.high is None:
            return (f"{self.monitor}: {self.key} = {b.value} against {a.value}: too few turns to compare ({counts}; "
                    "at least 2 on each side)")
        way = "lower" if self.difference < 0 else "higher"
        low, high = sorted((abs(self.low), abs(self.high))) if self.low * self.high > 0 else (self.low, self.high)
        interval = (f"95%: {low:.2f} to {high:.2f} {way}" if self.low * self.high > 0
                    else f"95%: {self.low:+.2f} to {self.high:+.2f}")
        head = (f"{self.monitor}: {self.key} = {b.value} {b.mean:.2f} against {a.value} {a.mean:.2f}, "
                f"{abs(self.difference):.2f} {way} ({interval}; {counts})")
        if self.verdict in ("worse", "better"):
            return f"{head}; sequential test: {b.value} is {self.verdict}"
        more = (f", about {self.more_turns} more turns if the difference holds" if self.more_turns is not None
                else ", and no difference to find so far")
        return f"{head}; sequential test: no verdict yet{more}"


def half_width(information: float, *, alpha: float = ALPHA, tau: float = TAU) -> float:
    """The always-valid confidence sequence's half-width at ``information`` (1 / the difference's variance)."""
    rho = 1 / tau**2
    return math.sqrt((rho + information) * (2 * math.log(1 / alpha) + math.log(1 + information / rho))) / information


def _needed(difference: float, information: float, n: int) -> int | None:
    """The turns (both sides, today's proportions) at which ``half_width`` falls to ``|difference|``."""
    if difference == 0:
        return None
    scale = 1.0
    while half_width(information * scale) > abs(difference):
        scale *= 1.25
        if scale > 1e6:
            return None
    return max(1, math.ceil(n * scale) - n)


def judge(monitor: str, key: str, a: Side, b: Side) -> Comparison:
    """The comparison of two sides' counts, means and variances (pure)."""
    if a.n < 2 or b.n < 2 or a.mean is None or b.mean is None:
        return Comparison(monitor=monitor, key=key, a=a, b=b, verdict="too few turns")
    variance = max((a.variance or 0.0) / a.n + (b.variance or 0.0) / b.n, 1e-9)
    difference = b.mean - a.mean
    z = 1.959964 * math.sqrt(variance)
    low, high = max(difference - z, -1.0), min(difference + z, 1.0)  # a difference of 0..1 means is within ±1
    information = 1 / variance
    if abs(difference) > half_width(information):
        return Comparison(monitor=monitor, key=key, a=a, b=b, difference=difference, low=low, high=high,
                          verdict="worse" if difference < 0 else "better")
    return Comparison(monitor=monitor, key=key, a=a, b=b, difference=difference, low=low, high=high,
                      verdict="no verdict yet", more_turns=_needed(difference, information, a.n + b.n))


def _value(key: str) -> str:
    if key in _FIELDS:
        return _FIELDS[key]
    if not key or any(c in key for c in "'\\"):
        raise ValueError(f"--by: {key!r} is not a segment key (agent, environment, project, model, or a metadata key)")
    return f"t.metadata['{key}']"


def compare(client: Client, key: str, a: str, b: str, *, since: datetime, monitor: str | None = None,
            agent: str = "", monitors: Sequence[str] = ()) -> list[Comparison]:
    """Every monitor's (or ``monitor``'s) comparison of ``key`` = ``b`` against ``key`` = ``a`` since ``since`` (on
    ``agent``'s turns only, when given); ``monitors`` lists monitors to report even with no turns on either side."""
    sql = _QUERY.format(value=_value(key))
    rows = client.query(sql, parameters={"since": since, "monitor": monitor or "", "agent": agent, "a": a,
                                         "b": b}).result_rows
    sides: dict[str, dict[str, Side]] = {m: {} for m in monitors if monitor in (None, m)}
    for name, value, n, mean, variance in rows:
        sides.setdefault(name, {})[value] = Side(value=value, n=n, mean=_finite(mean), variance=_finite(variance))
    return [judge(name, key, got.get(a, Side(value=a)), got.get(b, Side(value=b))).model_copy(update={"agent": agent})
            for name, got in sorted(sides.items()) if name == monitor or len(got) == 2 or name in monitors]


_CHANGES = """
SELECT agent, {value} AS value, min(started_at) AS first_seen
FROM traces AS t
WHERE started_at >= {{since:DateTime64(3)}} AND value != ''
GROUP BY agent, value
ORDER BY agent, first_seen"""


def latest_changes(client: Client, *, since: datetime) -> list[Comparison]:
    """Each agent's newest release against the one before it (by first seen), or, where no agent has two
    releases, its newest model against the one before: what a report shows without being asked."""
    for key in ("release", "model"):
        seen: dict[str, list[str]] = {}
        for agent, value, _ in client.query(_CHANGES.format(value=_value(key)), parameters={"since": since}
                                            ).result_rows:
            seen.setdefault(agent, []).append(value)
        pairs = {agent: values[-2:] for agent, values in seen.items() if len(values) >= 2}
        if pairs:
            return [c for agent, (a, b) in sorted(pairs.items())
                    for c in compare(client, key, a, b, since=since, agent=agent)]
    return []


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
