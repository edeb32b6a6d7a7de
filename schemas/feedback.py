"""Human feedback on a turn: a user's thumbs or rating from production, or a reviewer's label.

One model is both what crosses the wire and the row of the ``feedback`` table. Its id is deterministic,
hash(trace_id, name, source, author, and the monitor when there is one), so sending the same feedback again (a spool drained twice, a re-import, a
user changing their vote) replaces the earlier row instead of adding one: the table is a ReplacingMergeTree on the
id, and the newest ``created_at`` wins.

``value`` is on ``0..scale`` (thumbs: ``True``/``False`` or 1/0 on the default scale 1; five stars: ``scale=5``).
Feedback is *negative* below the middle of its scale (``value / scale`` under 0.5, ``schemas.pass_line``): feedback
on the whole turn is on its own scale. A reviewer's label of one monitor's verdict is on that monitor's scale, and
agreement cuts it at the monitor's pass line.

A reviewer's label on the review page (``vigil review``) is about one monitor's verdict: ``monitor`` names it,
and ``queue`` says how the page chose the turn (``REVIEW_QUEUES``), which the agreement estimate weighs. Feedback
with no monitor (a user's thumbs) is about the whole turn and pairs with every monitor's score.

On the ingest queue a feedback item travels in the same batches as turns, wrapped as ``{"feedback": {...}}``,
so the worker tells the two apart without guessing (a turn never has a ``feedback`` field).
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from vigil.schemas.pass_line import DEFAULT_LINE, passes

__all__ = ["FEEDBACK_KEY", "MAX_COMMENT_CHARS", "REVIEW_QUEUES", "Feedback", "feedback_id",
           "is_feedback", "problems"]

FEEDBACK_KEY = "feedback"  # the one key of a feedback item on the ingest queue
MAX_COMMENT_CHARS = 4_000
# How the review page chose a turn: a uniform random draw, the lowest scores, complaints and disagreements, alerts.
REVIEW_QUEUES = ("random", "lowest", "flagged", "alerts")


def feedback_id(trace_id: str, name: str, source: str, author: str, monitor: str = "", project: str = "") -> str:
    """Deterministic: the same person's feedback of the same name on the same trace (and monitor, and project)
    replaces, never adds. Feedback without a monitor or a project keeps the id it always had."""
    key = "\x1f".join(["feedback", trace_id, name, source, author, *([monitor] if monitor else []),
                       *([f"project={project}"] if project else [])])
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def problems(exc: ValidationError) -> str:
    """One clause per problem, each naming its field: ``value: Value error, 7 is not within 0..1``."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'feedback'}: {e['msg']}" for e in exc.errors())


def is_feedback(item: Any) -> bool:
    """Whether an ingest item is a feedback item (``{"feedback": {...}}``) rather than a turn."""
    return isinstance(item, dict) and len(item) == 1 and FEEDBACK_KEY in item


class Feedback(BaseModel):
    """A row of ``feedback``. ``feedback_id`` is always computed from the fields, whatever is passed in."""

    model_config = ConfigDict(extra="forbid")

    feedback_id: str = ""
    # the trace's project (a trace id is its project's own): pairs only with that project's scores; "" (not said:
    # older senders, older review labels) pairs by the trace id alone
    project: str = Field(default="", max_length=128)
    trace_id: str = Field(min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=128)  # what was asked: "thumbs", "rating", "correct", ...
    scale: float = Field(default=1.0, gt=0)  # before value, so value's check can read it
    value: float
    comment: str = ""
    source: Literal["user", "reviewer"] = "user"
    author: str = Field(default="", max_length=256)  # who gave it (a user id, a reviewer); part of the id
    monitor: str = Field(default="", max_length=128)  # the monitor a reviewer's label is about; "": every monitor
    queue: Literal["", "random", "lowest", "flagged", "alerts"] = ""  # how the review page chose the turn
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @field_validator("value", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, str):  # "1" from a CSV-minded export would be accepted by lax floats: refuse it
            raise ValueError("must be a number or a boolean, not a string")  # noqa: TRY004 - pydantic reports ValueError
        return value

    @field_validator("value")
    @classmethod
    def _on_scale(cls, value: float, info: ValidationInfo) -> float:
        scale = info.data.get("scale", 1.0)
        if not math.isfinite(value) or not 0.0 <= value <= scale:
            raise ValueError(f"{value!r} is not within 0..{scale:g} (the scale)")
        return value

    @field_validator("comment", mode="before")
    @classmethod
    def _comment(cls, value: Any) -> Any:
        if value is None:
            return ""
        return value[:MAX_COMMENT_CHARS] if isinstance(value, str) else value

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value

    @model_validator(mode="after")
    def _checked(self) -> Feedback:
        for field in ("project", "trace_id", "name", "comment", "author", "monitor"):
            try:
                getattr(self, field).encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"{field}: invalid UTF-8") from None
        self.feedback_id = feedback_id(self.trace_id, self.name, self.source, self.author, self.monitor,
                                       self.project)
        return self

    @property
    def normalised(self) -> float:
        """``value / scale``, on 0..1."""
        return self.value / self.scale

    @property
    def negative(self) -> bool:
        return not passes(self.value, self.scale, DEFAULT_LINE)

    def wire(self) -> dict[str, Any]:
        """The ingest-queue item."""
        return {FEEDBACK_KEY: self.model_dump(mode="json")}
