"""``vigil alerts check --explain``: every rule, every monitor it watches, its verdict and why, as plain lines.

A pure function of what ``check.evaluate`` decided and the config: the reasons are the verdicts' own messages (what
was measured, how much more history or how many more turns a rule needs before it can tell, whether the value is
within the rule). A monitor a rule watches that had nothing to measure gets a line of its own, so "why didn't my
alert fire?" is answered for every monitor, not only for those with scores.
"""

from __future__ import annotations

from collections.abc import Sequence

from vigil.schemas import AlertRule, VigilConfig
from vigil.worker.alerts.check import Outcome
from vigil.worker.alerts.decide import DEFAULT_LIMITS

__all__ = ["explain", "rule_summary"]

_STATE = {True: "BREACH", False: "ok", None: "cannot tell"}


def rule_summary(rule: AlertRule) -> str:
    """What the rule watches, in one phrase."""
    scope = f"monitor {rule.monitor}" if rule.monitor else "every monitor"
    if rule.kind == "failed_runs":
        scope = "every agent"
    if rule.kind == "regression" and rule.method == "sequential":
        what = (f"a drop against each monitor's own baseline, at most {rule.false_alarms_per_month:g} false alarm(s) "
                f"a month, after {rule.warmup_minutes / 60:g} h of history")
    elif rule.kind == "regression":
        what = (f"the last {rule.window_minutes} min against the {rule.baseline_minutes} min before (Welch, "
                f"p < {rule.p_value:g}, d ≥ {rule.min_effect_size:g}, n ≥ {rule.min_samples})")
    elif rule.kind == "judge_paused":
        return "judge_paused: any judge paused"
    elif rule.kind == "agreement" and rule.threshold is None:
        what = f"judge-human agreement significantly below its own baseline over {rule.window_minutes} min"
    else:
        limit = rule.threshold if rule.threshold is not None else DEFAULT_LIMITS[rule.kind]
        what = (f"{'above' if rule.kind in ('failure_rate', 'failed_runs') else 'below'} {limit:g} over "
                f"{rule.window_minutes} min")
    return f"{rule.kind}: {what}; {scope}"


def explain(outcomes: Sequence[Outcome], config: VigilConfig) -> list[str]:
    """One header line per rule, then one line per subject it measured and per watched monitor it could not."""
    lines = []
    for rule in config.alerts:
        mine = [o for o in outcomes if o.rule.name == rule.name]
        lines.append(f"{rule.name} ({rule_summary(rule)})")
        for outcome in mine:
            sent = f", {outcome.event.action}" if outcome.event else ""
            lines.append(f"  {_STATE[outcome.verdict.breach]}{sent}: {outcome.verdict.message}")
        if rule.kind == "judge_paused":
            judged = {o.verdict.subject.judge for o in mine}
            lines += [f"  cannot tell: judge {j.name}: no calls in the window and no pause known"
                      for j in config.judges if j.kind == "openai" and j.name not in judged]
            continue
        if rule.kind == "failed_runs":  # per agent: no monitor to list
            if not mine:
                lines.append(f"  cannot tell: no runs received{_span(rule)}")
            continue
        measured = {o.verdict.subject.monitor for o in mine}
        watched = [m.name for m in config.monitors if rule.monitor in (None, m.name)]
        lines += [f"  cannot tell: {name}: no scores{_span(rule)}: nothing to measure" for name in watched
                  if name not in measured]
        if not mine and not watched:
            lines.append("  cannot tell: no monitor configured and no scores in the store")
    return lines


def _span(rule: AlertRule) -> str:
    if rule.kind == "regression" and rule.method == "sequential":
        return " yet"
    return f" in the last {rule.window_minutes} min"
