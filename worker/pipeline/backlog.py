"""How much work is still in Redis: the queues, the write queue and in-flight batches, unacked deliveries, and
score tasks parked for a paused judge.

All zero means every message handed to vigil has been processed and every row inserted (the ingest and score
tasks push their rows before they are acked; the writer clears its in-flight list only after the insert). A message
a consumer has popped but not yet recorded as unacked is in no queue and not in ``unacked``; it is still in the
journal (``vigil.schemas.broker``: written with the publish, cleared by the ack), which therefore counts too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import redis
from vigil.schemas.broker import FEEDBACK_QUEUE, INGEST_QUEUE, JOURNAL
from vigil.worker.pipeline.app import ALERTS_QUEUE, SCORE_QUEUE
from vigil.worker.pipeline.parked import parked
from vigil.worker.sinks.write_queue import WRITE_QUEUE, inflight_key

__all__ = ["backlog", "drained", "wait_drained"]


def backlog(client: redis.Redis) -> dict[str, int]:
    inflight = sum(client.llen(key) for key in client.scan_iter(match=inflight_key("*")))
    return {
        INGEST_QUEUE: client.llen(INGEST_QUEUE),
        SCORE_QUEUE: client.llen(SCORE_QUEUE),
        ALERTS_QUEUE: client.llen(ALERTS_QUEUE),  # the writer's tasks: alert checks
        FEEDBACK_QUEUE: client.llen(FEEDBACK_QUEUE),  # and re-scores for feedback
        WRITE_QUEUE: client.llen(WRITE_QUEUE),
        "writing": inflight,
        "unacked": client.hlen("unacked"),  # kombu's Redis transport: delivered, not yet acked
        "journaled": client.hlen(JOURNAL),  # published, not yet acked: also a message popped but not yet recorded
        "parked": sum(parked(client).values()),  # score tasks waiting for a paused judge
    }


def drained(client: redis.Redis) -> bool:
    return not any(backlog(client).values())


def wait_drained(client: redis.Redis, *, timeout: float, check: Callable[[dict[str, int]], None] | None = None,
                 interval: float = 0.1, settle: int = 3) -> None:
    """Poll until ``settle`` polls in a row find nothing left (a task between its ack and the next delivery must
    not pass for done). ``check`` sees each backlog and may raise (a worker that exited, a progress bar to move).
    Raises ``TimeoutError`` with the backlog when ``timeout`` runs out."""
    deadline, settled = time.monotonic() + timeout, 0
    while settled < settle:
        now = backlog(client)
        if check is not None:
            check(now)
        if time.monotonic() > deadline:
            raise TimeoutError(f"not drained after {timeout:.0f}s: {now}")
        settled = settled + 1 if not any(now.values()) else 0
        time.sleep(interval)
