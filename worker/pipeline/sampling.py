"""Deterministic sampling on the trace id.

A trace is sampled at rate r when the first 8 bytes of sha256(trace_id), read as a fraction of 2**64, fall below r.
So every monitor at rate r sees the same traces, a re-run agrees, and the set at r is a subset of the set at any r' > r.
"""

from __future__ import annotations

import hashlib

__all__ = ["sampled", "sample_point"]

_SPAN = float(2**64)


def sample_point(trace_id: str) -> float:
    """Where the trace falls in [0, 1)."""
    digest = hashlib.sha256(trace_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / _SPAN


def sampled(trace_id: str, rate: float) -> bool:
    return sample_point(trace_id) < rate
