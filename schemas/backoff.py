"""The one exponential backoff every retry loop uses: pure arithmetic, no I/O, no clock.

``initial * factor**(attempt - 1)`` seconds, capped at ``maximum``; with ``rand`` (the default), "equal jitter":
half the delay fixed, half uniform, so a crowd of retries spreads out instead of returning in lockstep. The SDK's
shipper (broker outages), the judge transport (429s, 5xx, timeouts; a server's Retry-After is a floor on top) and a
worker waiting out a full broker all call it. It lives with the contracts because both sides import it and
``producers`` may not import ``worker``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["backoff"]


def backoff(attempt: int, *, initial: float, maximum: float, factor: float = 2.0,
            rand: Callable[[], float] | None = random.random) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based); ``rand=None``: the delay itself, no jitter."""
    delay = min(maximum, initial * factor ** min(max(0, attempt - 1), 62))
    return delay if rand is None else delay / 2 + rand() * delay / 2
