"""What the review page does, without HTTP: pick the next item for a reviewer, record a label, skip, progress.

Reads go to the store (``connect_for_reading``: through the worker's read endpoint while it holds chDB); writes go
where every other feedback goes, as ``feedback`` items on the ingest queue, published before the page is answered,
so a label the page saw accepted is in Redis (and from there in the store, the agreement panel, the ``agreement``
alert and ``always_sample``). The page never writes the store itself.

A turn is its project's trace (trace ids are a project's own): an item says its ``project``, and every action on it
(label, skip, release, renew) names the project and trace id it was served as; the leases are keyed by both
(``leases``). A label is accepted only for a turn leased to its reviewer (``next_item`` leases; any monitor of the
turn may be labelled under that lease), of one of the reviewer's projects, at most ``VIGIL_REVIEW_LABELS_PER_MINUTE``
per reviewer in any minute. Who the reviewer is, and which projects' turns they may be served (none: every project),
the caller decides (``guard.Identity``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import click
from clickhouse_connect.driver.client import Client
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from vigil.schemas.config import DEFAULT_PROJECT
from vigil.schemas.feedback import MAX_COMMENT_CHARS, REVIEW_QUEUES, Feedback
from vigil.schemas.pass_line import passes
from vigil.worker.assembly.traces import trace_name
from vigil.worker.review.agreement import (
    Label,
    WeightedAgreement,
    item_verdicts,
    weighted_agreement,
)
from vigil.worker.review.leases import Leases, LocalLeases
from vigil.worker.store.queries import TURN_QUERIES, Query
from vigil.worker.store.review import REVIEW_QUERIES

__all__ = ["QUEUE_TITLES", "LabelRequest", "NotLeased", "ReviewService", "ReviewSettings", "TooManyLabels",
           "auto_queue", "open_service"]

REVIEW_NAME = "review"  # the feedback name of a review label
# Turns read from a queue at a time; the first one open to the reviewer (not leased to another, not just labelled,
# not skipped by them: Redis knows, the store does not) is served. A queue whose head is all taken is read again,
# wider, so a busy team or a long run of skips never makes it look empty.
CANDIDATES = (64, 1024, 16384)

QUEUE_TITLES = {
    "random": "uniform random sample of the monitor's scored turns (unbiased agreement)",
    "lowest": "lowest scores first",
    "flagged": "negative user feedback, or a label the judge disagrees with",
    "alerts": "the worst turns of the newest alerts",
}
# ``auto``: every other item is a random draw, so the unbiased estimate grows as fast as the targeted review.
_ROTATION = ("random", "flagged", "random", "alerts", "random", "lowest")

Action = Literal["judge-right", "judge-wrong", "score"]


class ReviewSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VIGIL_REVIEW_", extra="ignore")

    labels_per_minute: int = Field(default=60, gt=0, description="labels one reviewer may give in any 60 s")


class NotLeased(PermissionError):
    """A label for a turn that is not leased to its reviewer (or of a project that is not theirs)."""


class TooManyLabels(Exception):
    def __init__(self, reviewer: str, per_minute: int, retry_after_s: float) -> None:
        super().__init__(f"{reviewer} gave {per_minute} labels in the last minute (VIGIL_REVIEW_LABELS_PER_MINUTE): "
                         f"the next one in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


def auto_queue(turn: int) -> list[str]:
    """The queues to try, in order, for a reviewer's ``turn``-th item in ``auto`` mode."""
    first = _ROTATION[turn % len(_ROTATION)]
    return [first, *(q for q in REVIEW_QUEUES if q != first)]


class LabelRequest(BaseModel):
    """One action on one monitor of one item, as the page posts it."""

    trace_id: str = Field(min_length=1, max_length=128)
    project: str = Field(default=DEFAULT_PROJECT, min_length=1, max_length=128)  # the item's: whose turn it is
    monitor: str = Field(min_length=1, max_length=128)
    action: Action
    value: float | None = None  # the score, on the monitor's scale, for ``score``
    comment: str = Field(default="", max_length=MAX_COMMENT_CHARS)
    queue: Literal["random", "lowest", "flagged", "alerts", ""] = ""
    reviewer: str = Field(default="", max_length=256)
    keep_lease: bool = False  # more labels of this turn follow (its other monitors): the lease is not given back


class ReviewService:
    """The page's operations on one store client (one query at a time) and one Redis."""

    def __init__(self, client: Client, leases: Leases | LocalLeases, publish: Callable[[list[dict[str, Any]]], None], *,
                 reviewer: str, lock: threading.Lock | None = None, settings: ReviewSettings | None = None) -> None:
        self.client = client
        self.leases = leases
        self.publish = publish
        self.reviewer = reviewer
        self.settings = settings or ReviewSettings()
        self.lock = lock or threading.Lock()  # one query at a time on the client (shared with the report's)
        self.direct = False  # labels go straight into the store (``open_service``'s ``holds_store``)
        self._served: dict[str, int] = {}  # reviewer -> items served (the auto rotation)

    def rows(self, name: str | Query, **params: Any) -> list[dict[str, Any]]:
        query = REVIEW_QUERIES[name] if isinstance(name, str) else name
        with self.lock:
            result = self.client.query(query.sql, parameters=params)
        return [dict(zip(query.columns, row, strict=True)) for row in result.result_rows]

    def monitors(self, projects: Sequence[str] = ()) -> list[dict[str, Any]]:
        return self.rows("monitors", projects=list(projects))

    def next_item(self, monitor: str, queue: str, reviewer: str,
                  projects: Sequence[str] = ()) -> dict[str, Any] | None:
        """Lease the next turn (``lease``) and load it whole (``item``), or None."""
        if (leased := self.lease(monitor, queue, reviewer, projects)) is None:
            return None
        name, project, trace_id = leased
        return self.item(project, trace_id) | {"queue": name, "queue_title": QUEUE_TITLES[name], "monitor": monitor,
                                               "reviewer": reviewer}

    def lease(self, monitor: str, queue: str, reviewer: str,
              projects: Sequence[str] = ()) -> tuple[str, str, str] | None:
        """Lease the next turn of ``projects`` (none: every project) for ``reviewer`` from ``monitor``'s ``queue``
        (``auto``: rotate): (the queue it came from, its project, its trace id), or None."""
        if queue == "auto":
            order = auto_queue(self._served.get(reviewer, 0))
        elif queue in REVIEW_QUEUES:
            order = [queue]
        else:
            raise ValueError(f"queue: {queue!r} is not one of auto, {', '.join(REVIEW_QUEUES)}")
        for name in order:
            if (turn := self._lease_from(name, monitor, reviewer, list(projects))) is not None:
                self._served[reviewer] = self._served.get(reviewer, 0) + 1
                return name, *turn
        return None

    def _lease_from(self, queue: str, monitor: str, reviewer: str, projects: list[str]) -> tuple[str, str] | None:
        """(project, trace id) of the turn leased to ``reviewer``, or None."""
        for limit in CANDIDATES:
            candidates = {trace_name(r["project"], r["trace_id"]): (r["project"], r["trace_id"])
                          for r in self.rows(queue, monitor=monitor, reviewer=reviewer, limit=limit, projects=projects)}
            for name in self.leases.open_to(list(candidates), monitor, reviewer):
                if self.leases.take(name, reviewer):
                    return candidates[name]
            if len(candidates) < limit:
                return None  # the whole queue was read
        return None

    def item(self, project: str, trace_id: str) -> dict[str, Any]:
        """One turn whole: its spans, every monitor's score with steps and reason, its feedback, its session. A trace
        id is a project's own: what another project stored under the same id is left out."""
        from vigil.worker.cli.show import load_turn

        with self.lock:
            try:
                turn = load_turn(self.client, trace_id)
            except click.ClickException as exc:
                raise LookupError(exc.format_message()) from None
        spans = [s for s in turn["spans"] if s["project"] == project]
        scores = [s for s in turn["scores"] if s["project"] == project]
        session: list[dict[str, Any]] = []
        if spans and spans[0]["session_id"]:
            session = self.rows("session_before", session_id=spans[0]["session_id"], project=project,
                                started_at=spans[0]["started_at"])[::-1]
        return {"project": project, "trace_id": turn["trace_id"], "spans": spans, "scores": scores,
                "labels": self.rows("item_labels", project=project, trace_id=trace_id), "session": session}

    def label(self, request: LabelRequest, projects: Sequence[str] = ()) -> Feedback:
        """Record one label: a ``feedback`` row on the ingest queue, of the labelled score's project (it pairs only
        with that project's scores). ``NotLeased`` when the turn is not leased to
        the reviewer, ``TooManyLabels`` over the rate; else raises what the broker raises."""
        reviewer = request.reviewer or self.reviewer
        self._leased(request.project, request.trace_id, reviewer, projects)
        per_minute = self.settings.labels_per_minute
        if (wait := self.leases.wait_to_label(reviewer, per_minute)) is not None:
            raise TooManyLabels(reviewer, per_minute, wait)
        scores = [s for s in self.item_scores(request.trace_id) if s["monitor"] == request.monitor
                  and s["project"] == request.project]
        if not scores:
            raise LookupError(f"monitor: {request.monitor!r} has no score on {request.project}'s turn "
                              f"{request.trace_id}")
        latest = max(scores, key=lambda s: s["scored_at"])
        scale = float(latest["scale"] or 1.0)
        if request.action == "score":
            if request.value is None:
                raise ValueError(f"value: a score on 0..{scale:g} is required")
            value = request.value
        else:
            if latest["status"] != "scored" or latest["score"] is None:
                raise ValueError(f"action: the judge gave no score on {request.monitor}; give a score instead")
            judge_positive = passes(latest["score"], scale, latest["pass_line"])
            value = scale if judge_positive == (request.action == "judge-right") else 0.0
        row = Feedback(project=latest["project"], trace_id=request.trace_id, name=REVIEW_NAME, value=value, scale=scale,
                       comment=request.comment, source="reviewer", author=reviewer, monitor=request.monitor,
                       queue=request.queue)
        self.publish([row.wire()])
        self.leases.labelled(trace_name(request.project, request.trace_id), [request.monitor], reviewer)
        return row

    def _leased(self, project: str, trace_id: str, reviewer: str, projects: Sequence[str]) -> None:
        """``NotLeased`` unless ``project``'s turn ``trace_id`` is leased to ``reviewer``, of their ``projects``."""
        if projects and project not in projects:
            raise NotLeased(f"project: {reviewer} reviews {', '.join(projects)}, not {project}")
        if (holder := self.leases.holder(trace_name(project, trace_id))) != reviewer:
            whose = "leased to someone else" if holder else "not leased to anyone (it lapsed, or was never served)"
            raise NotLeased(f"trace_id: {project}'s turn {trace_id} is {whose}; a label needs the turn leased to "
                            f"{reviewer}: take the next item")

    def item_scores(self, trace_id: str) -> list[dict[str, Any]]:
        return [s for s in self.rows(TURN_QUERIES["scores"], trace_id=trace_id) if s["trace_id"] == trace_id]

    def done(self, project: str, trace_id: str, reviewer: str, *, skipped: bool = False) -> None:
        name = trace_name(project, trace_id)
        if skipped:
            self.leases.skipped(name, reviewer)
        self.leases.release(name, reviewer)

    def renew(self, project: str, trace_id: str, reviewer: str) -> None:
        """Keep ``reviewer``'s lease of the turn they are reading (``NotLeased`` when it is no longer theirs)."""
        if not self.leases.renew(trace_name(project, trace_id), reviewer):
            raise NotLeased(f"trace_id: {project}'s turn {trace_id} is no longer leased to {reviewer}: take the next "
                            "item")

    def progress(self, projects: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Per monitor: its turns (of ``projects``; none: every project), reviewed, unreviewed, and the weighted
        agreement so far."""
        out = []
        scope = list(projects)
        for monitor in self.monitors(scope):
            name = monitor["monitor"]
            sizes = self.rows("queue_sizes", monitor=name, projects=scope)[0]
            labels = [Label(r["trace_id"], r["queue"], bool(r["human_positive"]) == bool(r["judge_positive"]))
                      for r in self.rows("labels", monitor=name, projects=scope)]
            verdicts = item_verdicts(labels).values()
            estimate: WeightedAgreement = weighted_agreement([a for r, a in verdicts if r],
                                                             [a for r, a in verdicts if not r], sizes["population"])
            out.append({"monitor": name, "scale": monitor["scale"], **sizes, "agreement": estimate.model_dump()})
        return out


def open_service(client: Client, redis_url: str, *, reviewer: str, lock: threading.Lock | None = None,
                 holds_store: bool = False) -> ReviewService:
    """The service on the store ``client`` reads and the broker at ``redis_url`` (checked at once: a page whose
    labels cannot be sent should not start).

    ``holds_store``: this process opened the embedded store itself (no worker runs). Then, without a broker, labels
    go straight into its ``feedback`` table and leases live in memory (``service.direct`` is True): the one place
    they could otherwise have gone is a worker, and none runs.
    """
    import redis as redis_py
    from vigil.schemas.broker import INGEST_TASK, broker
    from vigil.worker.intake.publish import Publisher

    redis = broker(redis_url).redis(socket_connect_timeout=5, socket_timeout=5)
    try:
        redis.ping()
    except redis_py.RedisError:
        if not holds_store:
            raise
        return _direct(client, reviewer, lock)
    publisher = Publisher(redis_url)

    def publish(items: list[dict[str, Any]]) -> None:
        publisher.send(INGEST_TASK, items, "feedback")

    return ReviewService(client, Leases(redis), publish, reviewer=reviewer, lock=lock)


def _direct(client: Client, reviewer: str, lock: threading.Lock | None) -> ReviewService:
    columns = list(Feedback.model_fields)
    service = ReviewService(client, LocalLeases(), lambda items: None, reviewer=reviewer, lock=lock)

    def insert(items: list[dict[str, Any]]) -> None:
        rows = [Feedback.model_validate(item["feedback"]) for item in items]
        with service.lock:
            client.insert("feedback", [[getattr(row, c) for c in columns] for row in rows], column_names=columns)

    service.publish = insert
    service.direct = True
    return service
