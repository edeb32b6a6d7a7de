"""The per-minute and per-hour rollups (migration 0002) agree with the raw scores they are built from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from vigil.worker.store import migrate

from tests.quality_seed import insert_scores, score_row, seed_everything

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
KEY = "project, agent, monitor, scorer, scorer_version"


def _raw(store, bucket: str) -> list[tuple]:
    return store.query(f"""
        SELECT {bucket}(trace_time) AS b, {KEY}, count(), countIf(status = 'scored'), countIf(status = 'unscored'),
               countIf(status = 'failed'), round(avgIf(score / scale, status = 'scored'), 9),
               sum(judge_calls), sum(prompt_tokens), sum(completion_tokens), round(sum(cost_usd), 9)
        FROM scores FINAL GROUP BY b, {KEY} ORDER BY b, {KEY}""").result_rows


def _rolled(store, table: str) -> list[tuple]:
    return store.query(f"""
        SELECT bucket AS b, {KEY}, countMerge(rows), countIfMerge(scored), countIfMerge(unscored),
               countIfMerge(failed), if(isNaN(avgIfMerge(mean)), NULL, round(avgIfMerge(mean), 9)),
               sumMerge(judge_calls), sumMerge(prompt_tokens), sumMerge(completion_tokens), round(sumMerge(cost_usd), 9)
        FROM {table} GROUP BY b, {KEY} ORDER BY b, {KEY}""").result_rows


@pytest.mark.parametrize(("table", "bucket"), [("scores_1m", "toStartOfMinute"), ("scores_1h", "toStartOfHour")])
def test_rollups_match_counts_means_and_judge_usage_of_the_raw_scores(store, table, bucket):
    seed_everything(store, now=NOW)

    rolled = _rolled(store, table)

    assert rolled == _raw(store, bucket)
    assert {row[8] for row in rolled} != {0}  # some unscored turns are in the seed
    assert {row[9] for row in rolled} != {0}  # and some failed ones


def test_rollup_quantiles_and_queue_lag_track_the_raw_scores(store):
    insert_scores(store, [score_row(at=NOW + timedelta(seconds=i % 60), score=i / 100, seq=i, lag_s=3.0)
                          for i in range(101)])

    (q, lag), = store.query("SELECT quantilesTDigestIfMerge(0.1, 0.5, 0.9)(quantiles), "
                            "quantilesTDigestMerge(0.5, 0.95)(lag_seconds) FROM scores_1h").result_rows

    assert q == pytest.approx([0.1, 0.5, 0.9], abs=0.02)
    assert lag == pytest.approx([3.0, 3.0])


def test_a_redelivered_score_counts_once_in_scores_final_and_twice_in_the_rollups(store):
    """The documented trade-off: materialized views see inserts, not the deduplicated table."""
    row = score_row(at=NOW, score=0.5)
    insert_scores(store, [row])
    insert_scores(store, [row])

    final = store.query("SELECT count() FROM scores FINAL").result_rows[0][0]
    rolled = store.query("SELECT countMerge(rows) FROM scores_1m").result_rows[0][0]

    assert (final, rolled) == (1, 2)


def test_migrations_run_twice_apply_nothing_the_second_time(store):
    assert migrate(store) == []
    tables = {r[0] for r in store.query("SHOW TABLES").result_rows}
    assert {"scores_1m", "scores_1h", "scores_1m_mv", "scores_1h_mv"} <= tables
    assert "judge" in {r[0] for r in store.query("DESCRIBE alerts").result_rows}
