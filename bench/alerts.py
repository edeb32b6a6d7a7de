"""The default regression rule (the sequential detector) against the fastest possible detector, and its false alarms.

Delay: simulated score streams of three shapes (continuous: Beta with mean 0.75, sd 0.13; six-level: a latent
normal rounded to 0, 0.2 … 1; pass/fail at 85% pass) at 1, 5 and 20 scores a minute (Poisson), a week of history,
then the mean drops by d ∈ {0.2, 0.3, 0.5, 1.0} baseline standard deviations at a random second. The stream goes
through ``sequential.step`` once per 60 s of stream time, exactly as the beat calls it (the history in 10-minute
checks, to save time; the decisions there do not matter). "decision" is the time from the change to the score at
which the detector's CUSUM crossed, the quantity the oracle's figure is; "notified" adds the wait for the check
that reads it (under a minute). The oracle is a CUSUM that knows d in advance, tuned to one false alarm a month by
Siegmund's approximation (the issue's table).

False alarms: months of unchanged scores of each shape (and a continuous one whose mean swings ±0.5 sd each day)
through the detector, stepped hourly to save time (a crossing is found at its score whatever the batching), the
alarms counted per monitor-month; each alarm resolves by itself before the next can fire.

    python bench/alerts.py [--reps 40] [--months 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vigil.worker.alerts.sequential import DetectorParams, DetectorState, step

RATES = (1, 5, 20)
DROPS = (0.2, 0.3, 0.5, 1.0)
MONTH_MIN = 30 * 1440
PARAMS = DetectorParams()  # the defaults a rule gets: 1 false alarm a month, a day of warm-up, 3.5-day half-life
LEVELS = np.linspace(0, 1, 6)


class Shape:
    """A score distribution with a mean that can be moved down by d of its standard deviations."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cache: dict[float, float] = {}
        self.mean0 = {"continuous": 0.75, "six-level": self._six_mean(0.7), "pass/fail": 0.85}[name]
        self.sd0 = self.sd(0.7 if name == "six-level" else self.mean0)

    @staticmethod
    def _six_probs(latent: float) -> np.ndarray:
        edges = np.r_[-np.inf, (LEVELS[:-1] + LEVELS[1:]) / 2, np.inf]
        return np.diff(stats.norm.cdf(edges, loc=latent, scale=0.22))

    def _six_mean(self, latent: float) -> float:
        return float(self._six_probs(latent) @ LEVELS)

    def sd(self, param: float) -> float:
        if self.name == "continuous":
            return math.sqrt(param * (1 - param) / 11)
        if self.name == "pass/fail":
            return math.sqrt(param * (1 - param))
        p = self._six_probs(param)
        m = p @ LEVELS
        return float(math.sqrt(p @ (LEVELS - m) ** 2))

    def param_for(self, mean: float) -> float:
        """The distribution's parameter (mean, or latent mean) giving ``mean``."""
        if self.name != "six-level":
            return mean
        low, high = -1.0, 2.0
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if self._six_mean(mid) < mean else (low, mid)
        return (low + high) / 2

    def draw(self, rng: np.random.Generator, means: np.ndarray) -> np.ndarray:
        if self.name == "continuous":
            return rng.beta(means * 10, (1 - means) * 10)
        if self.name == "pass/fail":
            return (rng.random(len(means)) < means).astype(float)
        out = np.empty(len(means))
        for mean in np.unique(means):
            mask = means == mean
            probs = self._six_probs(self._latent(float(mean)))
            out[mask] = LEVELS[rng.choice(6, size=int(mask.sum()), p=probs)]
        return out

    def _latent(self, mean: float) -> float:
        if mean not in self._cache:
            self._cache[mean] = self.param_for(mean)
        return self._cache[mean]


def oracle_minutes(d: float, rate: float) -> float:
    """Siegmund's ARL1 of the CUSUM for a known shift d, tuned to ARL0 = one month of scores."""
    k = d / 2
    target = MONTH_MIN * rate * 2 * k * k
    x = math.log(target)
    for _ in range(50):
        x = math.log(target + x + 1)
    return (math.exp(-x) + x - 1) / (2 * k * k) / rate


def _batch(rng: np.random.Generator, t: float, seconds: float, rate: float) -> np.ndarray:
    n = rng.poisson(rate * seconds / 60)
    return t + np.sort(rng.random(n)) * seconds


def warm(shape: Shape, rate: float, rng: np.random.Generator, days: float = 7.0) -> tuple[DetectorState, float]:
    state, t = DetectorState(), 0.0
    while t < days * 86400:
        ts = _batch(rng, t, 600, rate)
        state, _ = step(state, ts, shape.draw(rng, np.full(len(ts), shape.mean0)), t + 600, PARAMS)
        t += 600
    return state, t


def delay(shape: Shape, state: DetectorState, t: float, rate: float, d: float, rng: np.random.Generator,
          ) -> tuple[float, float]:
    onset = t + rng.random() * 60
    low = shape.mean0 - d * shape.sd0
    for _ in range(20 * MONTH_MIN // 30):
        ts = _batch(rng, t, 60, rate)
        means = np.where(ts >= onset, low, shape.mean0)
        state, decision = step(state, ts, shape.draw(rng, means), t + 60, PARAMS)
        t += 60
        if decision.fired:
            assert decision.crossed_at is not None
            return (decision.crossed_at - onset) / 60, (t - onset) / 60
    return math.nan, math.nan


def false_alarms(shape: Shape, rate: float, months: float, rng: np.random.Generator, *, cycle: float = 0.0,
                 ) -> float:
    state, t = warm(shape, rate, rng, days=1.0)
    fired, end = 0, t + months * MONTH_MIN * 60
    while t < end:
        ts = _batch(rng, t, 3600, rate)
        means = shape.mean0 + cycle * shape.sd0 * np.sin(2 * np.pi * ts / 86400)
        state, decision = step(state, ts, shape.draw(rng, means), t + 3600, PARAMS)
        fired += decision.fired
        t += 3600
    return fired / months


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=40, help="changes per cell")
    parser.add_argument("--months", type=float, default=12, help="stationary monitor-months per cell")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    shapes = [Shape(n) for n in ("continuous", "six-level", "pass/fail")]
    delays, alarms = [], []
    for shape in shapes:
        for rate in RATES:
            warmed = [warm(shape, rate, rng) for _ in range(4)]
            for d in DROPS:
                runs = np.asarray([delay(shape, *warmed[i % 4], rate, d, rng) for i in range(args.reps)])
                oracle = oracle_minutes(d, rate)
                delays.append({"shape": shape.name, "rate": rate, "d": d, "oracle": oracle,
                               "decision": float(np.nanmean(runs[:, 0])), "notified": float(np.nanmean(runs[:, 1])),
                               "missed": int(np.isnan(runs[:, 0]).sum())})
            alarms.append({"shape": shape.name, "rate": rate, "cycle": False,
                           "per_month": false_alarms(shape, rate, args.months, rng)})
    for rate in RATES:
        alarms.append({"shape": "continuous, daily cycle ±0.5 sd", "rate": rate, "cycle": True,
                       "per_month": false_alarms(shapes[0], rate, args.months, rng, cycle=0.5)})
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps({"delays": delays, "false_alarms": alarms, "seconds": elapsed}))
        return
    print(f"Detection delay, minutes (mean of {args.reps} changes per cell; ratio = decision / oracle)\n")
    print("| shape | scores/min | " + " | ".join(f"d = {d}" for d in DROPS) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in DROPS) + " |")
    for shape in shapes:
        for rate in RATES:
            cells = [c for c in delays if c["shape"] == shape.name and c["rate"] == rate]
            print(f"| {shape.name} | {rate} | " + " | ".join(
                f"{c['decision']:.1f} / {c['oracle']:.1f} = {c['decision'] / c['oracle']:.2f}x "
                f"(notified {c['notified']:.1f})" for c in cells) + " |")
    worst = max(delays, key=lambda c: c["decision"] / c["oracle"])
    print(f"\nworst cell: {worst['shape']}, {worst['rate']}/min, d = {worst['d']}: "
          f"{worst['decision'] / worst['oracle']:.2f}x the oracle; missed within 20 days: "
          f"{sum(c['missed'] for c in delays)}")
    print(f"\nFalse alarms per monitor-month ({args.months:g} monitor-months per cell, target 1)\n")
    print("| stream | " + " | ".join(f"{r}/min" for r in RATES) + " |")
    print("| --- | " + " | ".join("---" for _ in RATES) + " |")
    for name in dict.fromkeys(a["shape"] for a in alarms):
        print(f"| {name} | " + " | ".join(f"{a['per_month']:.2f}" for a in alarms if a["shape"] == name) + " |")
    print(f"\n{elapsed:.0f} s")


if __name__ == "__main__":
    main()
