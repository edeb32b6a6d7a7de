"""The detector's records: what a window measured (``Verdict``), an alert's stored state, and what was decided."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from vigil.schemas.alert import Segment
from vigil.schemas.config import DEFAULT_PROJECT
from vigil.worker.alerts.segments import Blame
from vigil.worker.alerts.sentence import say

__all__ = ["ALERT_COLUMNS", "AlertEvent", "AlertState", "Subject", "Verdict", "WindowStats"]

ALERT_COLUMNS = ("alert_id", "rule", "kind", "project", "agent", "monitor", "judge", "state", "fired_at", "updated_at",
                 "recent_mean", "baseline_mean", "recent_n", "baseline_n", "p_value", "effect_size", "message", "since",
                 "drop", "drop_low", "drop_high", "segments", "agents")


class Subject(BaseModel):
    """What an alert is about: a (project, agent, monitor), or a judge."""

    model_config = ConfigDict(frozen=True)

    project: str = ""
    agent: str = ""
    monitor: str = ""
    judge: str = ""

    def describe(self) -> str:
        if self.judge:
            return f"judge {self.judge}"
        if not self.project and not self.agent:
            return self.monitor
        if not self.monitor:  # an agent's own measure (its failed runs): the agent, its project when not the default
            return self.agent if self.project in ("", DEFAULT_PROJECT) else f"{self.project}/{self.agent}"
        return f"{self.monitor} on {self.project}/{self.agent}"


class WindowStats(BaseModel):
    """Scored turns in one window: count, mean and sample variance of score / scale."""

    n: int = 0
    mean: float | None = None
    variance: float | None = None

    @classmethod
    def combine(cls, parts: list[WindowStats]) -> WindowStats:
        """Pool several windows (e.g. scorer versions) into one count and mean (the variance is not pooled)."""
        n = sum(p.n for p in parts if p.mean is not None)
        mean = sum(p.n * p.mean for p in parts if p.mean is not None) / n if n else None
        return cls(n=n, mean=mean)


class Verdict(BaseModel):
    """One rule measured on one subject. ``breach`` None: too little data to tell, so the alert keeps its state."""

    subject: Subject
    breach: bool | None
    value: float | None = None  # what the rule measured: a mean, a failure rate, a coverage
    baseline: float | None = None
    recent_n: int = 0
    baseline_n: int = 0
    p_value: float | None = None
    effect_size: float | None = None
    message: str  # what was measured, and why it does or does not breach (``--explain`` prints it)
    headline: str | None = None  # what an alert's sentence says instead, when the message speaks statistics
    # The sequential detector's change-point estimate and drop (score / scale, baseline minus since), 95% interval.
    since: datetime | None = None
    drop: float | None = None
    drop_low: float | None = None
    drop_high: float | None = None


class AlertState(BaseModel):
    """The latest ``alerts`` row of one (rule, subject)."""

    alert_id: str
    state: Literal["firing", "resolved"]
    fired_at: datetime
    updated_at: datetime  # when it was last notified (fired, renotified or resolved)


class AlertEvent(BaseModel):
    """A decision to notify: a new firing, a reminder after the renotify interval, or a resolution."""

    alert_id: str
    rule: str
    kind: str
    action: Literal["fired", "renotified", "resolved"]
    state: Literal["firing", "resolved"]
    project: str = ""
    agent: str = ""
    monitor: str = ""
    judge: str = ""
    fired_at: datetime
    updated_at: datetime
    recent_mean: float | None = None  # the measured value (mean, failure rate or coverage)
    baseline_mean: float | None = None
    recent_n: int = 0
    baseline_n: int = 0
    p_value: float | None = None
    effect_size: float | None = None
    message: str  # the alert's sentence (``sentence.say``)
    since: datetime | None = None  # the estimated start of the change
    drop: float | None = None
    drop_low: float | None = None
    drop_high: float | None = None
    segments: list[Segment] = Field(default_factory=list)  # what explains the drop, ranked
    agents: list[str] = Field(default_factory=list)  # the agents whose scores pulled the mean down
    webhook_url: str | None = Field(default=None, exclude=True)

    def row(self) -> list[Any]:
        """The ``alerts`` row, in ``ALERT_COLUMNS`` order (the segments as JSON)."""
        data = self.model_dump()
        data["segments"] = json.dumps([s.model_dump() for s in self.segments])
        return [data[c] for c in ALERT_COLUMNS]

    def blamed(self, blame: Blame) -> AlertEvent:
        """This event with the segments and agents that explain its drop, its sentence said again with them."""
        event = self.model_copy(update={"segments": blame.segments, "agents": blame.agents})
        return event.model_copy(update={"message": say(event)})

    def attributed(self, found: Any) -> AlertEvent:
        """This event with what its monitor's anchor set says of the cause (``vigil.worker.alerts.anchors``) at
        the end of its sentence; unchanged when the anchors cannot say."""
        if found is None:
            return self
        return self.model_copy(update={"message": f"{self.message}; {found.sentence()}"})

    def text(self, *, slack: bool = True) -> str:
        """The sentence after what happened (fired, still firing, resolved). ``slack``: with Slack's emoji (the
        webhook's); without: plain words for a terminal."""
        verb = {"fired": "FIRING", "renotified": "STILL FIRING", "resolved": "RESOLVED"}[self.action]
        if slack:
            icon = ":white_check_mark:" if self.state == "resolved" else ":rotating_light:"
            return f"{icon} [vigil] {verb}: {self.message}"
        return f"{verb}: {self.message}"
