"""``check_alerts``: read the windows from ClickHouse, measure every rule, decide, then record and notify.

The reading and writing live here (the sequential detector's in ``watch``); the measuring and deciding are the pure
functions in ``decide`` and ``sequential``. ``evaluate`` returns every verdict with its reason, sent or not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client
from opentelemetry import trace
from vigil.schemas import AlertRule, VigilConfig
from vigil.worker.alerts import anchors
from vigil.worker.alerts.decide import (
    agreement_verdict,
    coverage_verdict,
    decide,
    failed_runs_verdict,
    failure_rate_verdict,
    judge_paused_verdict,
    regression_verdict,
    threshold_verdict,
)
from vigil.worker.alerts.model import (
    ALERT_COLUMNS,
    AlertEvent,
    AlertState,
    Subject,
    Verdict,
    WindowStats,
)
from vigil.worker.alerts.notify import Notifier, WebhookNotifier, emit_event, log_event
from vigil.worker.alerts.watch import segments, watch
from vigil.worker.report.build import run_query
from vigil.worker.store.queries import DETECTOR_QUERIES, bind

__all__ = ["DEFAULT_RULES", "Outcome", "check_alerts", "evaluate", "record"]

# What ``vigil alerts check`` watches when no config names any rules.
DEFAULT_RULES = [
    AlertRule(name="score-regression", kind="regression"),  # sequential, one false alarm a month per monitor
    AlertRule(name="failure-rate", kind="failure_rate", window_minutes=15, min_samples=20),
    AlertRule(name="coverage-drop", kind="coverage", window_minutes=60, min_samples=20),
    AlertRule(name="judge-paused", kind="judge_paused", window_minutes=60),
    AlertRule(name="judge-agreement", kind="agreement", window_minutes=24 * 60),  # against its own baseline
]

PausedJudges = Callable[[], Mapping[str, str]]  # judge name -> why it is paused


class _Reader:
    """Runs the detector queries anchored at ``now``, each (query, windows) once per check."""

    def __init__(self, client: Client, now: datetime) -> None:
        self.client, self.now = client, now
        self._cache: dict[tuple[str, int, int], list[dict[str, Any]]] = {}

    def rows(self, name: str, rule: AlertRule) -> list[dict[str, Any]]:
        key = (name, rule.window_minutes, rule.baseline_minutes)
        if key not in self._cache:
            template = DETECTOR_QUERIES[name]
            query = replace(template, sql=bind(template.sql, window_minutes=rule.window_minutes,
                                               baseline_minutes=rule.baseline_minutes, min_samples=rule.min_samples))
            self._cache[key] = run_query(self.client, query, start=self.now, end=self.now)
        return self._cache[key]


def _score_windows(reader: _Reader, rule: AlertRule) -> dict[Subject, dict[str, dict[str, dict[str, Any]]]]:
    """subject -> scorer_version -> period ('recent' | 'baseline') -> row."""
    grouped: dict[Subject, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for row in reader.rows("windows", rule):
        if rule.monitor is None or row["monitor"] == rule.monitor:
            subject = Subject(project=row["project"], agent=row["agent"], monitor=row["monitor"])
            grouped[subject][row["scorer_version"]][row["period"]] = row
    return grouped


def _stats(row: dict[str, Any] | None) -> WindowStats:
    if row is None:
        return WindowStats()
    return WindowStats(n=row["n"], mean=row["mean"], variance=row["variance"])


def _verdicts(reader: _Reader, rule: AlertRule, paused_judges: PausedJudges | None) -> list[Verdict]:
    if rule.kind == "judge_paused":
        return _judge_verdicts(reader, rule, paused_judges)
    if rule.kind == "agreement":
        return _agreement_verdicts(reader, rule)
    if rule.kind == "coverage":
        return [coverage_verdict(rule, Subject(project=r["project"], agent=r["agent"], monitor=r["monitor"]),
                                 scored=r["scored"], sampled=r["sampled"], not_applicable=r["not_applicable"])
                for r in reader.rows("coverage", rule) if rule.monitor is None or r["monitor"] == rule.monitor]
    if rule.kind == "failed_runs":
        return [failed_runs_verdict(rule, Subject(project=r["project"], agent=r["agent"]), failed=r["failed_runs"],
                                    received=r["received"])
                for r in reader.rows("failed_runs", rule)]
    verdicts = []
    for subject, versions in sorted(_score_windows(reader, rule).items(), key=lambda kv: kv[0].model_dump_json()):
        recent = {version: periods["recent"] for version, periods in versions.items() if "recent" in periods}
        if rule.kind == "regression":
            # A new scorer version starts its own baseline: compare the version most of the recent turns used.
            version = max(recent, key=lambda v: (recent[v]["n"], v)) if recent else None
            periods = versions.get(version, {}) if version else {}
            verdicts.append(regression_verdict(rule, subject, _stats(periods.get("recent")),
                                               _stats(periods.get("baseline"))))
        elif rule.kind == "threshold":
            verdicts.append(threshold_verdict(rule, subject, WindowStats.combine([_stats(r) for r in recent.values()])))
        else:
            verdicts.append(failure_rate_verdict(rule, subject, failed=sum(r["failed"] for r in recent.values()),
                                                 total=sum(r["turns"] for r in recent.values())))
    return verdicts


def _agreement_verdicts(reader: _Reader, rule: AlertRule) -> list[Verdict]:
    windows: dict[Subject, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in reader.rows("agreement_windows", rule):
        if rule.monitor is None or row["monitor"] == rule.monitor:
            windows[Subject(project=row["project"], agent=row["agent"], monitor=row["monitor"])][row["period"]] = row
    return [agreement_verdict(rule, subject, _stats(periods.get("recent")), _stats(periods.get("baseline")))
            for subject, periods in sorted(windows.items(), key=lambda kv: kv[0].model_dump_json())]


def _judge_verdicts(reader: _Reader, rule: AlertRule, paused_judges: PausedJudges | None) -> list[Verdict]:
    """From the pause state when the caller can read it (Redis), else from the judges' latest call statuses."""
    if paused_judges is not None:
        paused = paused_judges()
        seen = {r["judge"] for r in reader.rows("judge_status", rule)} | set(paused)
        return [judge_paused_verdict(Subject(judge=j), paused=j in paused, reason=paused.get(j, ""))
                for j in sorted(seen)]
    return [judge_paused_verdict(Subject(judge=r["judge"]), paused=bool(r["paused"]), reason=r["last_status"])
            for r in reader.rows("judge_status", rule)]


def _states(reader: _Reader) -> dict[tuple[str, Subject], AlertState]:
    rows = run_query(reader.client, DETECTOR_QUERIES["alert_states"], start=reader.now, end=reader.now)
    return {
        (r["rule"], Subject(project=r["project"], agent=r["agent"], monitor=r["monitor"], judge=r["judge"])):
            AlertState(alert_id=r["alert_id"], state=r["state"], fired_at=r["fired_at"], updated_at=r["last_updated"])
        for r in rows
    }


@dataclass(frozen=True)
class Outcome:
    """One rule measured on one subject, and what was decided: ``event`` None when nothing is sent (and
    ``verdict.message`` says why: what was measured, too little data, still within the rule)."""

    rule: AlertRule
    verdict: Verdict
    event: AlertEvent | None


def evaluate(
    client: Client,
    config: VigilConfig,
    *,
    now: datetime | None = None,
    paused_judges: PausedJudges | None = None,
) -> list[Outcome]:
    """Measure every rule of ``config`` on every subject and decide, recording only the sequential detector's own
    check rows (``detector_checks``); ``check_alerts`` records and sends the events."""
    now = now or datetime.now(UTC)
    reader = _Reader(client, now)
    previous = _states(reader)
    outcomes = []
    for rule in config.alerts:
        if rule.kind == "regression" and rule.method == "sequential":
            watched = {w.subject: w for w in watch(client, rule, now)}
            verdicts = [w.verdict for w in watched.values()]
        else:
            watched, verdicts = {}, _verdicts(reader, rule, paused_judges)
        for verdict in verdicts:
            event = decide(rule, verdict, previous.get((rule.name, verdict.subject)), now)
            if event is not None and event.action != "resolved" and verdict.subject in watched and verdict.since:
                event = event.blamed(segments(client, verdict.subject.monitor, watched[verdict.subject].version,
                                              verdict.since, now))
            if event is not None and event.action != "resolved" and rule.kind == "regression" and event.monitor:
                since = verdict.since or now - timedelta(minutes=rule.window_minutes)
                event = event.attributed(anchors.attribute(client, event.monitor, since, now))
            outcomes.append(Outcome(rule=rule, verdict=verdict, event=event))
    return outcomes


def check_alerts(
    client: Client,
    config: VigilConfig,
    *,
    now: datetime | None = None,
    notifier: Notifier | None = None,
    paused_judges: PausedJudges | None = None,
    tracer: trace.Tracer | None = None,
) -> list[AlertEvent]:
    """Run every alert rule of ``config`` once. Each event is written to ``alerts``, logged, emitted as an
    OpenTelemetry span event and handed to ``notifier`` (default: the Slack-compatible webhook). Returns the events:
    new firings, reminders past ``renotify_minutes``, and resolutions."""
    events = [o.event for o in evaluate(client, config, now=now, paused_judges=paused_judges) if o.event]
    record(client, events, notifier=notifier, tracer=tracer)
    return events


def record(client: Client, events: list[AlertEvent], *, notifier: Notifier | None = None,
           tracer: trace.Tracer | None = None) -> None:
    """Write ``events`` to ``alerts``, log each, emit it as an OpenTelemetry span event and hand it to
    ``notifier`` (default: the Slack-compatible webhook)."""
    notifier = notifier or WebhookNotifier()
    if events:
        client.insert("alerts", [e.row() for e in events], column_names=list(ALERT_COLUMNS))
    for event in events:
        log_event(event)
        emit_event(event, tracer)
        notifier(event)
