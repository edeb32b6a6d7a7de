"""Griptape's ``Observability`` block puts every run of an application under its one ``main`` span, exported when the
block ends: a long-lived process sends each run's spans long before their parent. The corpus recording ``griptape/tool``
replayed so through a real ``vigil intake`` and ``vigil worker`` (its own module: the corpus test keeps its embedded
store open for the module, and one process holds one)."""

from __future__ import annotations

import json
import urllib.request
from collections import defaultdict

import pytest
from vigil.worker.store import connect

from tests.corpus import differences, recordings, seen_from_row
from tests.pipeline import intake_and_worker, wait_drained
from tests.test_framework_corpus import CONFIG


@pytest.mark.parametrize("plain", [
    pytest.param(False, id="Griptape's spans"),
    # the same tree with Griptape's marks taken off (its tags, the "()" of its span names): an application's own
    # plain spans around each run, under one process-wide span, the model calls the only spans in a convention
    pytest.param(True, id="an application's own plain spans around its runs"),
])
def test_a_griptape_app_whose_runs_share_one_trace_exported_run_by_run_stores_each_run_once(redis_server, tmp_path,
                                                                                            plain):
    """Griptape's ``Observability`` block puts every run of the application under its one ``main`` span, which ends
    (and is exported) only when the block does: in a long-lived process each run's spans arrive long before their
    parent. Sent so (each ``Agent.run()`` subtree in a request of its own, drained before the next, ``main`` last):
    each run is stored once, as its manifest says, and the late ``main`` supersedes nothing."""
    recording = next(r for r in recordings() if r.name == "griptape/tool")
    [request] = recording.requests
    [resource] = request["body"]["resourceSpans"]
    spans = [span for scope in resource["scopeSpans"] for span in scope["spans"]]
    if plain:
        for span in spans:
            span["name"] = span["name"].replace("()", "")
            span["attributes"] = [a for a in span.get("attributes", []) if a["key"] != "tags"]
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
    batches = [runs[run] for run in runs if run] + [runs[None]]  # main (no run above it) last
    assert len(batches) == 4 and [s["name"] for s in batches[-1]] == ["main"]
    with intake_and_worker(redis_server.url, tmp_path, CONFIG, VIGIL_INTAKE_SETTLE_S="1",
                           VIGIL_INTAKE_PARENT_WAIT_S="2") as (intake, worker):
        for batch in batches:
            body = {"resourceSpans": [{**resource, "scopeSpans": [{**resource["scopeSpans"][0], "spans": batch}]}]}
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

    assert differences(recording.manifest, [seen_from_row(row) for row in rows]) == []
    assert dict(stages).get("superseded", 0) == 0
