"""Pure decisions, no I/O: measure a rule on one subject (a ``Verdict``), then decide whether to notify.

A regression (``method: sequential``, the default) is the sequential detector's decision (``sequential``), turned
into a verdict here. With ``method: window`` it is the recent window against a baseline window: Welch's t-test (one-sided, recent lower) from the
windows' counts, means and variances, firing only with at least ``min_samples`` turns on each side, a p-value under
``p_value`` and an effect size (Cohen's d) of at least ``min_effect_size``. Too few turns is "cannot tell": an alert
then keeps its state rather than flapping.

Agreement (judge vs human feedback) is measured on pairs of a scored turn and a piece of feedback on it, each pair
1 (judge and human on the same side of the monitor's pass line, ``schemas.pass_line``) or 0: the window's mean is the agreement, and its drop against the
baseline goes through the same Welch test, minimum n and effect size as a score regression.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta

from vigil.schemas import AlertRule
from vigil.worker.alerts.model import (
    AlertEvent,
    AlertState,
    Subject,
    Verdict,
    WindowStats,
)
from vigil.worker.alerts.sentence import say
from vigil.worker.alerts.sequential import Decision
from vigil.worker.eval.stats import wilson

__all__ = [
    "DEFAULT_LIMITS", "agreement_verdict", "coverage_verdict", "decide", "failed_runs_verdict", "failure_rate_verdict",
    "judge_paused_verdict", "regression_verdict", "sequential_verdict", "threshold_verdict",
]

# Limits for rules that leave ``threshold`` unset.
DEFAULT_LIMITS = {"failure_rate": 0.2, "failed_runs": 0.05, "coverage": 0.9}


def _limit(rule: AlertRule) -> float:
    return rule.threshold if rule.threshold is not None else DEFAULT_LIMITS[rule.kind]


def _welch(recent: WindowStats, baseline: WindowStats) -> tuple[float, float]:
    """(one-sided p-value that recent < baseline, Cohen's d of the drop)."""
    assert recent.mean is not None and baseline.mean is not None
    var_r, var_b = recent.variance or 0.0, baseline.variance or 0.0
    drop = baseline.mean - recent.mean
    pooled = math.sqrt((var_r + var_b) / 2)
    if pooled == 0:  # constant scores on both sides: any drop is certain and unbounded
        return (0.0, math.inf) if drop > 0 else (1.0, 0.0)
    # imported here: scipy.stats costs ~0.8 s of CPU, which only a process that compares windows pays
    from scipy import stats

    result = stats.ttest_ind_from_stats(
        recent.mean, math.sqrt(var_r), recent.n, baseline.mean, math.sqrt(var_b), baseline.n,
        equal_var=False, alternative="less",
    )
    return float(result.pvalue), drop / pooled


def sequential_verdict(subject: Subject, decision: Decision) -> Verdict:
    """The sequential detector's decision on one monitor as a verdict: breach while it is firing, None while it
    learns its baseline or has no recent scores; the message is the decision's reason."""
    since = datetime.fromtimestamp(decision.since, UTC) if decision.since is not None else None
    return Verdict(subject=subject, breach=decision.breach, value=decision.recent_mean,
                   baseline=decision.baseline_mean, recent_n=decision.recent_n, baseline_n=round(decision.baseline_n),
                   message=f"{subject.describe()}: {decision.reason}", since=since, drop=decision.drop,
                   drop_low=decision.drop_low, drop_high=decision.drop_high)


def regression_verdict(rule: AlertRule, subject: Subject, recent: WindowStats, baseline: WindowStats) -> Verdict:
    where = f"{subject.describe()}: mean {_f(recent.mean)} over the last {rule.window_minutes} min"
    common = {"subject": subject, "value": recent.mean, "baseline": baseline.mean, "recent_n": recent.n,
              "baseline_n": baseline.n}
    if min(recent.n, baseline.n) < rule.min_samples or recent.mean is None or baseline.mean is None:
        return Verdict(breach=None, message=f"{where}: too few turns to compare (n={recent.n} recent, "
                                            f"{baseline.n} baseline; need {rule.min_samples} on each side: "
                                            f"{_more(recent.n, rule)} recent and {_more(baseline.n, rule)} baseline "
                                            "more)", **common)
    p_value, effect = _welch(recent, baseline)
    breach = p_value < rule.p_value and effect >= rule.min_effect_size
    return Verdict(
        breach=breach, p_value=p_value, effect_size=effect,
        message=(f"{where} vs {_f(baseline.mean)} baseline (n={recent.n} vs {baseline.n}, d={effect:.2f}, "
                 f"p={p_value:.2g})"),
        headline=(f"{subject.describe()} fell from {_f(baseline.mean)} to {_f(recent.mean)}: the last "
                  f"{_minutes(rule.window_minutes)} against the {_minutes(rule.baseline_minutes)} before "
                  f"({recent.n} and {baseline.n} turns)"),
        **common,
    )


def agreement_verdict(rule: AlertRule, subject: Subject, recent: WindowStats, baseline: WindowStats) -> Verdict:
    """Breach when the recent agreement is under ``threshold`` (if set), or significantly under the baseline's
    (Welch one-sided p under ``p_value`` and Cohen's d at least ``min_effect_size``, each side with at least
    ``min_samples`` pairs). Fewer recent pairs than ``min_samples``, or nothing to compare with: cannot tell."""
    common = {"subject": subject, "value": recent.mean, "baseline": baseline.mean, "recent_n": recent.n,
              "baseline_n": baseline.n}
    where = f"{subject.describe()}: judge-human agreement {_p(recent.mean)}"
    if recent.n < rule.min_samples or recent.mean is None:
        return Verdict(breach=None, message=f"{where} over the last {rule.window_minutes} min: too few "
                       f"score-feedback pairs (n={recent.n}, need {rule.min_samples}: {_more(recent.n, rule)} more)", **common)
    interval = wilson(round(recent.mean * recent.n), recent.n)
    low, high = interval.low, interval.high
    where += f" (95% {_p(low)}–{_p(high)}, n={recent.n}) over the last {rule.window_minutes} min"
    below = rule.threshold is not None and recent.mean < rule.threshold
    compared = baseline.n >= rule.min_samples and baseline.mean is not None
    if not compared and rule.threshold is None:
        return Verdict(breach=None, message=f"{where}: too few baseline pairs to compare (n={baseline.n}, need "
                                            f"{rule.min_samples}: {_more(baseline.n, rule)} more)", **common)
    p_value = effect = None
    dropped = False
    if compared:
        p_value, effect = _welch(recent, baseline)
        dropped = p_value < rule.p_value and effect >= rule.min_effect_size
    reasons = []
    if rule.threshold is not None:
        reasons.append(f"{'below' if below else 'at or above'} {_p(rule.threshold)}")
    if compared:
        assert p_value is not None and effect is not None
        reasons.append(f"{'significantly below' if dropped else 'vs'} baseline {_p(baseline.mean)} "
                       f"(n={baseline.n}, d={effect:.2f}, p={p_value:.2g})")
    return Verdict(breach=below or dropped, p_value=p_value, effect_size=effect,
                   message=f"{where} is {'; '.join(reasons)}", **common)


def threshold_verdict(rule: AlertRule, subject: Subject, recent: WindowStats) -> Verdict:
    limit = rule.threshold
    assert limit is not None  # AlertRule requires it for kind 'threshold'
    where = f"{subject.describe()}: mean {_f(recent.mean)} over the last {rule.window_minutes} min"
    if recent.n < rule.min_samples or recent.mean is None:
        return Verdict(subject=subject, breach=None, value=recent.mean, recent_n=recent.n,
                       message=f"{where}: too few turns (n={recent.n}, need {rule.min_samples}: "
                               f"{_more(recent.n, rule)} more)")
    breach = recent.mean < limit
    return Verdict(subject=subject, breach=breach, value=recent.mean, recent_n=recent.n,
                   message=f"{where} is {'below' if breach else 'at or above'} {limit:g} (n={recent.n})")


def failure_rate_verdict(rule: AlertRule, subject: Subject, *, failed: int, total: int) -> Verdict:
    limit = _limit(rule)
    rate = failed / total if total else None
    where = f"{subject.describe()}: failure rate {_p(rate)} over the last {rule.window_minutes} min"
    if total < rule.min_samples or rate is None:
        return Verdict(subject=subject, breach=None, value=rate, recent_n=total,
                       message=f"{where}: too few turns (n={total}, need {rule.min_samples}: {_more(total, rule)} more)")
    breach = rate > limit
    return Verdict(subject=subject, breach=breach, value=rate, recent_n=total,
                   message=f"{where} is {'above' if breach else 'within'} {_p(limit)} ({failed} of {total} failed)")


def failed_runs_verdict(rule: AlertRule, subject: Subject, *, failed: int, received: int) -> Verdict:
    """An agent's runs that ended in error without an answer over all its runs received in the window: a breach
    above ``threshold``; fewer than ``min_samples`` runs cannot tell."""
    limit = _limit(rule)
    rate = failed / received if received else None
    if received < rule.min_samples or rate is None:
        return Verdict(subject=subject, breach=None, value=rate, recent_n=received,
                       message=f"{subject.describe()}: {received} runs in the last {rule.window_minutes} min: too few "
                               f"to tell (need {rule.min_samples}: {_more(received, rule)} more)")
    breach = rate > limit
    return Verdict(subject=subject, breach=breach, value=rate, recent_n=received,
                   message=(f"{subject.describe()}: {_p(rate)} of its runs failed in the last {rule.window_minutes} "
                            f"min ({failed} of {received}), {'above' if breach else 'at or under'} {_p(limit)}"))


def coverage_verdict(rule: AlertRule, subject: Subject, *, scored: int, sampled: int,
                     not_applicable: int = 0) -> Verdict:
    """Scored over the sampled turns a verdict was due for: a turn the scorer does not apply to is not missing."""
    limit = _limit(rule)
    due = sampled - not_applicable
    coverage = scored / due if due > 0 else None
    where = f"{subject.describe()}: coverage {_p(coverage)} over the last {rule.window_minutes} min"
    if due < rule.min_samples or coverage is None:
        return Verdict(subject=subject, breach=None, value=coverage, recent_n=due,
                       message=f"{where}: too few sampled turns (n={due}, need {rule.min_samples}: "
                               f"{_more(due, rule)} more)")
    breach = coverage < limit
    of = f"{sampled} sampled" if not not_applicable else f"{due} sampled it applies to ({not_applicable} not)"
    return Verdict(subject=subject, breach=breach, value=coverage, recent_n=due,
                   message=(f"{where} is {'below' if breach else 'at or above'} {_p(limit)} "
                            f"({scored} scored of {of})"))


def judge_paused_verdict(subject: Subject, *, paused: bool | None, reason: str = "") -> Verdict:
    """``paused`` None: the judge made no calls in the window and no pause state is known."""
    if paused is None:
        return Verdict(subject=subject, breach=None, message=f"{subject.describe()}: no calls in the window")
    state = f"is paused ({reason})" if paused else "is answering again"
    return Verdict(subject=subject, breach=paused, value=float(paused), message=f"{subject.describe()} {state}")


def _alert_id(rule: AlertRule, subject: Subject, fired_at: datetime) -> str:
    key = "\x1f".join([rule.name, subject.project, subject.agent, subject.monitor, subject.judge,
                       fired_at.isoformat()])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def decide(rule: AlertRule, verdict: Verdict, previous: AlertState | None, now: datetime) -> AlertEvent | None:
    """Fire on a new breach, remind after ``renotify_minutes`` while it lasts, resolve when the window recovers."""
    firing = previous is not None and previous.state == "firing"
    if verdict.breach is None:
        return None
    if verdict.breach and firing:
        assert previous is not None
        if now - previous.updated_at < timedelta(minutes=rule.renotify_minutes):
            return None
        action, alert_id, fired_at = "renotified", previous.alert_id, previous.fired_at
    elif verdict.breach:
        action, alert_id, fired_at = "fired", _alert_id(rule, verdict.subject, now), now
    elif firing:
        assert previous is not None
        action, alert_id, fired_at = "resolved", previous.alert_id, previous.fired_at
    else:
        return None
    event = AlertEvent(
        alert_id=alert_id, rule=rule.name, kind=rule.kind, action=action,
        state="resolved" if action == "resolved" else "firing",
        **verdict.subject.model_dump(), fired_at=fired_at, updated_at=now,
        recent_mean=verdict.value, baseline_mean=verdict.baseline, recent_n=verdict.recent_n,
        baseline_n=verdict.baseline_n, p_value=verdict.p_value,
        effect_size=verdict.effect_size if verdict.effect_size is None or math.isfinite(verdict.effect_size)
        else None,
        message=verdict.headline or verdict.message, since=verdict.since, drop=verdict.drop,
        drop_low=verdict.drop_low, drop_high=verdict.drop_high, webhook_url=rule.webhook_url,
    )
    return event.model_copy(update={"message": say(event)})


def _more(have: int, rule: AlertRule) -> int:
    """How many more turns (or pairs) the rule needs before it can tell."""
    return max(0, rule.min_samples - have)


def _minutes(minutes: int) -> str:
    """A window in the unit a person would say: 90 min, 6 h, 7 d."""
    if minutes < 120 or minutes % 60:
        return f"{minutes} min"
    return f"{minutes // 60} h" if minutes < 2880 or minutes % 1440 else f"{minutes // 1440} d"


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"
