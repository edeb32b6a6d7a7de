"""One monitor's scores through the sequential detector at the live cadence, one check per 60 s of stream time.

The live check steps the detector once per beat; a backtest, the first check of a monitor (which rebuilds the
state from the stored history) and ``bench/alerts.py`` replay a stream through this, so every one of them takes
the same decisions the beat would have taken: a check at each minute boundary over the scores of that minute
(minutes without a score are skipped: nothing would change), then ``decide`` with the alert's state in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from vigil.schemas import AlertRule
from vigil.worker.alerts.decide import decide, sequential_verdict
from vigil.worker.alerts.model import AlertEvent, AlertState, Subject
from vigil.worker.alerts.sequential import Decision, DetectorParams, DetectorState, step

__all__ = ["CADENCE_S", "Episode", "checks", "episodes", "params_for"]

CADENCE_S = 60.0


def params_for(rule: AlertRule) -> DetectorParams:
    return DetectorParams(false_alarms_per_month=rule.false_alarms_per_month, warmup_s=rule.warmup_minutes * 60.0,
                          min_samples=rule.min_samples, half_life_s=rule.baseline_minutes * 30.0)


def checks(state: DetectorState, ts: np.ndarray, xs: np.ndarray, params: DetectorParams, *,
           end: float | None = None, cadence: float = CADENCE_S,
           progress: Callable[[int], None] | None = None) -> Iterator[tuple[float, DetectorState, Decision]]:
    """(check time, state after it, decision) for every check that had scores. ``ts`` ascending epoch seconds;
    a score at a check's exact time belongs to that check; no check is later than ``end``."""
    ts = np.asarray(ts, dtype=float)
    xs = np.asarray(xs, dtype=float)
    if not len(ts):
        return
    at = np.ceil(ts / cadence) * cadence
    if end is not None:
        at = np.minimum(at, end)
    starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    stops = np.r_[starts[1:], len(ts)]
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
        state, decision = step(state, ts[a:b], xs[a:b], float(at[a]), params)
        if progress is not None:
            progress(b - a)
        yield float(at[a]), state, decision


@dataclass
class Episode:
    """One alert as a backtest reports it: fired (and maybe resolved), with the estimate at firing."""

    event: AlertEvent
    resolved_at: datetime | None = None


def episodes(rule: AlertRule, subject: Subject, ts: np.ndarray, xs: np.ndarray, *,
             progress: Callable[[int], None] | None = None) -> tuple[list[Episode], DetectorState]:
    """Every alert ``rule`` would have raised on ``subject``'s stream, through ``decide`` as the beat runs it."""
    previous: AlertState | None = None
    found: list[Episode] = []
    state = DetectorState()
    for at, after, decision in checks(DetectorState(), ts, xs, params_for(rule), progress=progress):
        state = after
        now = datetime.fromtimestamp(at, UTC)
        event = decide(rule, sequential_verdict(subject, decision), previous, now)
        if event is None:
            continue
        previous = AlertState(alert_id=event.alert_id, state=event.state, fired_at=event.fired_at,
                              updated_at=event.updated_at)
        if event.action == "fired":
            found.append(Episode(event=event))
        elif event.action == "resolved" and found:
            found[-1].resolved_at = now
    return found, state
