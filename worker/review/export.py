"""``vigil review export``: a monitor's review labels as a ``vigil eval`` dataset (JSON lines).

One item per labelled turn: ``{"id": ..., "human": ..., "turn": {...}, "comment"?: ...}``, ``human`` on 0..1
(the label's value / scale: "judge right" on a good turn and "judge wrong" on a bad one are 1, the others 0, a score
its share of the scale), the mean when several reviewers labelled the turn; ``comment`` their comments, each as
``reviewer: text``, joined by `` | ``. ``turn`` is the stored turn the label is of (a label names its turn's project:
a trace id is a project's own; a label from before projects, any project's turn of its trace id), so
``vigil eval --monitor`` scores the very text the reviewers saw, with a changed rubric or judge. ``id`` is the turn's
name (``traces.trace_name``: its trace id, after its project unless that is the default one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from clickhouse_connect.driver.client import Client
from vigil.worker.assembly.traces import trace_name
from vigil.worker.eval.items import EvalItem
from vigil.worker.store.queries import TRACE_ROWS
from vigil.worker.store.review import REVIEW_QUERIES

__all__ = ["export_items", "write_jsonl"]


def _rows(client: Client, sql: str, columns: tuple[str, ...], **params: Any) -> list[dict[str, Any]]:
    return [dict(zip(columns, row, strict=True)) for row in client.query(sql, parameters=params).result_rows]


def export_items(client: Client, monitor: str) -> Iterator[EvalItem]:
    """The labelled turns of ``monitor`` whose turn is still stored, in trace id order."""
    from vigil.worker.pipeline.feedback import turn_from_row

    query = REVIEW_QUERIES["export"]
    turns: dict[str, list[dict[str, Any]]] = {}  # trace id -> its stored rows, every project's
    humans: dict[tuple[str, str], list[float]] = {}  # (project, trace id) -> the labels' values
    comments: dict[tuple[str, str], list[str]] = {}
    for row in _rows(client, query.sql, query.columns, monitor=monitor):
        trace_id = row["trace_id"]
        if trace_id not in turns:
            turns[trace_id] = _rows(client, TRACE_ROWS.sql, TRACE_ROWS.columns, trace_id=trace_id)
        spans = [s for s in turns[trace_id] if row["project"] in ("", s["project"])]
        if not spans:
            continue  # the turn is no longer stored
        key = (spans[-1]["project"], trace_id)
        humans.setdefault(key, []).append(float(row["human"]))
        if row["comment"].strip():
            comments.setdefault(key, []).append(f"{row['author']}: {row['comment'].strip()}")
    for (project, trace_id), values in humans.items():
        turn = turn_from_row([s for s in turns[trace_id] if s["project"] == project][-1])
        said = comments.get((project, trace_id))
        yield EvalItem(id=trace_name(project, trace_id), human=sum(values) / len(values), turn=turn,
                       comment=" | ".join(said) if said else None)


def write_jsonl(items: Iterator[EvalItem], out: Any) -> int:
    count = 0
    for item in items:
        out.write(json.dumps(item.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n")
        count += 1
    return count
