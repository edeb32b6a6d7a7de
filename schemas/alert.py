"""What an alert says about a regression besides its numbers: the segments that explain the drop (the sentence
that says it all is ``vigil.worker.alerts.sentence``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["Segment"]


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
