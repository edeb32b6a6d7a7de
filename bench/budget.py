"""What a judge budget costs in detection: spend and regression-detection delay with and without a budget.

Simulated traffic: days of turns with a diurnal shape (0.3 of the peak at night, the peak at 14:00 UTC; ``--per-day``
turns a day), each judged at ``COST`` USD, scores Beta-like with mean 0.75 and sd 0.13 (clipped Gaussian). After
two days of history the mean drops by ``--drop`` at a random second of the third day. Each budget (none: the
baseline, every turn judged; then a share of what judging every turn costs) goes through the pace ingest uses
(``vigil.worker.pipeline.budget.replay``: the same ``pace``, the ledger in memory), and the scores it keeps through
the default sequential rule at the live cadence (``vigil.worker.alerts.replay.episodes``). Reported per budget,
over ``--reps`` runs: the largest day's spend against the budget, the scores kept a day, the hours of a day with no
score, the median delay from the change to the alert (and its ratio to the baseline's, in the same run), and how
many runs detected the change within the day.

    python bench/budget.py [--reps 12] [--per-day 4000] [--drop 0.1] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vigil.schemas import AlertRule
from vigil.schemas.config import Budget
from vigil.worker.alerts.model import Subject
from vigil.worker.alerts.replay import episodes
from vigil.worker.pipeline.budget import DAY_S, replay
from vigil.worker.pipeline.sampling import sample_point

COST = 0.004  # USD per judged turn
START = 1_793_577_600.0  # 2026-11-02 00:00 UTC
SHARES = (None, 0.5, 0.25, 0.1)  # the budget as a share of what judging every turn costs; None: no budget


def stream(seed: int, per_day: int, days: int, drop: float) -> tuple[list[float], list[str], list[float], float]:
    rng = random.Random(seed)
    change = START + 2 * DAY_S + rng.uniform(0, 0.5 * DAY_S)  # in the first half of the third day
    ts = []
    while len(ts) < per_day * days:
        t = START + rng.uniform(0, days * DAY_S)
        hour = (t % DAY_S) / 3600
        if rng.random() < 0.3 + 0.7 * math.exp(-((hour - 14) / 5) ** 2):
            ts.append(t)
    ts.sort()
    xs = [min(1.0, max(0.0, rng.gauss(0.75 - (drop if t >= change else 0.0), 0.13))) for t in ts]
    return ts, [f"t{seed}-{i}" for i in range(len(ts))], xs, change


def run(seed: int, share: float | None, args: argparse.Namespace, rule: AlertRule) -> dict[str, float]:
    ts, ids, xs, change = stream(seed, args.per_day, 3, args.drop)
    if share is None:
        keep = [True] * len(ts)
    else:
        limit = Budget(usd_per_day=share * args.per_day * COST)
        keep = replay(ts, [sample_point(i) for i in ids], [COST] * len(ts), [320.0] * len(ts), limit, 1.0)
    kept_ts = [t for t, k in zip(ts, keep, strict=True) if k]
    kept_xs = [x for x, k in zip(xs, keep, strict=True) if k]
    spend_by_day: dict[int, float] = {}
    hours = set()
    for t in kept_ts:
        spend_by_day[int(t // DAY_S)] = spend_by_day.get(int(t // DAY_S), 0.0) + COST
        hours.add(int(t // 3600))
    found, _ = episodes(rule, Subject(monitor="m"), np.asarray(kept_ts), np.asarray(kept_xs))
    after = [e.event.fired_at.timestamp() for e in found if e.event.fired_at.timestamp() >= change]
    delay = (after[0] - change) / 60 if after and after[0] - change <= DAY_S else math.inf
    return {"max_day_spend": max(spend_by_day.values()), "kept_per_day": len(kept_ts) / 3,
            "empty_hours": 3 * 24 - len(hours), "delay_min": delay}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=12)
    parser.add_argument("--per-day", type=int, default=4000)
    parser.add_argument("--drop", type=float, default=0.1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rule = AlertRule(name="drop", kind="regression", warmup_minutes=24 * 60)
    full_cost = args.per_day * COST
    rows = []
    baseline_delay = None
    for share in SHARES:
        runs = [run(seed, share, args, rule) for seed in range(args.reps)]
        delays = [r["delay_min"] for r in runs]
        detected = [d for d in delays if math.isfinite(d)]
        median = statistics.median(detected) if detected else math.inf
        if share is None:
            baseline_delay = median
        rows.append({
            "budget": "none (every turn)" if share is None else f"{share:.0%} of full (${share * full_cost:.2f}/day)",
            "max_day_spend": max(r["max_day_spend"] for r in runs),
            "budget_usd": None if share is None else share * full_cost,
            "kept_per_day": statistics.mean(r["kept_per_day"] for r in runs),
            "empty_hours": max(r["empty_hours"] for r in runs),
            "median_delay_min": median,
            "delay_ratio": median / baseline_delay if baseline_delay else math.nan,
            "detected": f"{len(detected)}/{len(runs)}",
        })
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{args.per_day} turns/day, ${COST} a judged turn (${full_cost:.2f}/day for all), drop {args.drop} on "
          f"mean 0.75 sd 0.13, {args.reps} runs\n")
    print("| budget | largest day's spend | scores kept / day | hours with no score (of 72) | median delay (min) "
          "| delay / no budget | detected within a day |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['budget']} | ${r['max_day_spend']:.2f} | {r['kept_per_day']:.0f} | {r['empty_hours']} | "
              f"{r['median_delay_min']:.0f} | {r['delay_ratio']:.2f} | {r['detected']} |")


if __name__ == "__main__":
    main()
