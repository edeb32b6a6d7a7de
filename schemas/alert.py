"""What an alert says about a regression besides its numbers: the segments that explain the drop, and the lines
that tell since when, by how much and where (the webhook, ``vigil alerts check``, ``vigil report``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

__all__ = ["Segment", "describe_change"]


class Segment(BaseModel):
    """A ranked segment. ``n``: its scores since the change; ``traffic``: their share of all scores since then;
    ``share``: its share of the drop; ``baseline_mean`` None: a value the baseline never saw."""

    key: str
    value: str
    n: int
    recent_mean: float
    baseline_mean: float | None
    share: float
    traffic: float

    def public(self) -> dict[str, Any]:
        """The fields ``vigil alerts backtest --json`` prints, in its order."""
        return self.model_dump(include={"key", "value", "n", "recent_mean", "baseline_mean", "share"})

    def describe(self) -> str:
        change = self.recent_mean - (self.baseline_mean if self.baseline_mean is not None else 0.0)
        was = "new" if self.baseline_mean is None else f"{change:+.2f} vs {self.baseline_mean:.2f}"
        return (f"{self.key} = {self.value} ({self.traffic:.0%} of traffic, mean {self.recent_mean:.2f}, {was}, "
                f"{self.share:.0%} of the drop)")


def describe_change(since: datetime | None, drop: float | None, low: float | None, high: float | None,
                    segments: list[Segment]) -> list[str]:
    """Since when, by how much, and the segments that explain it: one line each (none for other kinds of alert)."""
    lines = []
    if since is not None and drop is not None:
        interval = f" (95% {low:.3f} to {high:.3f})" if low is not None and high is not None else ""
        lines.append(f"since {since:%Y-%m-%d %H:%M} UTC, mean down {drop:.3f}{interval}")
    lines += [f"  {i}. {s.describe()}" for i, s in enumerate(segments, 1)]
    return lines
