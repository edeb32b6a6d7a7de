"""An alert in one sentence for people: the only place it is worded, read by the webhook, ``vigil alerts check``,
``vigil alerts backtest``, the report (text, JSON, HTML) and the Grafana annotation (the ``alerts.message`` column).

A regression with a change-point estimate says what fell, on which agent(s), from what to what, over which window,
the drop's 95% interval, and the segment that explains most of it:

    answer_relevancy on support-bot fell from 0.71 to 0.45 since 17:54 UTC (95%: 0.18 to 0.34 lower);
    78% of the drop is model = shopbot-mini (37% of traffic)

The rules it follows:
- Means are score / scale (0..1). The drop's interval is clipped to what the scale allows: the mean since the change
  can be neither below 0 nor above 1, so the drop lies between ``baseline − 1`` and ``baseline``.
- The window is said: ``since T`` when the mean runs to now (the live check), ``between T and U`` when it stops
  earlier (a backtest measures up to the moment the rule fired). A time on another day than the window's end carries
  its date.
- The segment is the first ranked one that is not an agent already named; a value the baseline never saw is "new".
  A share of 100% or more (other values of the same key improved) is "all of the drop".
- Detector words (CUSUM, thresholds, recovery test, sd) are never here: ``--explain`` prints the detector's reason.
- Every other alert (failure rate, an agent's failed runs, coverage, a paused judge, agreement, a windowed regression) is its rule's own plain
  message, unchanged; a resolution says the scores are back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from vigil.schemas.alert import Segment

__all__ = ["Sayable", "say", "segment_phrase"]


class Sayable(Protocol):
    """What the sentence reads: an ``AlertEvent``, a report's ``AlertRow``, a backtest's alert."""

    kind: str
    state: str
    monitor: str
    agent: str
    agents: list[str]
    message: str
    fired_at: datetime
    since: datetime | None
    recent_mean: float | None
    baseline_mean: float | None
    drop: float | None
    drop_low: float | None
    drop_high: float | None
    segments: list[Segment]


def _names(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _when(at: datetime, end: datetime | None) -> str:
    return f"{at:%H:%M}" if end is None or at.date() == end.date() else f"{at:%Y-%m-%d %H:%M}"


def segment_phrase(segment: Segment) -> str:
    """``78% of the drop is model = shopbot-mini (37% of traffic)``."""
    share = "all" if segment.share >= 0.995 else f"{segment.share:.0%}"
    new = "new, " if segment.baseline_mean is None else ""
    return f"{share} of the drop is {segment.key} = {segment.value} ({new}{segment.traffic:.0%} of traffic)"


def say(alert: Sayable, *, until: datetime | None = None) -> str:
    """The alert's sentence. ``until``: the window's end when it is not now (a backtest's firing time). Clock times
    are read against the window's end (else the firing time): one on another day carries its date."""
    agents = list(alert.agents) or ([alert.agent] if alert.agent else [])
    subject = f"{alert.monitor} on {_names(agents)}" if agents and alert.monitor else alert.monitor
    if alert.kind != "regression" or alert.since is None or alert.baseline_mean is None:
        if alert.state == "resolved" and alert.kind == "regression" and alert.monitor:
            back = f" ({alert.baseline_mean:.2f})" if alert.baseline_mean is not None else ""
            return f"{subject} recovered: its scores are back at their baseline{back}"
        return alert.message
    if alert.state == "resolved":
        return f"{subject} recovered: its scores are back at their baseline ({alert.baseline_mean:.2f})"
    end = until or alert.fired_at
    window = (f"between {_when(alert.since, end)} and {_when(until, end)} UTC" if until is not None
              else f"since {_when(alert.since, end)} UTC")
    recent = alert.recent_mean if alert.recent_mean is not None else (
        alert.baseline_mean - alert.drop if alert.drop is not None else None)
    fell = f"fell from {alert.baseline_mean:.2f}" + (f" to {recent:.2f}" if recent is not None else "")
    text = f"{subject} {fell} {window}"
    if alert.drop_low is not None and alert.drop_high is not None:
        low = max(alert.drop_low, alert.baseline_mean - 1.0)
        high = min(alert.drop_high, alert.baseline_mean)
        text += f" (95%: {low:.2f} to {high:.2f} lower)"
    top = next((s for s in alert.segments if not (s.key == "agent" and s.value in agents)), None)
    return text + (f"; {segment_phrase(top)}" if top is not None else "")
