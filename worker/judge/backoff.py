"""How long to wait before retrying a judge call: pure arithmetic, no I/O, no clock.

``compute_backoff`` is exponential with "equal jitter" (half the delay fixed, half random), so a storm of 429s
spreads its retries instead of returning in lockstep. A server's ``Retry-After`` (seconds or an HTTP date, or
OpenAI's ``retry-after-ms``) is a floor: vigil never comes back earlier than it was asked to.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

__all__ = ["compute_backoff", "parse_retry_after", "retry_delay"]


def compute_backoff(
    attempt: int, *, base: float = 0.5, factor: float = 2.0, max_backoff: float = 30.0,
    jitter: bool = True, rand: Callable[[], float] = random.random,
) -> float:
    """The delay after failed attempt number ``attempt`` (1-based): ``base * factor**(attempt-1)``, capped at
    ``max_backoff``; with jitter, uniformly in [delay/2, delay]."""
    delay = min(max_backoff, base * factor ** max(0, attempt - 1))
    if jitter:
        delay = delay / 2 + rand() * delay / 2
    return delay


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


def retry_delay(
    attempt: int, retry_after: float | None, *, rand: Callable[[], float] = random.random, **backoff: float
) -> float:
    """The wait before the next attempt: the jittered backoff, but never less than the server's Retry-After."""
    delay = compute_backoff(attempt, rand=rand, **backoff)
    return delay if retry_after is None else max(retry_after, delay)
