"""The uncertainty the charts draw: the panels' SQL 95% interval against scipy's t interval, and each chart's bucket
width chosen from how its scores spread."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from scipy import stats
from vigil.worker.report.build import MIN_TURNS_PER_BUCKET, chart_interval, run_query
from vigil.worker.store import connect, migrate
from vigil.worker.store.queries import PANELS

from tests.quality_seed import insert_scores, score_row

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("n", [2, 5, 31, 200])
def test_the_mean_interval_in_sql_is_students_t_interval(tmp_path, n):
    rng = random.Random(n)
    values = [round(min(max(rng.gauss(0.6, 0.2), 0.0), 1.0), 3) for _ in range(n)]
    client = connect(f"chdb://{tmp_path / 'chdb'}")
    migrate(client)
    insert_scores(client, [score_row(at=NOW - timedelta(minutes=30, seconds=i), score=v, seq=i)
                           for i, v in enumerate(values)])
    args = {"start": NOW - timedelta(hours=2), "end": NOW, "interval_s": 86400}

    [summary] = run_query(client, PANELS["monitor_summary"], **args)
    [bucket] = run_query(client, PANELS["score_mean_ci"], **args)
    client.close()

    mean = sum(values) / n
    low, high = stats.t.interval(0.95, n - 1, loc=mean, scale=stats.sem(values))
    for row, mean_key in ((summary, "mean_score"), (bucket, "mean_score")):
        assert row[mean_key] == pytest.approx(mean, abs=1e-9)
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(max(low, 0), abs=2e-3),
                                                   pytest.approx(min(high, 1), abs=2e-3))


def test_a_single_score_has_no_interval(tmp_path):
    client = connect(f"chdb://{tmp_path / 'chdb'}")
    migrate(client)
    insert_scores(client, [score_row(at=NOW - timedelta(minutes=5), score=0.4)])

    [row] = run_query(client, PANELS["score_mean_ci"], start=NOW - timedelta(hours=1), end=NOW, interval_s=3600)
    client.close()

    assert (row["mean_score"], row["ci_low"], row["ci_high"]) == (pytest.approx(0.4), None, None)


def _minutes(start: datetime, count: int, every_s: int) -> list[tuple[datetime, int]]:
    per_minute: dict[datetime, int] = {}
    for i in range(count):
        minute = (start + timedelta(seconds=i * every_s)).replace(second=0, microsecond=0)
        per_minute[minute] = per_minute.get(minute, 0) + 1
    return sorted(per_minute.items())


def test_dense_scores_get_narrow_buckets_and_sparse_ones_wide_buckets():
    start = NOW - timedelta(days=1)
    dense = _minutes(start, 24 * 60, 60)  # one a minute
    sparse = _minutes(start, 24, 3600)  # one an hour

    assert chart_interval(dense, start, NOW) == 900  # 15 per bucket at the 120-bucket floor of a day
    assert chart_interval(sparse, start, NOW) == 12 * 3600  # the first width holding MIN_TURNS_PER_BUCKET (12 ≥ 8)
    assert chart_interval([], start, NOW) == 86400
    assert MIN_TURNS_PER_BUCKET == 8  # the widths above follow from it


def test_a_burst_on_top_of_a_trickle_is_bucketed_for_the_typical_bucket_not_the_burst():
    start = NOW - timedelta(days=7)
    trickle = _minutes(start, 7 * 24, 3600)  # one an hour for a week
    burst = _minutes(NOW - timedelta(hours=2), 120, 60)  # then one a minute for two hours

    width = chart_interval(sorted(trickle + burst), start, NOW)

    assert width == 12 * 3600  # 3 h and 6 h buckets of the trickle hold 3 and 6, under MIN_TURNS_PER_BUCKET
