"""How much work is still in Redis: the queues, the write queue and in-flight batches, and unacked deliveries.

All zero means every message handed to vigil has been processed and every row inserted (the ingest and score
tasks push their rows before they are acked; the writer clears its in-flight list only after the insert).
"""

from __future__ import annotations

import redis

from schemas.broker import INGEST_QUEUE
from worker.app import SCORE_QUEUE
from worker.sinks.write_queue import WRITE_QUEUE, inflight_key

__all__ = ["backlog", "drained"]


def backlog(client: redis.Redis) -> dict[str, int]:
    inflight = sum(client.llen(key) for key in client.scan_iter(match=inflight_key("*")))
    return {
        INGEST_QUEUE: client.llen(INGEST_QUEUE),
        SCORE_QUEUE: client.llen(SCORE_QUEUE),
        WRITE_QUEUE: client.llen(WRITE_QUEUE),
        "writing": inflight,
        "unacked": client.hlen("unacked"),  # kombu's Redis transport: delivered, not yet acked (incl. countdowns)
    }


def drained(client: redis.Redis) -> bool:
    return not any(backlog(client).values())
