"""How often the judge is right, estimated from review labels and weighted by how each item was chosen.

The random queue draws uniformly from a monitor's unreviewed scored turns; the other queues pick turns on purpose
(the lowest scores, complaints, alerts). A turn reviewed from a chosen queue is known for itself and stands for
nothing else; the turns drawn at random stand for every turn that was not reviewed on purpose. So, with ``N`` scored
turns, ``t`` of them reviewed from chosen queues (``a`` agreeing) and ``r`` drawn at random (agreement ``p̂``)::

    agreement = (a + (N - t) · p̂) / N

and its 95% interval is the Wilson interval of ``p̂`` carried through the same line (the chosen turns add no
uncertainty: they are a census of themselves). Without any random label the agreement of the turns nobody reviewed
is unknown: the interval is then the plain bounds ``a / N`` .. ``(a + N - t) / N`` and there is no point estimate.
Averaging the labels instead would count a complaint queue's turns as if they were typical.

A turn with several reviewers' labels counts once: the majority of their verdicts (a tie goes to the first label),
and it is a random draw if any of its labels came from the random queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel
from vigil.worker.eval.stats import wilson

__all__ = ["Label", "WeightedAgreement", "item_verdicts", "weighted_agreement"]

RANDOM = "random"


@dataclass(frozen=True)
class Label:
    """One reviewer's label of one turn for one monitor, as the estimate sees it."""

    trace_id: str
    queue: str
    agrees: bool  # the reviewer and the judge on the same side of the monitor's pass line


class WeightedAgreement(BaseModel):
    """The estimate for one monitor; ``value`` is None when no random label exists yet."""

    population: int  # scored turns of the monitor
    random: int  # reviewed turns drawn at random
    chosen: int  # reviewed turns picked on purpose
    value: float | None = None
    low: float | None = None
    high: float | None = None
    labelled_agreement: float | None = None  # the plain share over every reviewed turn, for comparison


def item_verdicts(labels: Iterable[Label]) -> dict[str, tuple[bool, bool]]:
    """trace_id -> (drawn at random, agrees): one verdict per turn, by majority, a tie to the first label."""
    grouped: dict[str, list[Label]] = {}
    for label in labels:
        grouped.setdefault(label.trace_id, []).append(label)
    verdicts = {}
    for trace_id, found in grouped.items():
        yes = sum(label.agrees for label in found)
        agrees = yes * 2 > len(found) or (yes * 2 == len(found) and found[0].agrees)
        verdicts[trace_id] = (any(label.queue == RANDOM for label in found), agrees)
    return verdicts


def weighted_agreement(random_verdicts: Sequence[bool], chosen_verdicts: Sequence[bool],
                       population: int) -> WeightedAgreement:
    """The estimate from the verdicts of turns drawn at random and of turns picked on purpose."""
    r, t = len(random_verdicts), len(chosen_verdicts)
    n = max(population, r + t)
    result = WeightedAgreement(population=n, random=r, chosen=t)
    if r + t == 0:
        return result
    a = sum(chosen_verdicts)
    result.labelled_agreement = (a + sum(random_verdicts)) / (r + t)
    rest = n - t
    if r == 0:
        result.low, result.high = a / n, (a + rest) / n
        return result
    sample = wilson(sum(random_verdicts), r)
    assert sample is not None and sample.low is not None and sample.high is not None
    result.value = (a + rest * sample.value) / n
    result.low = (a + rest * sample.low) / n
    result.high = (a + rest * sample.high) / n
    return result
