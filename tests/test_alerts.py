"""The built-in regression detector on seeded score series in chDB: what fires, what stays quiet, renotify, resolve,
the webhook, the OpenTelemetry event, and the plain thresholds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from vigil.schemas import AlertRule, VigilConfig
from vigil.worker.alerts import AlertEvent, WebhookNotifier, check_alerts
from vigil.worker.alerts.decide import decide, regression_verdict
from vigil.worker.alerts.model import AlertState, Subject, WindowStats

from tests.quality_seed import insert_scores, series

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
WEEK = 7 * 24 * 60


class Recorder:
    """A notifier that keeps what it was handed."""

    def __init__(self) -> None:
        self.events: list[AlertEvent] = []

    def __call__(self, event: AlertEvent) -> None:
        self.events.append(event)


def regression(**overrides) -> VigilConfig:
    rule = {"name": "relevancy-drop", "kind": "regression", "method": "window", "window_minutes": 60,
            "baseline_minutes": WEEK,
            "min_samples": 30, "min_effect_size": 0.5, "p_value": 0.01, "renotify_minutes": 60} | overrides
    return VigilConfig(alerts=[AlertRule(**rule)])


def seed_baseline(store, *, mean: float = 0.8, sd: float = 0.1, **kw) -> None:
    """A week of noisy scores, one every 10 minutes, ending where the recent window starts."""
    insert_scores(store, series(start=NOW - timedelta(minutes=WEEK + 60), minutes=WEEK, every_s=600,
                                value=lambda rng, i: rng.gauss(mean, sd), seed=1, **kw))


def seed_recent(store, *, mean: float, sd: float = 0.1, start: datetime = NOW - timedelta(minutes=60),
                minutes: int = 60, every_s: int = 30, seed: int = 2, **kw) -> None:
    insert_scores(store, series(start=start, minutes=minutes, every_s=every_s,
                                value=lambda rng, i: rng.gauss(mean, sd), seed=seed, **kw))


def alert_rows(store) -> list[tuple]:
    return store.query("SELECT rule, monitor, state, recent_n FROM alerts FINAL ORDER BY updated_at").result_rows


def test_an_injected_drop_fires_one_alert_and_records_it(store):
    seed_baseline(store)
    seed_recent(store, mean=0.5)
    recorder = Recorder()

    events = check_alerts(store, regression(), now=NOW, notifier=recorder)

    assert [(e.action, e.state, e.monitor, e.agent) for e in events] == [("fired", "firing", "relevancy",
                                                                          "support-bot")]
    event = events[0]
    assert event.recent_n == 120 and event.baseline_n >= 900
    assert event.recent_mean == pytest.approx(0.5, abs=0.05) and event.baseline_mean == pytest.approx(0.8, abs=0.02)
    assert event.p_value < 1e-6 and event.effect_size > 2
    assert recorder.events == events
    assert alert_rows(store) == [("relevancy-drop", "relevancy", "firing", 120)]


def test_a_stable_noisy_series_does_not_fire(store):
    seed_baseline(store, sd=0.15)
    seed_recent(store, mean=0.79, sd=0.15)

    assert check_alerts(store, regression(), now=NOW, notifier=Recorder()) == []
    assert alert_rows(store) == []


def test_a_small_recent_sample_does_not_fire_however_low(store):
    seed_baseline(store)
    seed_recent(store, mean=0.2, minutes=10, every_s=60)  # 10 turns, min_samples is 30

    assert check_alerts(store, regression(), now=NOW, notifier=Recorder()) == []


def test_a_significant_but_tiny_drop_is_below_the_effect_size_and_does_not_fire(store):
    seed_baseline(store, sd=0.1)
    seed_recent(store, mean=0.77, sd=0.1, every_s=5)  # 720 turns: p is small, d is about 0.3

    assert check_alerts(store, regression(), now=NOW, notifier=Recorder()) == []


def test_a_new_scorer_version_starts_its_own_baseline_instead_of_firing(store):
    seed_baseline(store, version="1")
    seed_recent(store, mean=0.4, version="2")  # the new version grades harder; nothing regressed

    assert check_alerts(store, regression(), now=NOW, notifier=Recorder()) == []


def test_a_firing_alert_is_not_resent_within_the_renotify_interval_and_is_resent_after(store):
    seed_baseline(store)
    seed_recent(store, mean=0.5, minutes=180)  # the drop lasts from NOW - 60 min to NOW + 120 min
    recorder = Recorder()
    config = regression(renotify_minutes=60)

    first = check_alerts(store, config, now=NOW, notifier=recorder)
    quiet = check_alerts(store, config, now=NOW + timedelta(minutes=30), notifier=recorder)
    again = check_alerts(store, config, now=NOW + timedelta(minutes=61), notifier=recorder)

    assert [e.action for e in first] == ["fired"]
    assert quiet == []
    assert [e.action for e in again] == ["renotified"]
    assert again[0].alert_id == first[0].alert_id and again[0].fired_at == first[0].fired_at
    assert [e.action for e in recorder.events] == ["fired", "renotified"]


def test_recovery_resolves_the_alert(store):
    seed_baseline(store)
    seed_recent(store, mean=0.5)
    seed_recent(store, mean=0.8, start=NOW, seed=3)  # the next hour is back to normal
    config = regression()

    fired = check_alerts(store, config, now=NOW, notifier=Recorder())
    resolved = check_alerts(store, config, now=NOW + timedelta(minutes=60), notifier=Recorder())

    assert [e.action for e in fired] == ["fired"]
    assert [(e.action, e.state, e.alert_id) for e in resolved] == [("resolved", "resolved", fired[0].alert_id)]
    assert [row[2] for row in alert_rows(store)] == ["resolved"]
    assert check_alerts(store, config, now=NOW + timedelta(minutes=61), notifier=Recorder()) == []


def test_too_little_data_keeps_a_firing_alert_firing():
    """Given a firing alert, when the window has too few turns to tell, then nothing is sent or resolved."""
    rule = AlertRule(name="r", kind="regression", method="window", min_samples=30)
    subject = Subject(project="shop", agent="bot", monitor="relevancy")
    verdict = regression_verdict(rule, subject, WindowStats(n=3, mean=0.9, variance=0.01),
                                 WindowStats(n=500, mean=0.8, variance=0.01))
    firing = AlertState(alert_id="a", state="firing", fired_at=NOW, updated_at=NOW)

    assert verdict.breach is None
    assert decide(rule, verdict, firing, NOW + timedelta(days=1)) is None


def test_the_webhook_receives_slack_compatible_json(store, webhook_receiver):
    url, bodies = webhook_receiver
    seed_baseline(store)
    seed_recent(store, mean=0.5)

    check_alerts(store, regression(webhook_url=url), now=NOW, notifier=WebhookNotifier())

    assert len(bodies) == 1
    assert list(bodies[0]) == ["text"]
    text = bodies[0]["text"]
    assert text.startswith(":rotating_light: [vigil] FIRING: relevancy on shop/support-bot fell from 0.80 to 0.")
    assert text.endswith(": the last 60 min against the 7 d before (120 and 1008 turns)")


def test_an_unreachable_webhook_is_logged_and_the_alert_is_still_recorded(store):
    seed_baseline(store)
    seed_recent(store, mean=0.5)

    events = check_alerts(store, regression(webhook_url="http://127.0.0.1:9/nothing-listens"), now=NOW,
                          notifier=WebhookNotifier(timeout_s=2))

    assert [e.action for e in events] == ["fired"]
    assert [row[2] for row in alert_rows(store)] == ["firing"]


def test_each_alert_event_is_an_opentelemetry_span_event(store):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seed_baseline(store)
    seed_recent(store, mean=0.5)

    check_alerts(store, regression(), now=NOW, notifier=Recorder(), tracer=provider.get_tracer("test"))

    (span,) = exporter.get_finished_spans()
    assert span.name == "vigil.alert"
    assert [e.name for e in span.events] == ["vigil.alert.fired"]
    assert span.events[0].attributes["vigil.alert.monitor"] == "relevancy"


def test_a_mean_below_a_plain_threshold_fires(store):
    seed_recent(store, mean=0.4)
    config = VigilConfig(alerts=[AlertRule(name="floor", kind="threshold", threshold=0.6, min_samples=30)])

    events = check_alerts(store, config, now=NOW, notifier=Recorder())

    assert [(e.kind, e.action) for e in events] == [("threshold", "fired")]
    assert "below 0.6" in events[0].message


def test_a_failure_rate_above_its_limit_fires(store):
    rows = series(start=NOW - timedelta(minutes=30), minutes=30, every_s=30, value=lambda rng, i: 0.8)
    for index, row in enumerate(rows):
        if index % 3 == 0:  # a third of the turns failed
            row[9], row[10] = "failed", None
    insert_scores(store, rows)
    config = VigilConfig(alerts=[AlertRule(name="errors", kind="failure_rate", threshold=0.2, min_samples=20)])

    (event,) = check_alerts(store, config, now=NOW, notifier=Recorder())

    assert event.recent_mean == pytest.approx(1 / 3)
    assert "20 of 60 failed" in event.message


def _events(store, rows) -> None:
    store.insert("pipeline_events", rows, column_names=["event_time", "project", "agent", "monitor", "stage",
                                                        "trace_id"])


def test_coverage_below_its_limit_fires_and_recovers(store):
    at = NOW - timedelta(minutes=10)
    _events(store, [[at, "shop", "bot", "relevancy", "sampled", f"t{i}"] for i in range(100)]
            + [[at, "shop", "bot", "relevancy", "scored", f"t{i}"] for i in range(40)])
    config = VigilConfig(alerts=[AlertRule(name="coverage", kind="coverage", threshold=0.9, min_samples=20)])

    (fired,) = check_alerts(store, config, now=NOW, notifier=Recorder())
    _events(store, [[NOW + timedelta(minutes=5), "shop", "bot", "relevancy", "scored", f"t{i}"]
                    for i in range(40, 100)])
    (resolved,) = check_alerts(store, config, now=NOW + timedelta(minutes=10), notifier=Recorder())

    assert fired.action == "fired" and fired.recent_mean == pytest.approx(0.4)
    assert resolved.action == "resolved"


def _runs(store, *, agent: str, at: datetime, received: int, failed: int, first: int = 0,
          project: str = "default") -> None:
    """``received`` runs of ``agent`` (turns received, monitor ''), the first ``failed`` of them failed runs."""
    ids = [f"{agent}-{i}" for i in range(first, first + received)]
    _events(store, [[at, project, agent, "", "received", t] for t in ids]
            + [[at, project, agent, "", "failed_run", t] for t in ids[:failed]])


def test_failed_runs_above_the_limit_fire_per_agent_in_plain_words_and_resolve_when_the_share_drops(store):
    at = NOW - timedelta(minutes=10)
    _runs(store, agent="support-bot", at=at, received=75, failed=9)  # 12%: above
    _runs(store, agent="billing-bot", at=at, received=50, failed=2)  # 4%: under
    _runs(store, agent="new-bot", at=at, received=10, failed=5)  # 50%, but 10 runs: too few to tell
    config = VigilConfig(alerts=[AlertRule(name="failed-runs", kind="failed_runs", threshold=0.05, min_samples=20)])

    (fired,) = check_alerts(store, config, now=NOW, notifier=Recorder())
    _runs(store, agent="support-bot", at=NOW + timedelta(minutes=5), received=200, failed=0, first=75)
    (resolved,) = check_alerts(store, config, now=NOW + timedelta(minutes=10), notifier=Recorder())

    assert (fired.kind, fired.action, fired.agent, fired.monitor) == ("failed_runs", "fired", "support-bot", "")
    assert fired.message == "support-bot: 12% of its runs failed in the last 60 min (9 of 75), above 5%"
    assert (fired.recent_mean, fired.recent_n) == (pytest.approx(0.12), 75)
    assert (resolved.agent, resolved.action) == ("support-bot", "resolved")
    assert resolved.message == "support-bot: 3% of its runs failed in the last 60 min (9 of 275), at or under 5%"


def test_failed_runs_of_another_project_name_the_project(store):
    _runs(store, agent="bot", project="shop", at=NOW - timedelta(minutes=5), received=20, failed=10)
    config = VigilConfig(alerts=[AlertRule(name="failed-runs", kind="failed_runs", min_samples=20)])

    (fired,) = check_alerts(store, config, now=NOW, notifier=Recorder())

    assert fired.message == "shop/bot: 50% of its runs failed in the last 60 min (10 of 20), above 5%"


def _call(store, *, judge: str, status: str, at: datetime) -> None:
    store.insert("judge_calls", [[f"{judge}-{status}-{at.isoformat()}", judge, status, at]],
                 column_names=["call_id", "judge", "status", "called_at"])


def test_a_judge_refused_with_401_is_reported_paused_until_it_answers_again(store):
    _call(store, judge="openai-main", status="ok", at=NOW - timedelta(minutes=20))
    _call(store, judge="openai-main", status="http_401", at=NOW - timedelta(minutes=5))
    config = VigilConfig(alerts=[AlertRule(name="judge-paused", kind="judge_paused", window_minutes=60)])

    (fired,) = check_alerts(store, config, now=NOW, notifier=Recorder())
    _call(store, judge="openai-main", status="ok", at=NOW + timedelta(minutes=1))
    (resolved,) = check_alerts(store, config, now=NOW + timedelta(minutes=2), notifier=Recorder())

    assert (fired.judge, fired.action) == ("openai-main", "fired")
    assert "paused (http_401)" in fired.message
    assert (resolved.judge, resolved.action) == ("openai-main", "resolved")


def test_the_pause_state_from_the_caller_overrides_the_call_statuses(store):
    config = VigilConfig(alerts=[AlertRule(name="judge-paused", kind="judge_paused")])

    (event,) = check_alerts(store, config, now=NOW, notifier=Recorder(),
                            paused_judges=lambda: {"openai-main": "402 payment required"})

    assert event.judge == "openai-main" and "402 payment required" in event.message


def test_a_terminal_gets_the_alert_in_plain_words_and_the_webhook_gets_slack_markup():
    event = AlertEvent(alert_id="a", rule="relevancy-drop", kind="regression", action="fired", state="firing",
                       monitor="relevancy", fired_at=NOW, updated_at=NOW, message="relevancy: mean 0.50")

    assert event.text(slack=False) == "FIRING: relevancy: mean 0.50"
    assert event.text() == ":rotating_light: [vigil] FIRING: relevancy: mean 0.50"
