"""The sequential regression detector: a pure function of its saved state and the scores that arrived since.

Four one-sided CUSUMs watch every score of a monitor, each tuned to a drop of a different size (0.18, 0.32, 0.57
and 1.0 baseline standard deviations, a factor 1.78 apart), so no drop size has to be guessed: whichever drop
happens, one of them is within a factor 1.33 of it, where a CUSUM loses at most 11% of its speed.

Each CUSUM is a log-likelihood ratio against the monitor's own baseline, not a Gaussian formula. The alternative
to the baseline distribution F0 is its exponential tilt, f(x) ∝ f0(x)·exp(−θx), with θ solved so that its mean is
the drop's size lower: for normal scores that is the usual mean shift, for pass/fail the Bernoulli with a lower pass
rate, for six-level or skewed scores the same histogram leaning lower. Its log-likelihood ratio, −θx − ψ(θ) with ψ(θ) = log E0[exp(−θx)] taken from the
baseline histogram, is linear in the score; because E0[exp(llr)] = 1 on the baseline whatever its shape, the
false-alarm rate of a threshold h is the same function of h on every distribution (Lorden, Siegmund). Thresholds
come from Siegmund's approximation of the CUSUM's average run length, ARL0 ≈ (e^x − x − 1)/I0 with
x = h + 1.166·√(2·I0) and I0 the Kullback-Leibler distance per score, set so the four together raise ``false_alarms_per_month`` at the
monitor's own score rate. A Gaussian threshold applied to pass/fail scores alarms several times too often
(a fail is three standard deviations down); this one does not (``bench/alerts.py`` measures it).

The baseline is a histogram of the scores (50 bins on 0..1, each with its count and sum, so two-valued and
six-level scores stay exact) whose weights halve every ``baseline_minutes / 2``: it follows slow change, and is
frozen while an alert fires, so it never learns the drop it reports. Its mean is known only to ±σ/√n, and an error
e of it multiplies a CUSUM's false alarms by exp(2h·e/(δσ)), on average by exp(c²/2) with c = 2h/(δ√n); each CUSUM
compares with a reference h/(δ·n) standard deviations below the estimate, which cancels that: a few hundredths of
an sd after a day at one score a minute (where uncorrected it raises the smallest drop's alarms several-fold), a
few thousandths after weeks.

On a crossing the detector fires; the change-point estimate is the first score after the firing CUSUM last stood
at zero (its maximum-likelihood estimate of the start), the drop is the baseline mean minus the mean since then,
with a 95% interval. While firing, one more CUSUM tests the other way, "back at the baseline" against "still at
the dropped level", and resolves the alert when it crosses.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

__all__ = [
    "GRID", "Cusum", "Decision", "DetectorParams", "DetectorState", "siegmund_threshold", "step",
]

GRID = (0.18, 0.32, 0.57, 1.0)  # the drops, in baseline standard deviations, the CUSUMs are tuned to
BINS = 50
SD_FLOOR = 0.02  # a baseline that never varies still has a scale to measure a drop in
PRIOR = 1.0  # pseudo-scores spread over the bins: scores the baseline has not seen yet are possible, just rare
MONTH_S = 30 * 24 * 3600.0
STALE_S = 3600.0  # newest score older than this: the detector cannot tell (a backfill, or traffic stopped)


class DetectorParams(BaseModel):
    """What a rule sets: the false-alarm rate, the history to learn from, the baseline's memory."""

    false_alarms_per_month: float = 1.0
    warmup_s: float = 24 * 3600.0
    min_samples: int = 30
    half_life_s: float = 3.5 * 24 * 3600.0


class Cusum(BaseModel):
    """One CUSUM: its statistic, and the scores since it last stood at zero (its change-point estimate)."""

    w: float = 0.0
    since: float | None = None  # epoch seconds of the first score after the last zero
    n: int = 0
    total: float = 0.0
    squares: float = 0.0


class Baseline(BaseModel):
    counts: list[float] = Field(default_factory=lambda: [0.0] * BINS)
    sums: list[float] = Field(default_factory=lambda: [0.0] * BINS)
    squared_weights: float = 0.0  # Σw², for the effective sample size (Σw)²/Σw²
    started: float | None = None
    updated: float | None = None


class _Tilts(BaseModel):
    """The baseline's summary and each CUSUM's slope, intercept and threshold, derived afresh each check."""

    mean: float
    sd: float
    n_eff: float
    theta: list[float]
    intercept: list[float]
    threshold: list[float]
    info: list[float]
    reference: list[float]
    weight: float  # the baseline's total weight when they were derived
    at: float  # and its time


class DetectorState(BaseModel):
    """Everything the detector remembers of one monitor: JSON, saved after every check and read back on the next."""

    mode: Literal["warmup", "watching", "firing"] = "warmup"
    baseline: Baseline = Field(default_factory=Baseline)
    cusums: list[Cusum] = Field(default_factory=lambda: [Cusum() for _ in GRID])
    leader: int | None = None  # the CUSUM that fired
    recovery: float = 0.0
    recovery_theta: float | None = None
    recovery_shift: float | None = None
    fired_at: float | None = None  # epoch seconds of the score whose CUSUM crossed
    last_score_at: float | None = None
    scores: int = 0  # scores seen in all
    tilts: _Tilts | None = None  # derived from the baseline; re-derived when it has moved (``_current``)


class Decision(BaseModel):
    """One check's outcome: the state the alert should be in, the statistic against its threshold, and why."""

    mode: Literal["warmup", "watching", "firing"]
    breach: bool | None  # None: cannot tell (warming up, or no recent scores)
    statistic: float  # the highest CUSUM over its threshold: 1.0 fires
    leader: int | None = None
    since: float | None = None
    crossed_at: float | None = None
    baseline_mean: float | None = None
    baseline_n: float = 0.0
    recent_mean: float | None = None
    recent_n: int = 0
    drop: float | None = None
    drop_low: float | None = None
    drop_high: float | None = None
    scored: int = 0  # scores in this check
    fired: bool = False  # a crossing happened in this check's scores
    resolved: bool = False
    reason: str


def siegmund_threshold(arl0: float, info: float) -> float:
    """The LLR threshold h whose CUSUM averages ``arl0`` scores between false alarms, by Siegmund's approximation
    ARL0 ≈ (e^x − x − 1)/I0 with x = h + 1.166·√(2·I0) (I0: Kullback-Leibler distance per score)."""
    target = max(arl0 * info, 1e-9)
    x = math.log(target + 1.0)
    for _ in range(8):  # fixed point of x = log(target + x + 1), contracting by 1/(target + x + 1)
        x = math.log(target + x + 1.0)
    return max(x - 1.166 * math.sqrt(2.0 * info), 0.5)


def _histogram(baseline: Baseline) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities, values) of the baseline's bins, with ``PRIOR`` pseudo-scores at the bins' centres."""
    counts = np.asarray(baseline.counts)
    sums = np.asarray(baseline.sums)
    centres = (np.arange(BINS) + 0.5) / BINS
    values = np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), centres)
    weights = counts + PRIOR / BINS
    prior_sums = np.where(counts > 0, sums, 0.0) + centres * PRIOR / BINS
    values = prior_sums / weights
    return weights / weights.sum(), values


def _psi(p: np.ndarray, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """log E[exp(−θx)] over the histogram, for each θ (stable: shifted by the smallest exponent)."""
    exponents = -np.outer(theta, v)
    top = exponents.max(axis=1, keepdims=True)
    return (top[:, 0] + np.log((p[None, :] * np.exp(exponents - top)).sum(axis=1)))


def _tilts(state: DetectorState, params: DetectorParams) -> _Tilts:
    b = state.baseline
    p, v = _histogram(b)
    mean = float((p * v).sum())
    sd = max(math.sqrt(float((p * (v - mean) ** 2).sum())), SD_FLOOR)
    weight = sum(b.counts)
    n_eff = weight * weight / b.squared_weights if b.squared_weights else 0.0
    # Scores per month at the rate the baseline saw: weights decay with time constant tau, so after T seconds
    # they sum to rate·tau·(1 − e^(−T/tau)).
    tau = params.half_life_s / math.log(2)
    elapsed = max((b.updated or 0.0) - (b.started or 0.0), 60.0)
    rate = weight / (tau * (1 - math.exp(-elapsed / tau)))
    per_month = max(rate * MONTH_S, 1.0)
    arl0 = len(GRID) * per_month / params.false_alarms_per_month
    thetas = _tilt_for(p, v, mean - np.asarray(GRID) * sd)
    thresholds, info, intercept = _calibrate(p, v, thetas, np.zeros(len(GRID)), arl0)
    # The baseline mean is known to ±sd/√n; an error e of it moves each CUSUM's drift and multiplies its false
    # alarms by E[exp(c·Z)] = exp(c²/2), c = 2h/(δ·√n). A reference c/2 standard errors (h/(δ·n) sd) below the
    # estimate cancels that on average; with weeks of history it is a few thousandths of an sd.
    ref = thresholds / (np.asarray(GRID) * max(n_eff, 1.0) * sd)
    thresholds, info, intercept = _calibrate(p, v, thetas, ref, arl0)
    return _Tilts(mean=mean, sd=sd, n_eff=n_eff, theta=thetas.tolist(), intercept=intercept.tolist(),
                  threshold=thresholds.tolist(), info=info.tolist(), reference=ref.tolist(), weight=weight,
                  at=b.updated or 0.0)


def _current(state: DetectorState, params: DetectorParams) -> DetectorState:
    """The state with its tilts and thresholds derived from the baseline, anew when the baseline's weight moved
    by more than 1% or an hour passed since (they move slowly; deriving them takes a millisecond)."""
    t, b = state.tilts, state.baseline
    weight = sum(b.counts)
    if t is not None and abs(weight - t.weight) <= 0.01 * t.weight and (b.updated or 0.0) - t.at <= 3600.0:
        return state
    return state.model_copy(update={"tilts": _tilts(state, params)})


def _tilt_for(p: np.ndarray, v: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each target mean below the baseline's, the tilt θ ≥ 0 whose distribution f0·exp(−θx) has it (by
    bisection: the tilted mean falls as θ grows). Targets under the lowest value are clamped just above it."""
    targets = np.maximum(np.asarray(targets, dtype=float), float(v.min()) + 1e-3)
    mean = float((p * v).sum())
    theta = np.maximum(mean - targets, 0.0) / max(float((p * (v - mean) ** 2).sum()), 1e-9)
    for _ in range(60):  # Newton's method on m(θ) = target, m' = −variance; the tilted mean is convex enough
        weights = p[None, :] * np.exp(-np.outer(theta, v) + (theta[:, None] * v.min()))
        weights /= weights.sum(axis=1, keepdims=True)
        means = weights @ v
        variances = np.maximum(weights @ (v * v) - means * means, 1e-12)
        move = (means - targets) / variances
        theta = np.maximum(theta + move, theta / 2)
        if np.all(np.abs(means - targets) < 1e-7):
            break
    return theta


def _calibrate(p: np.ndarray, v: np.ndarray, thetas: np.ndarray, ref: np.ndarray, arl0: float,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds, I0, intercepts) of the CUSUMs tilting the reference (the baseline tilted by ``ref``) by
    ``thetas``: llr(x) = −θx − (ψ(ref + θ) − ψ(ref)), I0 = E_ref[−llr]."""
    psi_ref = _psi(p, v, ref)
    intercept = _psi(p, v, ref + thetas) - psi_ref
    ref_mean = (p[None, :] * v[None, :] * np.exp(-np.outer(ref, v) - psi_ref[:, None])).sum(axis=1)
    info = np.maximum(thetas * ref_mean + intercept, 1e-12)
    return np.asarray([siegmund_threshold(arl0, float(i)) for i in info]), info, intercept


def _learn(baseline: Baseline, ts: np.ndarray, xs: np.ndarray, params: DetectorParams) -> Baseline:
    """The baseline after decaying to the newest score and adding ``xs`` (weight 1 each)."""
    if not len(xs):
        return baseline
    now = float(ts[-1])
    decay = 0.5 ** ((now - baseline.updated) / params.half_life_s) if baseline.updated is not None else 1.0
    bins = np.minimum((xs * BINS).astype(int), BINS - 1)
    counts = np.asarray(baseline.counts) * decay + np.bincount(bins, minlength=BINS)
    sums = np.asarray(baseline.sums) * decay + np.bincount(bins, weights=xs, minlength=BINS)
    return Baseline(counts=counts.tolist(), sums=sums.tolist(),
                    squared_weights=baseline.squared_weights * decay * decay + len(xs),
                    started=baseline.started if baseline.started is not None else float(ts[0]), updated=now)


def _paths(w0: np.ndarray, llr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """W after each score (rows × K) from W0 (K), by W_j = S_j − min(−W0, min_{i≤j} S_i), and for each row the
    index of the latest score at which W was zero (−1: not within the batch)."""
    s = np.cumsum(llr, axis=0)
    running = np.minimum.accumulate(s, axis=0)
    floor = np.minimum(running, -w0[None, :])
    w = s - floor
    rows = np.arange(len(llr))[:, None]
    zero_rows = np.where(w <= 0.0, rows, -1)
    last_zero = np.maximum.accumulate(zero_rows, axis=0)
    return w, last_zero


def _advance(cusums: list[Cusum], w: np.ndarray, last_zero: np.ndarray, row: int, ts: np.ndarray,
             xs: np.ndarray) -> list[Cusum]:
    """The CUSUMs' states after score ``row`` of the batch."""
    out = []
    csum = np.concatenate([[0.0], np.cumsum(xs[: row + 1])])
    csq = np.concatenate([[0.0], np.cumsum(xs[: row + 1] ** 2)])
    for k, old in enumerate(cusums):
        zero = int(last_zero[row, k])
        if zero == row:
            out.append(Cusum())
        elif zero >= 0:
            out.append(Cusum(w=float(w[row, k]), since=float(ts[zero + 1]), n=row - zero,
                             total=float(csum[row + 1] - csum[zero + 1]), squares=float(csq[row + 1] - csq[zero + 1])))
        else:
            out.append(Cusum(w=float(w[row, k]), since=old.since if old.since is not None else float(ts[0]),
                             n=old.n + row + 1, total=old.total + float(csum[row + 1]),
                             squares=old.squares + float(csq[row + 1])))
    return out


def _watch(state: DetectorState, tilts: _Tilts, ts: np.ndarray, xs: np.ndarray) -> tuple[DetectorState, int | None]:
    """Run the CUSUMs over the batch; stop at the first crossing. Returns (state, the crossing row or None)."""
    theta, intercept, h = (np.asarray(a) for a in (tilts.theta, tilts.intercept, tilts.threshold))
    llr = -np.outer(xs, theta) - intercept[None, :]
    w, last_zero = _paths(np.asarray([c.w for c in state.cusums]), llr)
    crossed = np.nonzero((w >= h[None, :]).any(axis=1))[0]
    row = int(crossed[0]) if len(crossed) else len(xs) - 1
    cusums = _advance(state.cusums, w, last_zero, row, ts, xs)
    if not len(crossed):
        return state.model_copy(update={"cusums": cusums}), None
    leader = int(np.argmax(w[row] / h))
    return state.model_copy(update={"cusums": cusums, "leader": leader}), row


def _estimate(state: DetectorState, tilts: _Tilts) -> dict:
    """The change's start, the mean since then, and the drop with its 95% interval."""
    if state.leader is None:
        return {}
    c = state.cusums[state.leader]
    if c.n == 0:
        return {"since": c.since}
    mean = c.total / c.n
    variance = max(c.squares / c.n - mean * mean, 0.0) * c.n / (c.n - 1) if c.n > 1 else tilts.sd ** 2
    drop = tilts.mean - mean
    half = 1.959964 * math.sqrt(variance / c.n + tilts.sd ** 2 / max(tilts.n_eff, 1.0))
    return {"since": c.since, "recent_mean": mean, "recent_n": c.n, "drop": drop, "drop_low": drop - half,
            "drop_high": drop + half}


def _fire(state: DetectorState, tilts: _Tilts, at: float) -> DetectorState:
    estimate = _estimate(state, tilts)
    assert state.leader is not None
    # "Still dropped" is the smallest drop the interval allows (and at least the smallest the CUSUMs look for),
    # so a drop smaller than estimated does not pass for a recovery.
    shift = max(estimate.get("drop_low") or 0.0, GRID[0] * tilts.sd)
    p, v = _histogram(state.baseline)
    theta = float(_tilt_for(p, v, np.asarray([tilts.mean - shift]))[0])
    return state.model_copy(update={"mode": "firing", "fired_at": at, "recovery": 0.0, "recovery_theta": theta,
                                    "recovery_shift": shift})


def _follow(state: DetectorState, tilts: _Tilts, ts: np.ndarray, xs: np.ndarray) -> tuple[DetectorState, int | None]:
    """While firing: keep the estimate's running sums, and test "back at the baseline" against "still dropped";
    returns (state, the row where it recovered or None)."""
    assert state.leader is not None and state.recovery_theta is not None
    p, v = _histogram(state.baseline)
    ref = tilts.reference[state.leader]
    psi = _psi(p, v, np.asarray([ref, ref + state.recovery_theta]))
    llr = state.recovery_theta * xs + (psi[1] - psi[0])  # log f_ref(x) / f_dropped(x)
    w, _ = _paths(np.asarray([state.recovery]), llr[:, None])
    h = tilts.threshold[state.leader]
    crossed = np.nonzero(w[:, 0] >= h)[0]
    row = int(crossed[0]) if len(crossed) else len(xs) - 1
    leader = state.cusums[state.leader]
    upto = xs[: row + 1]
    followed = leader.model_copy(update={"n": leader.n + len(upto), "total": leader.total + float(upto.sum()),
                                         "squares": leader.squares + float((upto ** 2).sum())})
    cusums = list(state.cusums)
    cusums[state.leader] = followed
    state = state.model_copy(update={"cusums": cusums, "recovery": float(w[row, 0])})
    return state, (row if len(crossed) else None)


def step(state: DetectorState, ts: np.ndarray, xs: np.ndarray, now: float, params: DetectorParams,
         ) -> tuple[DetectorState, Decision]:
    """One check: the scores that arrived since the last (``ts`` epoch seconds ascending, ``xs`` on 0..1) through
    the detector. Pure: the same state and scores give the same result, live, in a backtest or a benchmark."""
    ts = np.asarray(ts, dtype=float)
    xs = np.clip(np.asarray(xs, dtype=float), 0.0, 1.0)
    fired = resolved = False
    crossed_at = state.fired_at
    scored = len(xs)
    if len(xs):
        state = state.model_copy(update={"last_score_at": float(ts[-1]), "scores": state.scores + len(xs)})
    while len(xs):
        if state.mode == "warmup":
            state = state.model_copy(update={"baseline": _learn(state.baseline, ts, xs, params)})
            b = state.baseline
            weight = sum(b.counts)
            ready = weight >= params.min_samples and b.started is not None and now - b.started >= params.warmup_s
            if ready:
                state = state.model_copy(update={"mode": "watching"})
            break
        state = _current(state, params)
        tilts = state.tilts
        assert tilts is not None
        if state.mode == "watching":
            state, row = _watch(state, tilts, ts, xs)
            cut = len(xs) if row is None else row + 1
            state = state.model_copy(update={"baseline": _learn(state.baseline, ts[:cut], xs[:cut], params)})
            if row is not None:
                state = _fire(state, tilts, float(ts[row]))
                fired, crossed_at = True, float(ts[row])
        else:
            state, row = _follow(state, tilts, ts, xs)
            cut = len(xs) if row is None else row + 1
            if row is not None:
                state = state.model_copy(update={"mode": "watching", "cusums": [Cusum() for _ in GRID],
                                                 "leader": None, "recovery": 0.0, "recovery_theta": None,
                                                 "recovery_shift": None, "fired_at": None})
                resolved = True
        ts, xs = ts[cut:], xs[cut:]
    if state.mode != "warmup":
        state = _current(state, params)
    decision = _decide(state, now, params, fired=fired, resolved=resolved, crossed_at=crossed_at)
    return state, decision.model_copy(update={"scored": scored})


def _decide(state: DetectorState, now: float, params: DetectorParams, *, fired: bool, resolved: bool,
            crossed_at: float | None) -> Decision:
    b = state.baseline
    if state.mode == "warmup":
        have = sum(b.counts)
        span = ((b.updated or 0.0) - (b.started or 0.0)) / 3600
        more_scores = max(0.0, params.min_samples - have)
        more_hours = max(0.0, params.warmup_s / 3600 - span)
        return Decision(mode="warmup", breach=None, statistic=0.0, baseline_n=have,
                        reason=(f"learning the baseline: {have:.0f} scores over {span:.1f} h, needs "
                                f"{params.min_samples} over {params.warmup_s / 3600:g} h: {more_scores:.0f} more "
                                f"scores and {more_hours:.1f} more hours"))
    tilts = state.tilts
    assert tilts is not None
    ratios = [c.w / h for c, h in zip(state.cusums, tilts.threshold, strict=True)]
    top = int(np.argmax(ratios))
    common = {"mode": state.mode, "baseline_mean": tilts.mean, "baseline_n": tilts.n_eff, "fired": fired,
              "resolved": resolved}
    stale = state.last_score_at is None or now - state.last_score_at > STALE_S
    if state.mode == "firing":
        estimate = _estimate(state, tilts)
        statistic = max(ratios[state.leader] if state.leader is not None else 1.0, 1.0)
        drop = estimate.get("drop")
        reason = (f"fired: a drop of {_sd(drop, tilts.sd)} since {_clock(estimate.get('since'))}; recovery "
                  f"test {state.recovery:.2f} of {tilts.threshold[state.leader or 0]:.2f} to resolve")
        return Decision(breach=None if stale else True, statistic=statistic, leader=state.leader,
                        crossed_at=crossed_at, reason=reason + (" (no score for over an hour)" if stale else ""),
                        **common, **estimate)
    reason = (f"watching: highest CUSUM ({GRID[top]:g} sd) at {ratios[top]:.0%} of its threshold "
              f"{tilts.threshold[top]:.2f} (baseline {tilts.mean:.3f} ± {tilts.sd:.3f}, n≈{tilts.n_eff:.0f}, "
              f"{params.false_alarms_per_month:g} false alarm(s) a month)")
    if resolved:
        reason = "resolved: the scores are back at the baseline; " + reason
    return Decision(breach=None if stale else False, statistic=ratios[top], crossed_at=crossed_at if fired else None,
                    reason=reason + (" (no score for over an hour)" if stale else ""), **common)


def _sd(drop: float | None, sd: float) -> str:
    return "—" if drop is None else f"{drop:.3f} ({drop / sd:.2f} sd)"


def _clock(at: float | None) -> str:
    from datetime import UTC, datetime

    return "—" if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M")
