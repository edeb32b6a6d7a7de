"""Replay (backfill): capture every turn of a JSON-lines file through a ``Monitor``, the same path agents use.

Unlike an agent, a backfill may wait: when the monitor's queue is half full (in turns or in bytes), replay flushes
before capturing more, so a large file is not shed as ``queue_full`` or ``queue_bytes``. Lines that are not a JSON
object are reported (by line number), not sent. Progress goes to an optional callback after every line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from .monitor import Monitor, MonitorCounters

__all__ = ["ReplayProgress", "ReplayResult", "replay"]


class ReplayProgress(BaseModel):
    lines: int
    captured: int
    bytes_read: int
    bytes_total: int


class ReplayResult(BaseModel):
    lines: int
    captured: int
    invalid_lines: list[int]
    delivered: bool  # everything captured reached the broker within the flush timeout
    counters: MonitorCounters


def replay(
    path: str | Path,
    monitor: Monitor,
    *,
    on_progress: Callable[[ReplayProgress], None] | None = None,
    flush_timeout: float = 60.0,
) -> ReplayResult:
    path = Path(path)
    total = path.stat().st_size
    room = max(1, monitor.settings.max_queue // 2)
    room_bytes = monitor.settings.max_queue_bytes // 2
    lines = captured = read = 0
    invalid: list[int] = []
    with path.open("rb") as handle:
        for raw in handle:
            lines += 1
            read += len(raw)
            if raw.strip():
                try:
                    turn = json.loads(raw)
                except ValueError:
                    turn = None
                if not isinstance(turn, dict):
                    invalid.append(lines)
                else:
                    counters = monitor.counters()
                    if counters.queued >= room or counters.queued_bytes >= room_bytes:
                        monitor.flush(flush_timeout)
                    captured += monitor.capture(turn)
            if on_progress is not None:
                on_progress(ReplayProgress(lines=lines, captured=captured, bytes_read=read, bytes_total=total))
    delivered = monitor.flush(flush_timeout)
    return ReplayResult(
        lines=lines, captured=captured, invalid_lines=invalid, delivered=delivered, counters=monitor.counters()
    )
