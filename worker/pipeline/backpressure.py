"""Backpressure from the write queue: ingest and score tasks wait for room rather than pile rows up in Redis.

A task first waits (up to ``VIGIL_WRITE_WAIT``) until the write queue is under ``VIGIL_WRITE_QUEUE_MAX_BYTES``, so a
full queue does not cost judge calls that would only be refused; its push is refused whole when there is no room
(``vigil.worker.sinks.write_queue``), and waits again. A task that still finds no room, or whose worker is shutting down,
goes back on its queue unacked-then-requeued (``Reject(requeue=True)``): nothing is dropped, the backlog stays in the
ingest and score queues, and the worker keeps no more in memory than the tasks it is running.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis
import structlog
from celery.exceptions import Reject
from pydantic import BaseModel
from vigil.worker.logs import Every
from vigil.worker.settings import get_settings
from vigil.worker.sinks.write_queue import WriteQueueFull, push_within, wait_for_room

__all__ = ["push_rows", "room_for_rows"]

log = structlog.get_logger("vigil.backpressure")

_full_warning = Every(10)  # a line per 10 s per process, not per task


def _stopping() -> bool:
    """Celery's warm shutdown has begun in this process (a waiting task must not hold it up)."""
    from celery.worker import state

    return state.should_stop not in (None, False) or state.should_terminate not in (None, False)


def _requeue(exc: WriteQueueFull) -> Reject:
    if _full_warning():
        log.warning("write queue at its budget (is the store down?); tasks go back on their queue", error=str(exc))
    return Reject(str(exc), requeue=True)


def room_for_rows(client: redis.Redis) -> None:
    """Wait until the write queue has room; ``Reject(requeue=True)`` when it has none in time."""
    settings = get_settings()
    try:
        wait_for_room(client, budget=settings.write_queue_max_bytes, wait_s=settings.write_wait_s,
                      stopping=_stopping)
    except WriteQueueFull as exc:
        raise _requeue(exc) from exc


def push_rows(client: redis.Redis, tables: Iterable[tuple[str, list[BaseModel]]]) -> None:
    """Push under the budget, waiting for room; ``Reject(requeue=True)`` when there is none in time."""
    settings = get_settings()
    try:
        push_within(client, tables, budget=settings.write_queue_max_bytes, wait_s=settings.write_wait_s,
                    stopping=_stopping)
    except WriteQueueFull as exc:
        raise _requeue(exc) from exc
