"""The write queue: scoring workers never touch ClickHouse; they push finished rows onto a Redis list.

Each entry is one JSON object ``{"table": name, "rows": [...]}``. The writer (``worker.sinks.writer``) is the only
process that inserts, so the embedded chDB store (one process per directory) and a ClickHouse server both work.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import redis
from pydantic import BaseModel

__all__ = ["WRITE_QUEUE", "inflight_key", "owner_key", "push"]

WRITE_QUEUE = "vigil.write"


def inflight_key(writer_id: str) -> str:
    return f"{WRITE_QUEUE}.inflight.{writer_id}"


def owner_key(writer_id: str) -> str:
    """The heartbeat of the writer that owns ``inflight_key(writer_id)``."""
    return f"{WRITE_QUEUE}.owner.{writer_id}"


def push(client: redis.Redis, tables: Iterable[tuple[str, list[BaseModel]]]) -> None:
    """Push rows for several tables in one round trip."""
    entries = [
        json.dumps({"table": table, "rows": [row.model_dump(mode="json") for row in rows]}, ensure_ascii=False)
        for table, rows in tables
        if rows
    ]
    if entries:
        client.rpush(WRITE_QUEUE, *entries)
