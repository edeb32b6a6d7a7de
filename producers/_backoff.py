"""Backoff arithmetic for broker retries: exponential, capped, with jitter."""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["compute_backoff"]


def compute_backoff(
    attempt: int, *, initial: float, maximum: float, jitter: Callable[[], float] = random.random
) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): equal jitter over ``initial * 2**(attempt-1)``."""
    ceiling = min(maximum, initial * 2 ** min(attempt - 1, 62))
    return ceiling / 2 + jitter() * ceiling / 2
