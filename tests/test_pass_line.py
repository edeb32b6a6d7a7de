"""A monitor's pass line (``pass_at``, ``schemas.pass_line``): read from the config on the scorer's own scale, kept
on every score row, and the one cut the review page, agreement, kappa, the report and the agreement alerts use.

The running example: a 1-5 rubric whose monitor passes at 4 (a 3 is not good enough). The judge answered 3 (stored
as 0.5 of the scale) and a reviewer marked the turn bad: they agree. The old cut, "positive at 0.5", read the
judge's 3 as a pass and counted a disagreement. Every consumer below is shown agreeing where that cut disagreed.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from rich.console import Console
from vigil.schemas import AlertRule, Turn, VigilConfig, pass_line
from vigil.schemas.feedback import Feedback
from vigil.schemas.rows import score_row, trace_row
from vigil.schemas.score import ScoreResult
from vigil.worker.alerts import check_alerts
from vigil.worker.eval.stats import Judged, agreement
from vigil.worker.report import build_report
from vigil.worker.report.build import run_query
from vigil.worker.report.text import print_report
from vigil.worker.review.leases import LocalLeases
from vigil.worker.review.service import LabelRequest, ReviewService
from vigil.worker.store.queries import PANELS

from tests.test_review import Sent

NOW = datetime.now(UTC).replace(microsecond=0)
RUBRIC = {"name": "helpful", "kind": "llm_judge", "prompt": "Rate {{ answer }} from 1 to 5.",
          "output": {"type": "numeric", "min": 1, "max": 5}}
CATEGORIES = {"name": "grade", "kind": "llm_judge", "prompt": "Grade {{ answer }}.",
              "output": {"type": "categorical", "labels": {"great": 1.0, "fine": 0.7, "poor": 0.3, "bad": 0.0}}}


def config(pass_at=None, scorer: dict = RUBRIC, **monitor) -> VigilConfig:
    return VigilConfig.model_validate({
        "judges": [{"name": "j", "kind": "baseline"}], "scorers": [scorer],
        "monitors": [{"name": "m", "scorer": scorer["name"], "judge": "j", "pass_at": pass_at, **monitor}]})


PASS_AT_4 = config(4)
MONITOR = PASS_AT_4.monitor("m")
LINE = PASS_AT_4.pass_line(MONITOR)


def _insert(store, table: str, models: list) -> None:
    columns = list(type(models[0]).model_fields)
    store.insert(table, [[getattr(m, c) for c in columns] for m in models], column_names=columns)


def judged_three_reviewed_bad(store, n: int = 1, *, at: datetime = NOW, reviewer: str | None = "bob") -> list[str]:
    """``n`` turns the rubric rated 3 of 5 (0.5 of the scale), each labelled bad (0) by ``reviewer`` (if any)."""
    traces, scores, labels = [], [], []
    for i in range(n):
        turn = Turn.model_validate({"trace_id": uuid.uuid4().hex, "project": "shop", "agent": "bot",
                                    "started_at": at - timedelta(seconds=20 * i),
                                    "input": [{"role": "user", "content": f"q{i}"}], "output": f"a{i}"})
        result = ScoreResult(run_id=f"r{i}", scorer="helpful", scorer_version="v", status="scored", score=0.5,
                             label="3", reason="middling")
        traces.append(trace_row(turn))
        scores.append(score_row(turn, MONITOR, result, pass_line=LINE))
        labels.append(Feedback(trace_id=turn.trace_id, name="review", value=0.0, source="reviewer",
                               author=reviewer or "", monitor="m", queue="random", created_at=at))
    _insert(store, "traces", traces)
    _insert(store, "scores", scores)
    if reviewer is not None:
        _insert(store, "feedback", labels)
    return [t.trace_id for t in traces]


# -- the config: one line per monitor, on its scorer's scale -------------------------------------------------------

@pytest.mark.parametrize(("cfg", "line"), [
    pytest.param(config(), 0.5, id="unset-is-the-middle"),
    pytest.param(PASS_AT_4, 0.75, id="4-on-a-1-5-rubric"),
    pytest.param(config(3), 0.5, id="3-on-a-1-5-rubric"),
    pytest.param(config(["great", "fine"], CATEGORIES), 0.7, id="a-categorical-pass-set"),
    pytest.param(config(0.8, {"name": "r", "kind": "regex", "pattern": "x"}, judge=None), 0.8, id="a-check"),
])
def test_pass_at_is_read_on_the_scorers_own_scale(cfg, line):
    assert cfg.pass_line(cfg.monitor("m")) == line


@pytest.mark.parametrize(("make", "message"), [
    pytest.param(lambda: config(6), "monitors[0].pass_at: 6 is off the scale: give a number above 1", id="off-the-scale"),
    pytest.param(lambda: config(1), "above 1 (everything would pass)", id="at-the-bottom"),
    pytest.param(lambda: config(["good"]), "a list of labels is a pass set, for a categorical rubric", id="set-on-numbers"),
    pytest.param(lambda: config(["great", "poor"], CATEGORIES),
                 "the pass set must be the best-scoring labels: 'fine' scores 0.7", id="not-the-best-labels"),
    pytest.param(lambda: config(["grat"], CATEGORIES), "unknown label 'grat'", id="unknown-label"),
])
def test_a_pass_at_that_cannot_be_a_line_is_a_config_error_naming_the_monitor(make, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        make()


def test_python_and_sql_cut_at_the_same_place(store):
    cases = [(0.5, 1.0, 0.75), (3.0, 5.0, 0.6), (0.75, 1.0, 0.75), (0.7, 1.0, 0.7), (2.0, 0.0, 0.5)]

    got = [store.query(f"SELECT {pass_line.sql_passes(str(v), str(s), str(line))}").result_rows[0][0]
           for v, s, line in cases]

    assert [bool(x) for x in got] == [pass_line.passes(v, s, line) for v, s, line in cases] == [
        False, True, True, True, True]


# -- each consumer agrees where "positive at 0.5" disagreed ------------------------------------------------------

def test_the_agreement_panel_and_the_report_count_the_pair_as_agreeing(store):
    judged_three_reviewed_bad(store)

    [row] = run_query(store, PANELS["judge_agreement"], start=NOW - timedelta(hours=1), end=NOW + timedelta(minutes=1))
    report = build_report(store, start=NOW - timedelta(hours=1), end=NOW + timedelta(minutes=1), now=NOW)
    console = Console(record=True, width=200)
    print_report(report, console)

    assert (row["pairs"], row["agreed"], row["negative_feedback"]) == (1, 1, 1)
    assert (report.agreement[0].agreed, report.agreement[0].agreement) == (1, 1.0)
    assert "same side of the pass line" in " ".join(console.export_text().split())


def test_a_user_s_thumbs_on_the_whole_turn_is_cut_at_the_middle_of_its_own_scale(store):
    (trace,) = judged_three_reviewed_bad(store, reviewer="bob")
    store.command("TRUNCATE TABLE feedback")
    _insert(store, "feedback", [Feedback(trace_id=trace, name="stars", value=3, scale=5, source="user", author="u")])

    [row] = run_query(store, PANELS["judge_agreement"], start=NOW - timedelta(hours=1), end=NOW + timedelta(minutes=1))

    assert (row["agreed"], row["negative_feedback"]) == (0, 0)  # 3 stars of 5 is positive; the judge's 3 fails


def test_the_agreement_alert_stays_quiet_on_pairs_that_agree(store):
    judged_three_reviewed_bad(store, 40, at=NOW - timedelta(minutes=1))
    rule = AlertRule(name="agreement", kind="agreement", threshold=0.7, window_minutes=60, min_samples=30)

    assert check_alerts(store, VigilConfig(alerts=[rule]), now=NOW, notifier=lambda event: None) == []


def test_the_review_page_counts_the_label_as_agreeing_and_does_not_flag_the_turn(store):
    judged_three_reviewed_bad(store, reviewer="bob")
    service = ReviewService(store, LocalLeases(), Sent(), reviewer="ana")

    [progress] = service.progress()

    assert progress["agreement"]["value"] == 1.0
    assert service.next_item("m", "flagged", "ana") is None


def test_the_review_page_records_judge_right_on_a_failing_verdict_as_a_bad_turn(store):
    (trace,) = judged_three_reviewed_bad(store, reviewer=None)
    sent = Sent()
    service = ReviewService(store, LocalLeases(), sent, reviewer="ana")
    assert service.next_item("m", "random", "ana")["trace_id"] == trace  # the page leases the turn it shows

    label = service.label(LabelRequest(project="shop", trace_id=trace, monitor="m", action="judge-right", queue="random"))

    assert (label.value, sent[0].value) == (0.0, 0.0)


def test_kappa_reads_the_judges_verdict_at_the_monitors_line():
    items = [Judged(f"i{i}", f"i{i}", human, "scored", score)
             for i, (human, score) in enumerate([(0, 0.5), (0, 0.25), (1, 0.75), (1, 1.0)] * 5)]

    at_line = agreement(items, pass_line=LINE)

    assert (at_line.cohen_kappa.value, at_line.binary_accuracy.value, at_line.kappa_threshold) == (1.0, 1.0, 0.75)


def test_config_check_says_a_bad_pass_at_in_one_line_naming_the_monitor(tmp_path):
    from click.testing import CliRunner
    from vigil.worker.cli import main

    path = tmp_path / "vigil.yaml"
    path.write_text("judges: [{name: j, kind: baseline}]\nscorers:\n"
                    "  - {name: helpful, kind: llm_judge, prompt: 'Rate {{ answer }}', "
                    "output: {type: numeric, min: 1, max: 5}}\n"
                    "monitors: [{name: m, scorer: helpful, judge: j, pass_at: 6}]\n")

    result = CliRunner().invoke(main, ["config", "check", str(path)])

    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        f"vigil: error: {path}: monitors[0].pass_at: 6 is off the scale: give a number above 1 (everything would "
        "pass) and at most 5"]
