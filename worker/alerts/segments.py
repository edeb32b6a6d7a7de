"""Which slice of traffic a drop came from: every (key, value) of the turns, ranked by its share of the drop.

The drop is the baseline mean minus the mean since the change (``B − R``). A segment (``model = gpt-x``,
``release = v2``, ``tag = rag``, ``agent = support-bot``…) holding the fraction ``f`` of the scores since the change
contributes ``f · (B_s − R_s)`` to it, its own drop weighted by its traffic; a value the baseline never saw (a new
release, a new model) is compared with the whole baseline. The contributions of one key's values add up to the
whole drop, so ``share`` (contribution / drop) says how much of it that slice explains: "model = gpt-x, 30% of the
traffic, −0.4, 95% of the drop" comes first when only that model got worse. A value on nearly every score before
and after (a tag every turn carries) explains nothing and is left out, and so is vigil's own bookkeeping in the
metadata (``schemas.spans.is_bookkeeping``: span counts, operation names), which describes vigil's work, not the
traffic.

The agents an alert is about are the agents whose scores pulled the mean down, largest contribution first, each
contributing at least ``NAMED_AGENT`` of the largest agent's contribution (one stray low score of another agent is
not that agent regressing; ten agents that fell alike are all named): with one agent, that agent, even though it is
on every score and so never a segment.

Pure: the counts come from ClickHouse (``SEGMENT_QUERY``, for the live check and a backtest of the store) or from a
backtest file's own metadata (``count_segments``); the ranking is the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from vigil.schemas.alert import Segment
from vigil.schemas.spans import is_bookkeeping

__all__ = ["SEGMENT_QUERY", "Blame", "Segment", "SegmentCounts", "blame", "blame_rows", "count_segments",
           "rank_segments"]

UBIQUITOUS = 0.95  # a value on at least this share of the scores both before and after explains nothing
LIMIT = 5
NAMED_AGENT = 0.25  # an agent is named when it contributes at least this fraction of the largest agent's share


class SegmentCounts(BaseModel):
    """One (key, value): how many scores it had since the change and in the baseline, and their sums."""

    key: str
    value: str
    recent_n: int = 0
    recent_sum: float = 0.0
    baseline_n: int = 0
    baseline_sum: float = 0.0


class Blame(BaseModel):
    """What explains a drop: the ranked segments, and the agents it is about."""

    segments: list[Segment] = []
    agents: list[str] = []


def _contribution(c: SegmentCounts, total: SegmentCounts, baseline: float) -> float:
    """``f · (B_s − R_s)``: the segment's share of the traffic since the change times its own drop."""
    base = c.baseline_sum / c.baseline_n if c.baseline_n else baseline
    return c.recent_n / total.recent_n * (base - c.recent_sum / c.recent_n)


def blame(counts: Iterable[SegmentCounts], total: SegmentCounts, *, limit: int = LIMIT) -> Blame:
    """``rank_segments`` and the agents whose scores pulled the mean down, largest contribution first."""
    counts = list(counts)
    agents: list[str] = []
    if total.recent_n and total.baseline_n:
        baseline = total.baseline_sum / total.baseline_n
        pulled = [(_contribution(c, total, baseline), c.value) for c in counts
                  if c.key == "agent" and c.recent_n]
        pulled.sort(key=lambda p: (-p[0], p[1]))
        agents = [value for contribution, value in pulled
                  if contribution > 0 and contribution >= NAMED_AGENT * pulled[0][0]]
    return Blame(segments=rank_segments(counts, total, limit=limit), agents=agents)


def rank_segments(counts: Iterable[SegmentCounts], total: SegmentCounts, *, limit: int = LIMIT) -> list[Segment]:
    """The segments that explain the drop ``total`` shows, largest share first (at most ``limit``)."""
    if not total.recent_n or not total.baseline_n:
        return []
    recent, baseline = total.recent_sum / total.recent_n, total.baseline_sum / total.baseline_n
    drop = baseline - recent
    if drop <= 0:
        return []
    ranked = []
    for c in counts:
        if not c.recent_n or is_bookkeeping(c.key):
            continue
        traffic, before = c.recent_n / total.recent_n, c.baseline_n / total.baseline_n
        if traffic >= UBIQUITOUS and before >= UBIQUITOUS:
            continue
        mean = c.recent_sum / c.recent_n
        base = c.baseline_sum / c.baseline_n if c.baseline_n else None
        contribution = _contribution(c, total, baseline)
        if contribution > 0:
            ranked.append(Segment(key=c.key, value=c.value, n=c.recent_n, recent_mean=mean, baseline_mean=base,
                                  share=contribution / drop, traffic=traffic))
    ranked.sort(key=lambda s: (-s.share, -s.n, s.key, s.value))
    return ranked[:limit]


def count_segments(scores: Sequence[float], dimensions: Sequence[Mapping[str, Any]], recent: Sequence[bool],
                   ) -> tuple[list[SegmentCounts], SegmentCounts]:
    """Counts per (key, value) of a backtest file's scores: ``dimensions[i]`` is score i's metadata (a list value
    counts once per item, like a turn's tags); ``recent[i]`` whether it came after the change."""
    table: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0, 0.0])
    total = [0, 0.0, 0, 0.0]
    for score, dims, after in zip(scores, dimensions, recent, strict=True):
        at = 0 if after else 2
        total[at] += 1
        total[at + 1] += score
        for key, value in dims.items():
            for item in value if isinstance(value, list) else [value]:
                row = table[(str(key), str(item))]
                row[at] += 1
                row[at + 1] += score
    counts = [SegmentCounts(key=k, value=v, recent_n=int(r[0]), recent_sum=r[1], baseline_n=int(r[2]),
                            baseline_sum=r[3]) for (k, v), r in table.items()]
    return counts, SegmentCounts(key="", value="", recent_n=int(total[0]), recent_sum=total[1],
                                 baseline_n=int(total[2]), baseline_sum=total[3])


# Counts per (key, value) of a monitor's scores since the change and in the day before it, the turn's dimensions
# read from its stored trace: project, agent, environment, model, each tag, each metadata key; and the judge's
# model from the score itself (a judge model that changed is a segment like any other). The row with an
# empty key is the total. Bound server-side.
SEGMENT_QUERY = """
SELECT dim.1 AS key, dim.2 AS value,
       countIf(recent) AS recent_n, sumIf(x, recent) AS recent_sum,
       countIf(NOT recent) AS baseline_n, sumIf(x, NOT recent) AS baseline_sum
FROM (
    SELECT s.x AS x, s.recent AS recent,
           arrayConcat([('', ''), ('project', s.project), ('agent', s.agent), ('environment', s.environment)],
                        if(t.model != '', [('model', t.model)], []),
                        if(s.judge_model != '', [('judge_model', s.judge_model)], []),
                        arrayMap(tag -> ('tag', tag), t.tags),
                        arrayMap((k, v) -> (k, v), mapKeys(t.metadata), mapValues(t.metadata))) AS dims
    FROM (
        SELECT trace_id, project, agent, environment, judge_model, score / if(scale > 0, scale, 1) AS x,
               trace_time >= {since:DateTime64(3)} AS recent
        FROM scores FINAL
        WHERE monitor = {monitor:String} AND scorer_version = {version:String} AND status = 'scored'
          AND score IS NOT NULL AND label != 'abstained'
          AND trace_time >= {since:DateTime64(3)} - INTERVAL 1 DAY AND trace_time <= {until:DateTime64(3)}
    ) AS s
    LEFT ANY JOIN (
        SELECT trace_id, anyIf(model, model != '') AS model, groupUniqArrayArray(tags) AS tags,
               argMax(metadata, length(mapKeys(metadata))) AS metadata
        FROM traces
        WHERE started_at >= {since:DateTime64(3)} - INTERVAL 1 DAY - INTERVAL 1 HOUR
          AND started_at <= {until:DateTime64(3)}
        GROUP BY trace_id
    ) AS t ON t.trace_id = s.trace_id
)
ARRAY JOIN dims AS dim
GROUP BY key, value"""


def blame_rows(rows: Iterable[Sequence[Any]], *, limit: int = LIMIT) -> Blame:
    """``blame`` over ``SEGMENT_QUERY``'s rows."""
    counts, total = [], SegmentCounts(key="", value="")
    for key, value, recent_n, recent_sum, baseline_n, baseline_sum in rows:
        c = SegmentCounts(key=key, value=value, recent_n=recent_n, recent_sum=recent_sum or 0.0,
                          baseline_n=baseline_n, baseline_sum=baseline_sum or 0.0)
        if key == "":
            total = c
        else:
            counts.append(c)
    return blame(counts, total, limit=limit)
