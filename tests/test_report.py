"""`vigil report`: the dashboard's main panels read back from ClickHouse into tables, JSON and a static page."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from rich.console import Console
from vigil.worker.cli import main
from vigil.worker.report import Report, build_report, write_html
from vigil.worker.report.build import pick_interval
from vigil.worker.report.text import print_report
from vigil.worker.store import connect, migrate

from tests.quality_seed import insert_scores, score_row, seed_everything

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def seeded(store):
    seed_everything(store, now=NOW)
    return store


def _text(report: Report) -> str:
    console = Console(record=True, width=200)
    print_report(report, console)
    return console.export_text()


def test_the_report_counts_each_status_per_monitor_and_agent(seeded):
    report = build_report(seeded, now=NOW)

    summary = {(m.agent, m.monitor): (m.turns, m.scored, m.unscored, m.failed) for m in report.monitors}
    assert summary == {(a, m): (360, 332, 10, 18) for a in ("assistant", "support-bot")
                       for m in ("alignment", "relevancy")}
    assert all(0 < m.mean_score < 1 for m in report.monitors)


def test_the_report_splits_scores_over_time_by_agent_monitor_and_scorer_version(seeded):
    report = build_report(seeded, now=NOW)

    assert {(s.agent, s.monitor, s.scorer_version) for s in report.score_over_time} == {
        (a, m, v) for a in ("assistant", "support-bot") for m in ("alignment", "relevancy") for v in ("1", "2")}
    assert all(s.points and all(0 <= p.value <= 1 for p in s.points) for s in report.score_over_time)


def test_the_worst_turns_come_lowest_first_with_reasons_questions_and_trace_ids(seeded):
    worst = build_report(seeded, now=NOW).worst_turns

    assert [w.score for w in worst] == sorted(w.score for w in worst)
    assert all(w.reason and w.trace_id and w.question for w in worst)


def test_the_worst_turns_list_only_turns_that_fail_their_pass_line(store):
    """A monitor whose turns all pass (a tool policy: 1.00 "all rules hold") has no worst turns to show; a turn at
    0.7 passes the default line (0.5) and is not among them either."""
    insert_scores(store, [score_row(at=NOW - timedelta(minutes=i), score=1.0, monitor="policy", seq=i,
                                    reason="all 4 rules hold") for i in range(5)]
                  + [score_row(at=NOW - timedelta(minutes=i), score=score, seq=100 + i)
                     for i, score in enumerate((0.2, 1.0, 0.7))])

    worst = build_report(store, now=NOW).worst_turns

    assert [(w.monitor, w.score) for w in worst] == [("relevancy", 0.2)]


def test_a_monitor_scored_by_the_baseline_heuristic_says_so_next_to_its_numbers(store):
    from vigil.worker.judge.baseline import MODEL
    from vigil.worker.report.html import render_html

    from tests.quality_seed import SCORE_COLUMNS

    at = SCORE_COLUMNS.index("judge_model")
    rows = [score_row(at=NOW - timedelta(minutes=i), score=0.3, seq=i) for i in range(10)]
    insert_scores(store, [r[:at] + [MODEL] + r[at + 1:] for r in rows]
                  + [score_row(at=NOW - timedelta(minutes=i), score=0.3, monitor="llm", seq=50 + i) for i in range(10)])

    report = build_report(store, now=NOW)

    assert {m.monitor: m.heuristic for m in report.monitors} == {"relevancy": True, "llm": False}
    assert report.status.heuristic == ["relevancy"]
    assert "monitor relevancy (answer_relevancy v1) scored by the baseline heuristic" in _text(report)
    assert 'relevancy</b> on support-bot <span class="heuristic"' in render_html(report)
    assert 'llm</b> on support-bot <span class="heuristic"' not in render_html(report)


def test_the_funnel_and_the_paused_judge_and_the_alerts_are_in_the_report(seeded):
    report = build_report(seeded, now=NOW)

    assert {(f.agent, f.monitor, f.sampled, f.scored, f.lost) for f in report.funnel} == {
        (a, m, 366 if (a, m) == ("support-bot", "relevancy") else 360, 332, 4 if (a, m) == ("support-bot", "relevancy")
         else 0) for a in ("assistant", "support-bot") for m in ("alignment", "relevancy")}
    assert {p.judge for p in report.paused_judges} == {"openai-main"}
    assert {a.rule for a in report.alerts} == {"score-regression", "judge-paused"}


def test_the_text_report_has_a_table_per_monitor_with_worst_turns_and_reasons(seeded):
    text = _text(build_report(seeded, now=NOW))

    assert "monitor alignment" in text and "monitor relevancy" in text
    assert "worst turns: relevancy" in text and "answer was off-topic" in text
    assert "openai-main (paused)" in text


def test_an_empty_store_gives_an_empty_report_not_an_error(store, tmp_path):
    report = build_report(store, now=NOW)

    assert report.monitors == [] and report.score_over_time == [] and report.worst_turns == []
    assert "no scores in this range" in _text(report)
    assert "no data" in write_html(report, tmp_path / "empty.html").read_text()


def test_a_reason_written_by_a_judge_is_escaped_in_the_page_and_not_markup_in_the_terminal(store, tmp_path):
    hostile = "<script>alert(1)</script> [bold red]shout[/]"
    insert_scores(store, [score_row(at=NOW - timedelta(minutes=1), score=0.0, reason=hostile)])
    report = build_report(store, now=NOW)

    page = write_html(report, tmp_path / "report.html").read_text()

    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "[bold red]shout[/]" in _text(report)


@pytest.mark.parametrize(("hours", "expected"), [(1, 60), (24, 900), (24 * 7, 3 * 3600), (24 * 365, 86400)],
                         ids=["1h", "1d", "1w", "1y"])
def test_the_bucket_size_keeps_charts_under_120_points(hours, expected):
    assert pick_interval(NOW - timedelta(hours=hours), NOW) == expected


def test_vigil_report_prints_json_for_machines_and_writes_the_page(chdb_dsn, tmp_path):
    client = connect(chdb_dsn)
    migrate(client)
    seed_everything(client, now=datetime.now(UTC))
    client.close()

    result = CliRunner().invoke(main, ["report", "--dsn", chdb_dsn, "--json", "--html", str(tmp_path / "r.html")])

    assert result.exit_code == 0, result.output
    report = Report.model_validate(json.loads(result.stdout))
    assert {m.monitor for m in report.monitors} == {"alignment", "relevancy"}
    assert (tmp_path / "r.html").read_text().startswith("<!doctype html>")


def test_the_status_says_what_each_monitor_spent_on_its_judge(seeded):
    """The seed's 400 judge calls at $0.002 each belong to the relevancy and alignment monitors; the status line
    names each one's spend beside the total, costliest first (a budget is kept per monitor)."""
    report = build_report(seeded, now=NOW)
    spent = seeded.query("SELECT monitor, sum(cost_usd) FROM judge_calls FINAL WHERE NOT cached "
                         "GROUP BY monitor HAVING sum(cost_usd) > 0").result_rows

    assert report.status.spend_by_monitor == pytest.approx(dict(spent))
    assert list(report.status.spend_by_monitor.values()) == sorted(report.status.spend_by_monitor.values(),
                                                                   reverse=True)
    line = report.status.judges_line()
    assert all(f"{m} ${usd:.4f}" in line for m, usd in spent)
    assert "judges: " in _text(report) and line in _text(report)
