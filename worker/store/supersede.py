"""Deleting turns a later assembly of their trace replaced (``vigil.worker.assembly.late``), everywhere they show.

``traces``, ``scores`` and the turn's ``pipeline_events`` (but its ``superseded`` stage) lose their rows through
lightweight deletes, so every query, panel, report and alert that reads them stops seeing the turn at once. The
rollups (``scores_1m`` / ``scores_1h``), fed by materialized views on insert, cannot subtract: each bucket that held a
superseded score is deleted and filled again from ``scores FINAL`` with the view's own SELECT (read from
``system.tables``, so it is always the current definition). Run by the writer, the only process that writes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from clickhouse_connect.driver.client import Client
from vigil.worker.store.migrations import ROLLUPS

__all__ = ["delete_superseded"]

_KEYS = "Array(Tuple(String, String, String))"
_BUCKETS = "Array(Tuple(String, String, String, String, String, DateTime('UTC')))"
_FROM_SCORES = re.compile(r"FROM\s+(?:`?\w+`?\.)?`?scores`?\s+GROUP BY", re.IGNORECASE)


def delete_superseded(client: Client, turns: Sequence[tuple[str, str, str]]) -> None:
    """Delete the rows of these (project, trace id, span id) turns (a trace id is its project's own) and rebuild the
    rollup buckets their scores were in."""
    keys = {"keys": [tuple(t) for t in turns]}
    views = dict(client.query("SELECT name, as_select FROM system.tables WHERE database = currentDatabase() AND "
                              "name IN {views:Array(String)}",
                              parameters={"views": [f"scores_{s}_mv" for s in ROLLUPS]}).result_rows)
    buckets = {}
    for suffix, bucket in ROLLUPS.items():
        buckets[suffix] = [tuple(row) for row in client.query(
            f"SELECT DISTINCT project, monitor, agent, scorer, scorer_version, {bucket}(trace_time) FROM scores FINAL "
            f"WHERE (project, trace_id, span_id) IN {{keys:{_KEYS}}}", parameters=keys).result_rows]
    for table, extra in (("traces", ""), ("scores", ""), ("pipeline_events", " AND stage != 'superseded'")):
        client.command(f"DELETE FROM {table} WHERE (project, trace_id, span_id) IN {{keys:{_KEYS}}}{extra}",
                       parameters=keys)
    for suffix, bucket in ROLLUPS.items():
        select = views.get(f"scores_{suffix}_mv")
        if not buckets[suffix] or not select or not _FROM_SCORES.search(select):
            continue
        where = (f"(project, monitor, agent, scorer, scorer_version, {bucket}(trace_time)) IN "
                 f"{{buckets:{_BUCKETS}}}")
        parameters = {"buckets": buckets[suffix]}
        client.command(f"DELETE FROM scores_{suffix} WHERE (project, monitor, agent, scorer, scorer_version, bucket) "
                       f"IN {{buckets:{_BUCKETS}}}", parameters=parameters)
        rebuilt = _FROM_SCORES.sub(f"FROM (SELECT * FROM scores FINAL WHERE {where}) GROUP BY", select, count=1)
        client.command(f"INSERT INTO scores_{suffix} {rebuilt}", parameters=parameters)
