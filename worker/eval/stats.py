"""Agreement between a judge's scores and people's labels: pure functions over numbers, scipy for the statistics.

Conventions (the README's "Can I trust the judge?" section states them too):

- ``pairwise_accuracy``: within each group, every pair of items whose human values differ is a pair; the judge is
  right on a pair when it orders them strictly as the humans did. An abstention (the rubric's 0, "the response
  states it is not sure") orders below every scored item, as 0 is the bottom of that rubric, and two abstentions
  tie. A tie, or an item without a verdict (unscored, failed), counts as wrong (``ties`` counts the tied pairs).
  95% interval: Wilson.
- ``spearman`` and ``kendall_tau_b`` over the items that have a score; 95% intervals by Fisher's z with the
  standard errors of Fieller, Hartley and Pearson (1957): √(1.06/(n−3)) and √(0.437/(n−4)).
- ``pearson`` only when the human values take more than two levels (scipy's Fisher-z interval).
- ``cohen_kappa`` only when the human values take exactly two levels: the higher level is "good", and the judge
  says "good" when ``score / scale`` reaches the monitor's pass line (``schemas.pass_line``; 0.5 unless the
  monitor sets ``pass_at``). Over the items that have a score; interval from
  Cohen's (1960) large-sample standard error √(pₒ(1−pₒ) / (n(1−pₑ)²)). ``binary_accuracy`` is the share of those
  items on which judge and people agree (Wilson interval).

scipy.stats takes ~0.8 s of CPU to import, so each function that computes with it imports it: `vigil alerts check`
and `vigil review` import this module for ``wilson`` and seldom call it.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from pydantic import BaseModel
from vigil.schemas.pass_line import DEFAULT_LINE, passes

__all__ = [
    "CONFIDENCE",
    "Agreement",
    "Estimate",
    "Judged",
    "Pair",
    "agreement",
    "cohen_kappa",
    "fisher_interval",
    "pairs",
    "wilson",
]

CONFIDENCE = 0.95


class Estimate(BaseModel):
    """A figure with its 95% interval (None when the sample is too small for one)."""

    value: float
    low: float | None = None
    high: float | None = None


class Agreement(BaseModel):
    n: int
    scored: int
    unscored: int
    failed: int
    abstained: int = 0
    pairs: int
    pairwise_accuracy: Estimate | None = None
    ties: int = 0
    spearman: Estimate | None = None
    kendall_tau_b: Estimate | None = None
    pearson: Estimate | None = None
    cohen_kappa: Estimate | None = None
    binary_accuracy: Estimate | None = None
    kappa_threshold: float | None = None


@dataclass(frozen=True)
class Judged:
    """One item as the statistics see it: its group, the human value, the judge's status and normalised score."""

    id: str
    group: str | None
    human: float
    status: str  # scored | unscored | failed | abstained
    score: float | None  # score / scale in [0, 1]; None when the judge gave none


def _order(item: Judged) -> float | None:
    """Where the judge places an item when ordering a pair: its score; an abstention below every score."""
    if item.score is not None:
        return item.score
    return -1.0 if item.status == "abstained" else None


@dataclass(frozen=True)
class Pair:
    better: Judged  # the item people preferred
    worse: Judged

    @property
    def correct(self) -> bool:
        better, worse = _order(self.better), _order(self.worse)
        return better is not None and worse is not None and better > worse

    @property
    def tie(self) -> bool:
        better = _order(self.better)
        return better is not None and better == _order(self.worse)

    @property
    def margin(self) -> float:
        return self.better.human - self.worse.human


@functools.cache
def _z() -> float:
    """The standard normal quantile of a two-sided ``CONFIDENCE`` interval (1.96)."""
    from scipy import stats

    return stats.norm.ppf(0.5 + CONFIDENCE / 2)


def wilson(successes: int, n: int) -> Estimate | None:
    """``successes / n`` with its Wilson score interval; None when ``n`` is 0."""
    if n == 0:
        return None
    from scipy import stats

    interval = stats.binomtest(successes, n).proportion_ci(CONFIDENCE, method="wilson")
    return Estimate(value=successes / n, low=float(interval.low), high=float(interval.high))


def fisher_interval(r: float, n: int, *, variance: float = 1.0, lost: int = 3) -> tuple[float | None, float | None]:
    """The interval of a correlation ``r`` by Fisher's z: ``tanh(atanh(r) ± z·√(variance/(n−lost)))``."""
    if n - lost <= 0 or not -1 < r < 1:
        return (None, None) if n - lost <= 0 else (r, r)
    spread = _z() * math.sqrt(variance / (n - lost))
    centre = math.atanh(r)
    return math.tanh(centre - spread), math.tanh(centre + spread)


def pairs(items: Sequence[Judged]) -> list[Pair]:
    """Every pair of items in the same group whose human values differ (items without a group pair with none)."""
    groups: dict[str, list[Judged]] = defaultdict(list)
    for item in items:
        if item.group is not None:
            groups[item.group].append(item)
    found = []
    for members in groups.values():
        for a, b in combinations(members, 2):
            if a.human != b.human:
                found.append(Pair(a, b) if a.human > b.human else Pair(b, a))
    return found


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _correlation(fn, human: Sequence[float], score: Sequence[float], variance: float, lost: int) -> Estimate | None:
    if len(human) < 3 or len(set(human)) < 2 or len(set(score)) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = _finite(fn(human, score).statistic)
    if r is None:
        return None
    low, high = fisher_interval(r, len(human), variance=variance, lost=lost)
    return Estimate(value=r, low=low, high=high)


def _pearson(human: Sequence[float], score: Sequence[float]) -> Estimate | None:
    if len(human) < 4 or len(set(human)) < 2 or len(set(score)) < 2:
        return None
    from scipy import stats

    result = stats.pearsonr(human, score)
    interval = result.confidence_interval(CONFIDENCE)
    return Estimate(value=float(result.statistic), low=float(interval.low), high=float(interval.high))


def cohen_kappa(human_good: Sequence[bool], judge_good: Sequence[bool]) -> Estimate | None:
    """Cohen's κ of two binary raters with Cohen's large-sample interval; None when chance agreement is total."""
    n = len(human_good)
    if n == 0:
        return None
    from scipy import stats

    table = stats.contingency.crosstab([bool(h) for h in human_good], [bool(j) for j in judge_good],
                                       levels=([False, True], [False, True])).count
    observed = (table[0, 0] + table[1, 1]) / n
    expected = float((table[0].sum() * table[:, 0].sum() + table[1].sum() * table[:, 1].sum()) / n**2)
    if expected >= 1:
        return None
    kappa = float((observed - expected) / (1 - expected))
    spread = _z() * math.sqrt(observed * (1 - observed) / (n * (1 - expected) ** 2))
    return Estimate(value=kappa, low=max(-1.0, kappa - spread), high=min(1.0, kappa + spread))


def agreement(items: Sequence[Judged], pass_line: float = DEFAULT_LINE) -> Agreement:
    """Every agreement figure for ``items`` (see the module docstring for the conventions); ``pass_line``: where on
    score / scale the judge calls an item good."""
    from scipy import stats

    found = pairs(items)
    correct = sum(p.correct for p in found)
    usable = [i for i in items if i.score is not None]
    human = [i.human for i in usable]
    score = [i.score for i in usable]
    levels = sorted({i.human for i in items})
    result = Agreement(
        n=len(items),
        scored=sum(i.status == "scored" for i in items),
        unscored=sum(i.status == "unscored" for i in items),
        failed=sum(i.status == "failed" for i in items),
        abstained=sum(i.status == "abstained" for i in items),
        pairs=len(found),
        pairwise_accuracy=wilson(correct, len(found)),
        ties=sum(p.tie for p in found),
        spearman=_correlation(stats.spearmanr, human, score, 1.06, 3),
        kendall_tau_b=_correlation(lambda h, s: stats.kendalltau(h, s, variant="b"), human, score, 0.437, 4),
    )
    if len(levels) > 2:
        result.pearson = _pearson(human, score)
    elif len(levels) == 2 and usable:
        good = levels[1]
        human_good = [h == good for h in human]
        judge_good = [passes(s, 1.0, pass_line) for s in score]
        result.cohen_kappa = cohen_kappa(human_good, judge_good)
        result.binary_accuracy = wilson(sum(h == j for h, j in zip(human_good, judge_good, strict=True)),
                                        len(usable))
        result.kappa_threshold = pass_line
    return result
