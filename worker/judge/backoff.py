"""How long to wait before retrying a judge call: pure arithmetic, no I/O, no clock.

The delay is the one exponential backoff (``vigil.schemas.backoff``: from 0.5 s, doubling, capped at 30 s, with
equal jitter), so a storm of 429s spreads its retries instead of returning in lockstep. A server's ``Retry-After``
(seconds or an HTTP date, or OpenAI's ``retry-after-ms``) is a floor: vigil never comes back earlier than it asked.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

from vigil.schemas.backoff import backoff

__all__ = ["INITIAL_S", "MAXIMUM_S", "parse_retry_after", "retry_delay"]

INITIAL_S, MAXIMUM_S = 0.5, 30.0


def parse_retry_after(headers: Mapping[str, str], *, now: float) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After`` (delta seconds, or an HTTP
    date measured from ``now``, a Unix time). None when absent or unparseable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - now)


def retry_delay(attempt: int, retry_after: float | None, *, rand: Callable[[], float] = random.random) -> float:
    """The wait before the next attempt: the jittered backoff, but never less than the server's Retry-After."""
    delay = backoff(attempt, initial=INITIAL_S, maximum=MAXIMUM_S, rand=rand)
    return delay if retry_after is None else max(retry_after, delay)
