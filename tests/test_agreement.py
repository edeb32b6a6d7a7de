"""Judge-human agreement on seeded scores and feedback in chDB: the panel's SQL (its Wilson interval against
scipy's), the `agreement` alert rule (fires on a drop, quiet on noise, a plain threshold, too few pairs), and the
report showing it."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from rich.console import Console
from vigil.schemas import AlertRule, VigilConfig
from vigil.worker.alerts import check_alerts
from vigil.worker.cli import main
from vigil.worker.eval.stats import wilson
from vigil.worker.report import build_report
from vigil.worker.report.build import run_query
from vigil.worker.report.html import render_html
from vigil.worker.report.text import print_report
from vigil.worker.store.queries import PANELS

from tests.quality_seed import insert_scores, score_row, series

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
WEEK = 7 * 24 * 60
FEEDBACK_COLUMNS = ["feedback_id", "trace_id", "name", "value", "scale", "comment", "source", "author", "created_at"]


def seed_pairs(store, rows: list[list], *, agree: float, seed: int, late: timedelta = timedelta(0)) -> int:
    """Scores, and thumbs on each scored turn that agree with the judge with probability ``agree``; the feedback
    is given ``late`` after the turn. Returns how many pairs agree."""
    rng = random.Random(seed)
    insert_scores(store, rows)
    feedback, agreed = [], 0
    for row in rows:
        trace_id, score, at = row[1], row[10], row[22]
        judge_positive = score >= 0.5
        same = rng.random() < agree
        agreed += same
        thumbs_up = judge_positive if same else not judge_positive
        feedback.append([f"fb-{trace_id}", trace_id, "thumbs", float(thumbs_up), 1.0, "", "user", "", at + late])
    store.insert("feedback", feedback, column_names=FEEDBACK_COLUMNS)
    return agreed


def week_of_pairs(store, *, agree: float = 0.9) -> None:
    """A week of turns every 10 minutes, ending where the recent hour starts."""
    seed_pairs(store, series(start=NOW - timedelta(minutes=WEEK + 60), minutes=WEEK, every_s=600,
                             value=lambda rng, i: rng.random(), seed=1), agree=agree, seed=1)


def recent_pairs(store, *, agree: float, seed: int = 2, every_s: int = 30) -> int:
    return seed_pairs(store, series(start=NOW - timedelta(minutes=60), minutes=60, every_s=every_s,
                                    value=lambda rng, i: rng.random(), seed=seed), agree=agree, seed=seed)


def rule(**overrides) -> VigilConfig:
    fields = {"name": "judge-agreement", "kind": "agreement", "window_minutes": 60, "baseline_minutes": WEEK,
              "min_samples": 30, "min_effect_size": 0.5, "p_value": 0.01} | overrides
    return VigilConfig(alerts=[AlertRule(**fields)])


def test_the_agreement_panel_counts_pairs_and_its_interval_is_scipys_wilson_interval(store):
    agreed = recent_pairs(store, agree=0.8, every_s=90)

    [row] = run_query(store, PANELS["judge_agreement"], start=NOW - timedelta(hours=2), end=NOW)

    assert (row["monitor"], row["pairs"], row["agreed"]) == ("relevancy", 40, agreed)
    assert row["agreement"] == pytest.approx(agreed / 40)
    interval = wilson(agreed, 40)
    low, high = interval.low, interval.high
    assert (row["agreement_low"], row["agreement_high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))


def test_feedback_given_a_week_after_the_turn_counts_for_the_turns_time(store):
    turns = series(start=NOW - timedelta(minutes=60), minutes=30, every_s=60, value=lambda rng, i: 0.9, seed=3)
    seed_pairs(store, turns, agree=1.0, seed=3, late=timedelta(days=7))

    [row] = run_query(store, PANELS["judge_agreement"], start=NOW - timedelta(hours=2), end=NOW)

    assert (row["pairs"], row["agreed"]) == (30, 30)


def test_a_turn_without_feedback_or_without_a_score_makes_no_pair(store):
    insert_scores(store, [score_row(at=NOW - timedelta(minutes=5), score=0.9, seq=1),
                          score_row(at=NOW - timedelta(minutes=5), score=None, status="unscored", seq=2)])
    unscored_trace = score_row(at=NOW - timedelta(minutes=5), score=None, seq=2)[1]
    store.insert("feedback", [["fb", unscored_trace, "thumbs", 0.0, 1.0, "", "user", "", NOW]],
                 column_names=FEEDBACK_COLUMNS)

    assert run_query(store, PANELS["judge_agreement"], start=NOW - timedelta(hours=2), end=NOW) == []


def test_an_injected_drop_in_agreement_fires_the_alert_with_its_interval(store):
    week_of_pairs(store, agree=0.9)
    recent_pairs(store, agree=0.5)

    events = check_alerts(store, rule(), now=NOW, notifier=lambda event: None)

    [event] = events
    assert (event.action, event.kind, event.monitor, event.recent_n) == ("fired", "agreement", "relevancy", 120)
    assert event.recent_mean == pytest.approx(0.5, abs=0.1) and event.baseline_mean == pytest.approx(0.9, abs=0.03)
    assert event.p_value < 1e-6 and event.effect_size > 0.5
    assert "judge-human agreement" in event.message and "95%" in event.message and "significantly below" in event.message


@pytest.mark.parametrize("seed", [2, 3, 4, 5, 6])
def test_agreement_that_wobbles_around_its_baseline_stays_quiet(store, seed):
    week_of_pairs(store, agree=0.85)
    recent_pairs(store, agree=0.85, seed=seed)

    assert check_alerts(store, rule(), now=NOW, notifier=lambda event: None) == []


def test_agreement_under_the_threshold_fires_even_without_a_baseline(store):
    recent_pairs(store, agree=0.55)

    [event] = check_alerts(store, rule(threshold=0.7), now=NOW, notifier=lambda event: None)

    assert event.action == "fired" and event.p_value is None and "below 70%" in event.message


def test_agreement_above_the_threshold_and_without_a_baseline_stays_quiet(store):
    recent_pairs(store, agree=0.95)

    assert check_alerts(store, rule(threshold=0.7), now=NOW, notifier=lambda event: None) == []


def test_too_few_pairs_never_fire_however_low(store):
    week_of_pairs(store, agree=0.9)
    recent_pairs(store, agree=0.0, every_s=180)  # 20 pairs, all disagreeing

    assert check_alerts(store, rule(threshold=0.7), now=NOW, notifier=lambda event: None) == []


def test_the_report_shows_agreement_per_monitor_with_n_and_interval_in_text_and_json(store, chdb_dsn):
    agreed = recent_pairs(store, agree=0.75)

    report = build_report(store, start=NOW - timedelta(hours=2), end=NOW, now=NOW)
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()

    [row] = report.agreement
    assert (row.pairs, row.agreed) == (120, agreed)
    assert "judge-human agreement" in text and f"{agreed / 120:.0%}" in text
    assert f"{row.agreement_low:.0%}–{row.agreement_high:.0%}" in text
    page = render_html(report)
    section = page[page.index("<h2>Judge-human agreement</h2>"):]
    assert f"<td class=\"num\">{agreed / 120:.2f}</td>" in section[:section.index("</section>")]
    store.close()
    result = CliRunner().invoke(main, ["report", "--dsn", chdb_dsn, "--json"])
    assert result.exit_code == 0, result.output
    [shown] = json.loads(result.stdout)["agreement"]
    assert (shown["monitor"], shown["pairs"], shown["agreed"]) == ("relevancy", 120, agreed)
