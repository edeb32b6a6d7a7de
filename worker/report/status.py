"""The report's first lines: what is firing, which monitors are fine or still waiting, how the judges are doing, and
how much of the sampled traffic got a verdict. A pure function of the report's rows and the detector's latest check
per monitor; the HTML strip, the terminal report and ``--json`` all read it.

The rules:
- An alert is firing when the latest row of its (rule, subject) says so; newest change first.
- A monitor is *fine* when it has verdicts in the range and no firing alert; *waiting* when it has none yet, or when
  the regression detector is still learning its baseline (with the detector's own words: how much more it needs).
- Judge health: the paused judges, the error rate over all judge calls, the spend, and each monitor's (a budget is
  kept per monitor: ``vigil judge status`` has today's against it).
- Coverage: turns with a verdict (scored or abstained) over turns sampled, every monitor together.
- A monitor whose scores came from the offline baseline heuristic is named, so its numbers are read as a
  heuristic's, not an LLM judge's.
"""

from __future__ import annotations

from collections.abc import Sequence

from vigil.worker.report.model import AlertRow, DetectorMode, Report, Status

__all__ = ["latest_alerts", "status"]


def latest_alerts(alerts: Sequence[AlertRow]) -> list[AlertRow]:
    """The latest row of each (rule, subject)."""
    latest: dict[tuple[str, str, str, str], AlertRow] = {}
    for alert in sorted(alerts, key=lambda a: a.updated_at):
        latest[(alert.rule, alert.monitor, alert.agent, alert.judge)] = alert
    return list(latest.values())


def _spend_by_monitor(report: Report) -> dict[str, float]:
    """Each monitor's judge spend over the range, costliest first; monitors that spent nothing left out."""
    by: dict[str, float] = {}
    for row in report.spend:
        by[row.monitor] = by.get(row.monitor, 0.0) + row.cost_usd
    return {m: usd for m, usd in sorted(by.items(), key=lambda kv: -kv[1]) if usd > 0}


def status(report: Report, detector: Sequence[DetectorMode]) -> Status:
    firing = sorted((a for a in latest_alerts(report.alerts) if a.state == "firing"),
                    key=lambda a: a.since or a.fired_at, reverse=True)
    alarmed = {a.monitor for a in firing if a.monitor}
    judged = {m.monitor for m in report.monitors if m.scored or m.abstained}
    modes = {d.monitor: d for d in detector}
    waiting = {m: "no scores yet" for m in report.monitor_names() if m not in judged}
    for monitor in sorted(judged - alarmed):
        mode = modes.get(monitor)
        if mode is not None and mode.mode == "warmup":
            waiting[monitor] = mode.reason
    calls = sum(j.calls for j in report.judges)
    sampled = sum(f.sampled for f in report.funnel)
    verdicts = sum(f.scored + f.abstained for f in report.funnel)
    return Status(
        firing=firing, fine=sorted(judged - alarmed - set(waiting)), waiting=dict(sorted(waiting.items())),
        paused_judges=sorted({p.judge for p in report.paused_judges}), judge_calls=calls,
        judge_error_rate=sum(j.errors for j in report.judges) / calls if calls else None,
        spend_usd=sum(j.cost_usd for j in report.judges), spend_by_monitor=_spend_by_monitor(report),
        sampled=sampled, verdicts=verdicts,
        coverage=verdicts / sampled if sampled else None,
        heuristic=sorted({m.monitor for m in report.monitors if m.heuristic}),
    )
