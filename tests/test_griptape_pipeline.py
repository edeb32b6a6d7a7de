"""Griptape's ``Observability`` block puts every run of an application under its one ``main`` span, exported when the
block ends: a long-lived process sends each run's spans long before their parent. The corpus recording ``griptape/tool``
replayed so through a real ``vigil intake`` and ``vigil worker`` (its own module: the corpus test keeps its embedded
store open for the module, and one process holds one)."""

from __future__ import annotations

import json
import urllib.request
from collections import defaultdict

from vigil.worker.store import connect

from tests.corpus import differences, recordings, seen_from_row
from tests.pipeline import intake_and_worker, wait_drained
from tests.test_framework_corpus import CONFIG


PLAIN_TRACE = "0" * 31 + "1"  # the plain variant's trace id: its own trace beside the recording's


def batches(plain: bool) -> tuple[dict, list[list[dict]]]:
    """``griptape/tool``'s resource and its spans in requests: each ``Agent.run()`` subtree in one, ``main`` last.
    ``plain``: with Griptape's marks taken off (its tags, the "()" of its span names), in a trace of its own: an
    application's own plain spans around each run, under one process-wide span, the model calls the only spans in
    a convention."""
    [request] = next(r for r in recordings() if r.name == "griptape/tool").requests
    [resource] = request["body"]["resourceSpans"]
    spans = [span for scope in resource["scopeSpans"] for span in scope["spans"]]
    if plain:
        for span in spans:
            span["name"] = span["name"].replace("()", "")
            span["attributes"] = [a for a in span.get("attributes", []) if a["key"] != "tags"]
            span["traceId"] = PLAIN_TRACE
    parent = {span["spanId"]: span.get("parentSpanId") for span in spans}

    def run_of(span_id: str) -> str | None:  # the Agent.run() span a span is under (itself included)
        while span_id:
            if next(s for s in spans if s["spanId"] == span_id)["name"].replace("()", "") == "Agent.run":
                return span_id
            span_id = parent.get(span_id)
        return None

    runs: dict[str | None, list[dict]] = defaultdict(list)
    for span in spans:
        runs[run_of(span["spanId"])].append(span)
    out = [runs[run] for run in runs if run] + [runs[None]]  # main (no run above it) last
    assert len(out) == 4 and [s["name"] for s in out[-1]] == ["main"]
    return resource, out


def test_a_griptape_app_whose_runs_share_one_trace_exported_run_by_run_stores_each_run_once(redis_server, tmp_path):
    """Griptape's ``Observability`` block puts every run of the application under its one ``main`` span, which ends
    (and is exported) only when the block does: in a long-lived process each run's spans arrive long before their
    parent. Sent so (each ``Agent.run()`` subtree in a request of its own, drained before the next, ``main`` last),
    as Griptape writes them and as an application's own plain spans (``batches``): each run is stored once, as the
    recording's manifest says, and the late ``main`` supersedes nothing."""
    manifest = next(r for r in recordings() if r.name == "griptape/tool").manifest
    sent = {plain: batches(plain) for plain in (False, True)}
    with intake_and_worker(redis_server.url, tmp_path, CONFIG, VIGIL_INTAKE_SETTLE_S="1",
                           VIGIL_INTAKE_PARENT_WAIT_S="2") as (intake, worker):
        for step in range(4):  # both variants' runs one by one, side by side
            for resource, requests in sent.values():
                body = {"resourceSpans": [{**resource, "scopeSpans": [{**resource["scopeSpans"][0],
                                                                       "spans": requests[step]}]}]}
                post = urllib.request.Request(f"{intake.url}/v1/traces", data=json.dumps(body).encode(),
                                              headers={"Content-Type": "application/json"}, method="POST")
                with urllib.request.urlopen(post, timeout=30) as answer:
                    assert answer.status == 200
            wait_drained(redis_server.url, worker, timeout=120)
    store = connect(worker.dsn)
    try:
        result = store.query("SELECT * FROM traces FINAL")
        rows = [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]
        stages = store.query("SELECT stage, count() FROM pipeline_events GROUP BY stage").result_rows
    finally:
        store.close()

    griptape = [seen_from_row(row) for row in rows if row["trace_id"] != PLAIN_TRACE]
    plain = [seen_from_row(row) for row in rows if row["trace_id"] == PLAIN_TRACE]
    assert differences(manifest, griptape) == [], "as Griptape writes them"
    assert differences(manifest, plain) == [], "as an application's own plain spans"
    assert dict(stages).get("superseded", 0) == 0
