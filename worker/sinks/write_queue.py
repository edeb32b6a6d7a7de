"""The write queue: scoring workers never touch ClickHouse; they push finished rows onto a Redis list.

Each entry is one JSON object ``{"table": name, "rows": [...]}``. The writer (``vigil.worker.sinks.writer``) is the only
process that inserts, so the embedded chDB store (one process per directory) and a ClickHouse server both work.

The queue has a byte budget. Every push adds its entries' bytes to ``WRITE_BYTES`` in the same script as the RPUSH;
the writer subtracts exactly the entries it removes after their insert (moves between the queue and in-flight lists
change nothing). A push under a budget is refused, whole, when it would take the queue and the in-flight lists past
it (an entry larger than the whole budget still goes onto an empty queue): the caller waits, or goes back on its
own queue, and nothing is dropped. While the store is down the write queue therefore stops at its budget and the
backlog stays in the ingest and score queues instead, where the SDK's producers already expect it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

import redis
from pydantic import BaseModel
from redis.commands.core import Script

__all__ = [
    "WRITE_BYTES", "WRITE_QUEUE", "WriteDepth", "WriteQueueFull", "depth", "inflight_key", "owner_key", "push",
    "push_within", "wait_for_room",
]

WRITE_QUEUE = "vigil.write"
WRITE_BYTES = f"{WRITE_QUEUE}.bytes"  # bytes of the entries in the queue and in every in-flight list

# KEYS: queue, byte count. ARGV: budget (0: none), bytes of the entries, the entries. 1 pushed, 0 refused.
_PUSH = """
local budget = tonumber(ARGV[1])
local size = tonumber(ARGV[2])
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if budget > 0 and used > 0 and used + size > budget then return 0 end
for i = 3, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('INCRBY', KEYS[2], size)
return 1
"""


class WriteQueueFull(RuntimeError):
    """The write queue is at its byte budget (the store is down or slow): nothing was pushed."""


class WriteDepth(NamedTuple):
    entries: int  # in the queue and in every in-flight list
    bytes: int


def inflight_key(writer_id: str) -> str:
    return f"{WRITE_QUEUE}.inflight.{writer_id}"


def owner_key(writer_id: str) -> str:
    """The heartbeat of the writer that owns ``inflight_key(writer_id)``."""
    return f"{WRITE_QUEUE}.owner.{writer_id}"


def _entries(tables: Iterable[tuple[str, list[BaseModel]]]) -> list[bytes]:
    return [
        json.dumps({"table": table, "rows": [row.model_dump(mode="json") for row in rows]},
                   ensure_ascii=False).encode()
        for table, rows in tables
        if rows
    ]


_push_script: Script | None = None  # one Script (its SHA-1 computed once); called with each caller's client


def _push(client: redis.Redis, entries: list[bytes], budget: int) -> bool:
    global _push_script
    if not entries:
        return True
    if _push_script is None:
        _push_script = client.register_script(_PUSH)
    size = sum(len(entry) for entry in entries)
    return bool(_push_script(keys=[WRITE_QUEUE, WRITE_BYTES], args=[budget, size, *entries], client=client))


def push(client: redis.Redis, tables: Iterable[tuple[str, list[BaseModel]]], *, budget: int = 0) -> None:
    """Push rows for several tables in one round trip. Under a ``budget`` (bytes; 0: none) raises
    ``WriteQueueFull`` and pushes nothing when the queue has no room for them."""
    if not _push(client, _entries(tables), budget):
        raise WriteQueueFull(f"the write queue is at its budget of {budget} bytes")


def push_within(client: redis.Redis, tables: Iterable[tuple[str, list[BaseModel]]], *, budget: int, wait_s: float,
                stopping: Callable[[], bool] = lambda: False, poll_s: float = 0.2) -> None:
    """``push`` under ``budget``, waiting up to ``wait_s`` for room (the writer empties the queue). Raises
    ``WriteQueueFull`` when there is still none, or at once when ``stopping()`` says the process is shutting down."""
    entries = _entries(tables)
    deadline = time.monotonic() + wait_s
    while not _push(client, entries, budget):
        if stopping() or time.monotonic() >= deadline:
            raise WriteQueueFull(f"the write queue is at its budget of {budget} bytes")
        time.sleep(poll_s)


def wait_for_room(client: redis.Redis, *, budget: int, wait_s: float, stopping: Callable[[], bool] = lambda: False,
                  poll_s: float = 0.2) -> None:
    """Return once the queue is under ``budget`` (0: at once); ``WriteQueueFull`` after ``wait_s`` or on
    ``stopping()``. Work that will push rows checks first, so it is not done only to be refused."""
    deadline = time.monotonic() + wait_s
    while budget > 0 and int(client.get(WRITE_BYTES) or 0) >= budget:
        if stopping() or time.monotonic() >= deadline:
            raise WriteQueueFull(f"the write queue is at its budget of {budget} bytes")
        time.sleep(poll_s)


def depth(client: redis.Redis) -> WriteDepth:
    """What the write queue holds now: entries (queued and in flight) and their bytes."""
    entries = client.llen(WRITE_QUEUE) + sum(client.llen(key) for key in client.scan_iter(match=inflight_key("*")))
    return WriteDepth(entries=entries, bytes=int(client.get(WRITE_BYTES) or 0))
