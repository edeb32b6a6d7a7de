"""Migration 0012: pipeline_events sorted by time first, on a real chDB store made by the earlier migrations with rows
in it; the detector's coverage query then reads it through its primary key; the worst turns read only the range's
traces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from vigil.worker.store import connect, migrate
from vigil.worker.store.migrations import _files, _statements
from vigil.worker.store.queries import DETECTOR_QUERIES, PANELS, bind, render

from tests.quality_seed import insert_scores, score_row

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
COLUMNS = ["event_time", "project", "agent", "monitor", "stage", "trace_id", "span_id"]
BY_TIME = "toStartOfHour(event_time), project, monitor, stage, trace_id, span_id"


def _events(count: int, every: timedelta, *, start: datetime = NOW) -> list[list]:
    stages = ("received", "sampled", "scored", "filtered")
    return [[start - every * i, f"p{i % 2}", f"a{i % 3}", "" if i % 4 == 0 else f"m{i % 5}", stages[i % 4],
             f"trace-{i}", f"span-{i % 2}"] for i in range(count)]


def _rows(store) -> list[tuple]:
    result = store.query(f"SELECT {', '.join(COLUMNS)} FROM pipeline_events ORDER BY trace_id, span_id, stage")
    return [tuple(row) for row in result.result_rows]


def _tables(store) -> dict[str, str]:
    result = store.query("SELECT name, sorting_key FROM system.tables WHERE database = currentDatabase() "
                         "AND name LIKE 'pipeline_events%'")
    return dict(result.result_rows)


@pytest.fixture
def old_store(tmp_path):
    """A store made by the migrations before 0012, holding events over three months."""
    client = connect(f"chdb://{tmp_path / 'chdb'}")
    migrate(client, upto=11)
    client.insert("pipeline_events", _events(5000, timedelta(minutes=29)), column_names=COLUMNS)
    yield client
    client.close()


def test_a_store_made_before_0012_keeps_every_event_and_is_sorted_by_time_first(old_store):
    before = _rows(old_store)
    assert _tables(old_store) == {"pipeline_events": "project, monitor, stage, trace_id, span_id"}

    assert migrate(old_store, upto=12) == ["0012_pipeline_events_by_time.sql"]

    assert _rows(old_store) == before and len(before) == 5000
    assert _tables(old_store) == {"pipeline_events": BY_TIME}


def _run_0012_until(store, last: str) -> None:
    """Run 0012's statements in order up to the one starting with ``last``, as a run killed right after it."""
    [(_, _, sql)] = [f for f in _files() if f[0] == 12]
    for guard, statement in _statements(sql):
        if guard is None or store.query(guard).result_rows[0][0]:
            store.command(statement)
        if statement.startswith(last):
            return


@pytest.mark.parametrize("killed_after", ["CREATE TABLE", "EXCHANGE TABLES", "INSERT INTO"])
def test_a_0012_run_killed_half_way_finishes_on_the_next_run_with_every_event(old_store, killed_after):
    before = _rows(old_store)
    _run_0012_until(old_store, killed_after)

    migrate(old_store)

    assert sorted(set(_rows(old_store))) == sorted(before)  # a repeated copy may leave duplicates, unmerged yet
    assert _tables(old_store) == {"pipeline_events": BY_TIME}


def test_0012_on_an_empty_store_and_again_changes_nothing_more(tmp_path):
    store = connect(f"chdb://{tmp_path / 'chdb'}")
    migrate(store)

    assert migrate(store) == []
    assert _tables(store) == {"pipeline_events": BY_TIME}
    store.close()


def _primary_key_use(store, sql: str) -> tuple[list[str], int, int]:
    """From EXPLAIN indexes = 1 of ``sql``'s read of pipeline_events: the primary key's keys used, and the granules
    it selected of those the partition step passed on."""
    lines = [row[0].strip() for row in store.query("EXPLAIN indexes = 1 " + sql).result_rows]
    at = lines.index("PrimaryKey")
    keys_at = lines.index("Keys:", at)
    keys = []
    for line in lines[keys_at + 1:]:
        if line.startswith(("Condition:", "Parts:", "Granules:")):
            break
        keys.append(line)
    granules = next(line for line in lines[at:] if line.startswith("Granules:"))
    selected, total = (int(n) for n in granules.removeprefix("Granules:").strip().split("/"))
    return keys, selected, total


def test_the_detectors_coverage_query_selects_only_the_last_hours_granules_by_primary_key(old_store):
    # 60,000 events every 7 s (March only: the partition step does not prune them), merged into one part
    old_store.command("TRUNCATE TABLE pipeline_events")
    old_store.insert("pipeline_events", _events(60_000, timedelta(seconds=7)), column_names=COLUMNS)
    sql = render(bind(DETECTOR_QUERIES["coverage"].sql, window_minutes=60), start=NOW, end=NOW)
    old_store.command("OPTIMIZE TABLE pipeline_events FINAL")
    old_keys, old_selected, old_total = _primary_key_use(old_store, sql)
    result_before = old_store.query(sql).result_rows

    migrate(old_store)
    old_store.command("OPTIMIZE TABLE pipeline_events FINAL")
    keys, selected, total = _primary_key_use(old_store, sql)

    print(f"granules selected by the primary key: before {old_selected}/{old_total}, after {selected}/{total}")
    assert "toStartOfHour(event_time)" not in old_keys and old_selected >= old_total - 1  # all but monitor = ''
    assert "toStartOfHour(event_time)" in keys and selected <= 2 < total  # the last hour's
    assert old_store.query(sql).result_rows == result_before


def test_the_worst_turns_ignore_trace_rows_outside_the_range(tmp_path):
    """A worst turn's question and answer come from traces in the range only: a row of the same trace id from two
    months before is not read (before, the query read every traces row of the trace id, whenever it started)."""
    store = connect(f"chdb://{tmp_path / 'chdb'}")
    migrate(store)
    row = score_row(at=NOW - timedelta(minutes=30), score=0.1, monitor="relevancy")
    insert_scores(store, [row])
    trace_id = row[1]
    columns = ["trace_id", "span_id", "project", "agent", "started_at", "question", "output", "received_at"]
    old = NOW - timedelta(days=60)
    store.insert("traces", [[trace_id, "old-span", "shop", "support-bot", old, "old question", "old answer", old]],
                 column_names=columns)
    sql = render(PANELS["worst_turns"].sql, start=NOW - timedelta(hours=1), end=NOW)

    [worst] = store.query(sql).result_rows
    assert worst[7] == trace_id and (worst[8], worst[9]) == ("", "")

    store.insert("traces", [[trace_id, "", "shop", "support-bot", row[22], "new question", "new answer", NOW]],
                 column_names=columns)
    [worst] = store.query(sql).result_rows
    assert (worst[8], worst[9]) == ("new question", "new answer")
    store.close()
