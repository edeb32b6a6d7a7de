"""An alert is one sentence for people (``worker/alerts/sentence.py``): its wording rules, the agents and segments
it names (never vigil's bookkeeping), and on a real chDB store the same sentence in the webhook, the terminal, the
report (text, JSON, HTML) and the Grafana annotation."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import numpy as np
from rich.console import Console
from vigil.schemas import AlertRule, VigilConfig
from vigil.schemas.alert import Segment
from vigil.worker.alerts import check_alerts
from vigil.worker.alerts.model import AlertEvent
from vigil.worker.alerts.notify import WebhookNotifier
from vigil.worker.alerts.segments import SegmentCounts, blame
from vigil.worker.alerts.sentence import say
from vigil.worker.report import build_report
from vigil.worker.report.html import render_html
from vigil.worker.report.text import render_tables
from vigil.worker.store.queries import ANNOTATIONS, render

from tests.quality_seed import SCORE_COLUMNS, insert_scores, score_row

NOW = datetime(2026, 3, 2, 18, 30, tzinfo=UTC)
SHOPBOT = Segment(key="model", value="shopbot-mini", n=37, recent_mean=0.2, baseline_mean=0.7, share=0.78,
                  traffic=0.37)


def event(**fields) -> AlertEvent:
    base = {"alert_id": "a", "rule": "score-regression", "kind": "regression", "action": "fired", "state": "firing",
            "monitor": "answer_relevancy", "fired_at": NOW, "updated_at": NOW, "message": "detector's reason",
            "since": datetime(2026, 3, 2, 17, 54, tzinfo=UTC), "baseline_mean": 0.71, "recent_mean": 0.45,
            "drop": 0.26, "drop_low": 0.18, "drop_high": 0.34, "segments": [SHOPBOT], "agents": ["support-bot"]}
    return AlertEvent(**base | fields)


def test_a_regression_says_what_fell_where_from_what_to_what_since_when_and_which_segment():
    assert say(event()) == ("answer_relevancy on support-bot fell from 0.71 to 0.45 since 17:54 UTC (95%: 0.18 to "
                            "0.34 lower); 78% of the drop is model = shopbot-mini (37% of traffic)")


def test_the_interval_is_clipped_to_the_scale():
    """A mean since the change can be neither below 0 nor above 1: the drop lies within baseline − 1 .. baseline."""
    text = say(event(baseline_mean=0.3, recent_mean=0.05, drop=0.25, drop_low=-0.8, drop_high=1.064))
    assert "(95%: -0.70 to 0.30 lower)" in text


def test_a_backtest_says_its_window_ends_where_the_rule_fired():
    text = say(event(), until=datetime(2026, 3, 2, 18, 10, tzinfo=UTC))
    assert "fell from 0.71 to 0.45 between 17:54 and 18:10 UTC" in text


def test_a_change_on_another_day_carries_its_date():
    assert "since 2026-03-01 23:50 UTC" in say(event(since=datetime(2026, 3, 1, 23, 50, tzinfo=UTC)))


def test_detector_words_stay_out_of_the_sentence():
    text = say(event(message="answer_relevancy: fired: a drop of 0.26 (0.77 sd); recovery test 0.59 of 5.94"))
    assert not any(word in text for word in ("CUSUM", "sd)", "recovery", "threshold"))


def test_a_new_value_and_a_share_over_the_whole_drop_are_said_plainly():
    new = SHOPBOT.model_copy(update={"baseline_mean": None, "share": 1.14, "traffic": 0.96})
    assert say(event(segments=[new])).endswith("; all of the drop is model = shopbot-mini (new, 96% of traffic)")


def test_an_agent_already_named_is_not_repeated_as_the_segment():
    agent = Segment(key="agent", value="support-bot", n=90, recent_mean=0.4, baseline_mean=0.7, share=0.9,
                    traffic=0.9)
    assert say(event(segments=[agent, SHOPBOT])).endswith("78% of the drop is model = shopbot-mini (37% of traffic)")


def test_other_alerts_keep_their_rules_plain_message_and_a_resolution_says_the_scores_are_back():
    paused = event(kind="judge_paused", monitor="", judge="openai-main", agents=[], message="judge openai-main is "
                   "paused (http_401)")
    assert say(paused) == "judge openai-main is paused (http_401)"
    assert say(event(action="resolved", state="resolved")) == ("answer_relevancy on support-bot recovered: its "
                                                               "scores are back at their baseline (0.71)")


def counts(key: str, value: str, recent: tuple[int, float], baseline: tuple[int, float]) -> SegmentCounts:
    return SegmentCounts(key=key, value=value, recent_n=recent[0], recent_sum=recent[1], baseline_n=baseline[0],
                         baseline_sum=baseline[1])


def test_bookkeeping_keys_are_never_segments_and_a_stray_low_score_does_not_name_its_agent():
    """22 support-bot scores fell from 0.24 to 0.10; one code-helper score of 0 (its baseline 0.28) is noise."""
    total = counts("", "", (23, 2.26), (18, 5.25))
    found = blame([counts("agent", "support-bot", (22, 2.26), (8, 1.93)),
                   counts("agent", "code-helper", (1, 0.0), (4, 1.11)),
                   counts("spans", "4", (15, 1.0), (6, 2.2)),
                   counts("operation", "invoke_agent", (22, 2.26), (8, 1.93)),
                   counts("vigil.content", "missing", (10, 0.5), (2, 1.0)),
                   counts("model", "llama", (22, 2.26), (3, 1.0))], total)

    assert found.agents == ["support-bot"]
    assert {s.key for s in found.segments} <= {"agent", "model"}


def test_one_agent_is_named_though_it_is_on_every_score():
    total = counts("", "", (20, 8.0), (100, 80.0))
    assert blame([counts("agent", "support-bot", (20, 8.0), (100, 80.0))], total).agents == ["support-bot"]


def _seed(store) -> None:
    """A day of relevancy at 0.8 on support-bot, then an hour where model m-2 answers at 0.45."""
    rng = np.random.default_rng(11)
    at = SCORE_COLUMNS.index("trace_time")
    seq = 0
    for start, minutes, mean, model in ((NOW - timedelta(days=1), 23 * 60, 0.8, "m-1"),
                                        (NOW - timedelta(hours=1), 60, 0.8, "m-1"),
                                        (NOW - timedelta(hours=1), 60, 0.45, "m-2")):
        n = rng.poisson(2.5 * minutes)
        ts = np.sort(start.timestamp() + rng.random(n) * minutes * 60)
        data = [score_row(at=datetime.fromtimestamp(t, UTC), score=float(np.clip(rng.normal(mean, 0.1), 0, 1)),
                          seq=seq + i, lag_s=2.0) for i, t in enumerate(ts)]
        seq += n
        insert_scores(store, data)
        store.insert("traces", [[r[1], r[3], r[4], "prod", r[at], model, {"spans": "4", "operation": "chat"}]
                                for r in data],
                     column_names=["trace_id", "project", "agent", "environment", "started_at", "model", "metadata"])


def test_the_same_sentence_reaches_the_webhook_the_terminal_the_report_and_grafana(store, webhook_receiver):
    url, bodies = webhook_receiver
    _seed(store)
    config = VigilConfig(judges=[{"name": "baseline", "kind": "baseline"}],
                         monitors=[{"name": "relevancy", "scorer": "answer_relevancy", "judge": "baseline"}],
                         alerts=[AlertRule(name="relevancy", kind="regression", warmup_minutes=60,
                                           baseline_minutes=2880, min_samples=30, webhook_url=url)])

    (fired,) = check_alerts(store, config, now=NOW, notifier=WebhookNotifier())
    sentence = fired.message

    assert sentence.startswith("relevancy on support-bot fell from 0.8") and " since 17:" in sentence
    assert "model = m-2" in sentence and "spans" not in sentence and "operation" not in sentence
    assert bodies == [{"text": f":rotating_light: [vigil] FIRING: {sentence}"}]
    assert fired.text(slack=False) == f"FIRING: {sentence}"
    report = build_report(store, now=NOW)
    assert [a.message for a in report.alerts] == [sentence]
    assert json.loads(report.model_dump_json())["alerts"][0]["message"] == sentence
    console = Console(file=io.StringIO(), width=400)
    console.print(render_tables(report))
    assert sentence in console.file.getvalue()
    assert sentence.replace("'", "&#x27;") in render_html(report)
    sql = render(ANNOTATIONS["alerts_fired"].sql, start=NOW - timedelta(days=1), end=NOW)
    ((start, _, text, tags),) = store.query(sql).result_rows
    assert text == sentence and "support-bot" in tags
    assert abs(start.replace(tzinfo=UTC) - fired.since) < timedelta(seconds=1), "the region starts at the change"
