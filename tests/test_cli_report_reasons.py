"""Why turns went unscored or failed: each monitor's top reasons, in the JSON, text and HTML report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rich.console import Console
from vigil.worker.report import build_report
from vigil.worker.report.html import render_html
from vigil.worker.report.text import print_report

from tests.quality_seed import insert_scores, score_row

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _rows(monitor: str, status: str, reason: str, count: int, seq: int) -> list[list]:
    return [score_row(at=NOW - timedelta(minutes=10 + i), score=None, monitor=monitor, status=status, reason=reason,
                      seq=seq + i) for i in range(count)]


def test_each_monitor_shows_its_three_commonest_reasons_per_status_most_common_first(store):
    insert_scores(store, [
        *_rows("rag", "unscored", "no reference answer: the trace has none and no golden set holds it", 5, 0),
        *_rows("rag", "unscored", "the judge's evaluate reply has no [RESULT] between 0 and 5", 2, 100),
        *_rows("rag", "unscored", "a reason seen once", 1, 200),
        *_rows("rag", "unscored", "the rarest reason", 1, 300),
        *_rows("rag", "failed", "judge timed out after 3 attempts", 3, 400),
        *_rows("relevancy", "unscored", "empty output", 1, 500),
        score_row(at=NOW - timedelta(minutes=5), score=0.8, monitor="rag", seq=600),
    ])

    report = build_report(store, now=NOW)

    rag = [(r.status, r.turns, r.reason[:20]) for r in report.unscored_reasons if r.monitor == "rag"]
    assert rag[:1] == [("failed", 3, "judge timed out afte")]
    assert [turns for status, turns, _ in rag if status == "unscored"][:2] == [5, 2]
    assert len([r for r in rag if r[0] == "unscored"]) == 3, "only the top three reasons"
    assert [(r.monitor, r.turns) for r in report.unscored_reasons if r.monitor == "relevancy"] == [("relevancy", 1)]

    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    assert "why not scored: rag" in text and "no reference answer" in text
    html = render_html(report)
    assert "Why turns were not scored" in html and "judge timed out after 3 attempts" in html
