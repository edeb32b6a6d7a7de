"""The last error each judge answered with, kept in Redis for ``vigil judge status``.

A refused or failed call (an HTTP error, a timeout, a connection error, a body that is not a completion) overwrites
its judge's entry in one hash shared by every worker (``vigil:judges:last_error``: judge -> status, message, time).
A paused judge makes no calls that reach the store, so without this an operator would see "paused" and no why.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from redis.asyncio import Redis

__all__ = ["LAST_ERROR_KEY", "LastError", "last_errors", "record_error"]

LAST_ERROR_KEY = "vigil:judges:last_error"


@dataclass(frozen=True)
class LastError:
    judge: str
    status: str  # as on the judge call row: http_401, timeout, connection_error, bad_response...
    message: str
    at: float  # Unix time


async def record_error(redis: Redis, judge: str, status: str, message: str, *, now: float | None = None) -> None:
    """Keep this error as ``judge``'s last (the message cut to 500 characters)."""
    entry = LastError(judge, status, message[:500], time.time() if now is None else now)
    await redis.hset(LAST_ERROR_KEY, judge, json.dumps(asdict(entry)))


async def last_errors(redis: Redis) -> dict[str, LastError]:
    """Every judge's last error, by name."""
    return {(k.decode() if isinstance(k, bytes) else k): LastError(**json.loads(v))
            for k, v in (await redis.hgetall(LAST_ERROR_KEY)).items()}
