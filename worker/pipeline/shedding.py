"""Load shedding: when the score queue is deeper than its bound, ingest samples less instead of queueing more.

Each ingest batch reads the score queue's depth once. While the batch's sampled turns fit under the bound
(``VIGIL_SCORE_QUEUE_MAX``), nothing changes. Beyond it, every monitor's rate is multiplied by the fraction that
fits, ``room / wanted``, so about ``room`` score tasks are sent. The cut is on the same point of the trace id as
sampling (``vigil.worker.pipeline.sampling``): a turn is shed when it falls below the monitor's rate but not below the
reduced one, so every monitor and every worker sheds the same turns, and what survives at a lower fraction is a
subset of what survives at a higher one. Each shed turn is a ``shed`` stage in the funnel, never dropped silently.
Turns forced by negative feedback are never shed.
"""

from __future__ import annotations

__all__ = ["admitted_fraction"]


def admitted_fraction(depth: int, bound: int, wanted: int) -> float:
    """The share of ``wanted`` new score tasks that fits under ``bound`` with ``depth`` already queued: 1 when they
    all fit (or the bound is 0: no bound), 0 when the queue is at or over it."""
    if bound <= 0 or wanted <= 0:
        return 1.0
    room = bound - depth
    if room >= wanted:
        return 1.0
    return max(0.0, room / wanted)
