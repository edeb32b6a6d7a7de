"""Every dashboard panel's and alert rule's SQL, in one place: Grafana, ``vigil report`` and the detector share it.

The SQL is written for Grafana's ``grafana-clickhouse-datasource`` (its macros ``$__timeFilter(col)``,
``$__timeInterval(col)``, ``$__fromTime``, ``$__toTime``, ``$__interval_s`` and ``$__conditionalAll``, and the
dashboard variables ``$project``, ``$agent``, ``$monitor``). ``render`` expands them the way the plugin does, so the
report and the tests run the very text the panels run. Alert windows are written ``{window_minutes}`` etc. and bound
by ``bind`` (Grafana's alert rules are generated with the defaults; the detector binds each rule's own values).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from vigil.schemas.pass_line import sql_human_line, sql_passes

__all__ = [
    "ALERT_QUERIES", "ANNOTATIONS", "DETECTOR_QUERIES", "PANELS", "PAUSING_STATUSES", "REPORT_QUERIES", "TRACE_ROWS", "TURN_QUERIES",
    "VARIABLES", "Query", "bind",
    "render",
]

PanelKind = Literal["timeseries", "table", "barchart", "alert", "variable", "lookup"]

# judge_calls statuses that pause a judge (401/402/403/404, or the judge client's own "paused" mark).
PAUSING_STATUSES = ("http_401", "http_402", "http_403", "http_404", "paused")
_PAUSING = ", ".join(f"'{s}'" for s in PAUSING_STATUSES)


@dataclass(frozen=True)
class Query:
    """One named query: its SQL, the columns it returns, and the panel that shows it."""

    name: str
    title: str
    kind: PanelKind
    sql: str
    columns: tuple[str, ...]
    description: str = ""
    unit: str = ""


# Sampled turns whose score work the broker lost: sampled before a broker reset (``broker_epochs`` with a previous
# epoch: Redis came back empty, see vigil.worker.pipeline.broker_epoch) and no outcome since. Per monitor.
_OUTCOMES = "('scored', 'abstained', 'unscored', 'not_applicable', 'failed')"
_LOST = f"""
    SELECT project, agent, monitor, count() AS lost
    FROM (
        SELECT project, agent, monitor
        FROM pipeline_events
        WHERE monitor != '' AND stage IN ('sampled', {_OUTCOMES[1:-1]}) AND $__timeFilter(event_time)
        GROUP BY project, agent, monitor, trace_id, span_id
        HAVING countIf(stage IN {_OUTCOMES}) = 0
           AND minIf(event_time, stage = 'sampled')
               < (SELECT max(reset_at) FROM broker_epochs FINAL WHERE previous != '')
    )
    GROUP BY project, agent, monitor"""
_LOST_MEANS = ("lost: sampled turns that never got an outcome because the broker lost their work (sampled before "
               "Redis came back empty: restarted without persistence, or flushed); not only missing coverage.")


def _selected(variable: str) -> str:
    """The values selected in a dashboard variable, as an array of strings, whatever bytes they hold.

    The variable's option values are ``encodeURLComponent(name)`` (see ``VARIABLES``); Grafana's ``percentencode``
    format percent-encodes them again, a list as ``{v1,v2}``. Percent-encoded text holds only ``A-Z a-z 0-9 - _ .
    ~ %``, so it cannot end the string literal it sits in (no quote, no backslash), and as the option values hold
    no comma or brace either, the list splits back exactly. ``singlequote`` and ``sqlstring`` leave backslashes
    alone, which ClickHouse reads as escapes: a name like ``zz\\') OR 1=1 --`` ended the literal.
    """
    return (f"arrayMap(v -> decodeURLComponent(v), splitByChar(',', "
            f"trim(BOTH '{{}}' FROM decodeURLComponent('${{{variable}:percentencode}}'))))")


def _vars(*columns: str, alias: str = "") -> str:
    """The dashboard filters: ``1=1`` when a variable selects All, else membership in the selected values."""
    return " AND ".join(f"$__conditionalAll(has({_selected(c)}, {alias}{c}), ${c})" for c in columns)


_SCORE = "score / if(scale > 0, scale, 1)"  # every chart shows scores on 0..1, whatever the scorer's scale

# Student's t quantile for a two-sided 95% interval: the table for 1..30 degrees of freedom, Cornish-Fisher's
# expansion beyond (within 1e-4 of the exact quantile from 31 on).
_T95 = ("[12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, "
        "2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042]")


def _mean_ci(mean: str, variance: str, n: str) -> str:
    """``ci_low, ci_high``: the 95% interval of a mean of ``n`` scores (t interval, clamped to 0..1; NULL below 2).

    Sampled scores estimate the monitor's mean over all turns: the interval says how far the estimate may be off."""
    t = f"if({n} <= 31, arrayElement({_T95}, toUInt32({n} - 1)), 1.959964 + 2.372271 / ({n} - 1) + 2.822499 / pow({n} - 1, 2))"
    half = f"{t} * sqrt({variance} / {n})"
    return (f"if({n} >= 2 AND isFinite({variance}), greatest({mean} - {half}, 0), NULL) AS ci_low, "
            f"if({n} >= 2 AND isFinite({variance}), least({mean} + {half}, 1), NULL) AS ci_high")
# Judge-human agreement. A pair is one scored turn and one piece of human feedback on the same trace. The judge's
# score and the feedback's value are each read as positive at their pass line and above, negative below; the pair
# agrees when both fall on the same side. Agreement = agreeing pairs / pairs, with the Wilson score interval
# at 95% (z = 1.96): low = (p + z²/2n − z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n), high with +.
_Z = "1.959963984540054"


def _wilson(k: str, n: str, sign: str) -> str:
    p = f"({k} / {n})"
    return (f"if({n} > 0, ({p} + {_Z}*{_Z} / (2*{n}) {sign} {_Z} * sqrt({p} * (1 - {p}) / {n} "
            f"+ {_Z}*{_Z} / (4*{n}*{n}))) / (1 + {_Z}*{_Z} / {n}), NULL)")


_FEEDBACK_SIDES = """
    SELECT project, trace_id, monitor, value, scale
    FROM feedback FINAL"""
# Each side read at its pass line (``schemas.pass_line``): the judge's score at the row's own line, the person's
# value at the line of what it judges (a reviewer's label: the monitor's line; feedback on the whole turn: 0.5).
_JUDGE_POSITIVE = sql_passes("score", "scale", "pass_line")
_HUMAN_POSITIVE = sql_passes("f.value", "f.scale", sql_human_line("f.monitor", "s.pass_line"))
# Feedback on the whole turn (monitor '') pairs with every monitor's score; a reviewer's label of one monitor's
# verdict (``vigil review``) only with that monitor's.
# Feedback that names its project pairs only with that project's scores (trace ids are a project's own).
_FEEDBACK_PAIRS = "f.trace_id = s.trace_id\nWHERE f.monitor IN ('', s.monitor) AND f.project IN ('', s.project)"

_PANEL_LIST = [
    Query(
        "monitor_summary", "Monitors: turns per status and mean score", "table",
        f"""
SELECT project, agent, monitor, scorer,
       arrayStringConcat(arraySort(groupUniqArray(scorer_version)), ', ') AS scorer_versions,
       count() AS turns,
       countIf(status = 'scored' AND label != 'abstained') AS scored,
       countIf(status = 'scored' AND label = 'abstained') AS abstained,
       countIf(status = 'unscored' AND label != 'not_applicable') AS unscored,
       countIf(status = 'unscored' AND label = 'not_applicable') AS not_applicable,
       countIf(status = 'failed') AS failed,
       if(scored + abstained > 0, abstained / (scored + abstained), NULL) AS abstention_rate,
       avgIf({_SCORE}, status = 'scored') AS mean_score,
       {_mean_ci("mean_score", f"varSampIf({_SCORE}, status = 'scored')", "scored")},
       quantileIf(0.5)({_SCORE}, status = 'scored') AS p50_score,
       max(scored_at) AS last_scored_at,
       arrayStringConcat(arraySort(groupUniqArrayIf(judge_model, status = 'scored')), ', ') AS judge_models
FROM scores FINAL
WHERE $__timeFilter(trace_time) AND {_vars("project", "agent", "monitor")}
GROUP BY project, agent, monitor, scorer
ORDER BY monitor, agent""",
        ("project", "agent", "monitor", "scorer", "scorer_versions", "turns", "scored", "abstained", "unscored",
         "not_applicable", "failed", "abstention_rate", "mean_score", "ci_low", "ci_high", "p50_score",
         "last_scored_at", "judge_models"),
        "Exact counts from scores FINAL: unscored (no verdict) and failed (an error) are told apart from low scores; "
        "abstained (the agent said it is not sure) is counted on its own and is not in the mean; not_applicable: "
        "turns the scorer said it does not apply to (unscored, with the reason), out of the mean. "
        "ci_low..ci_high: the 95% interval of the mean (the scores are a sample of the turns).",
    ),
    Query(
        "score_mean_ci", "${monitor:text}: mean score with its 95% interval", "timeseries",
        f"""
SELECT time, agent, monitor, turns, mean_score,
       {_mean_ci("mean_score", "variance", "turns")}
FROM (
    SELECT $__timeInterval(bucket) AS time, agent, monitor,
           countIfMerge(scored) AS turns, avgIfMerge(mean) AS mean_score, varSampIfMerge(variance) AS variance
    FROM scores_1m
    WHERE $__timeFilter(bucket) AND {_vars("project", "agent", "monitor")}
    GROUP BY time, agent, monitor
    HAVING turns > 0
)
ORDER BY time, agent, monitor""",
        ("time", "agent", "monitor", "turns", "mean_score", "ci_low", "ci_high"),
        "The mean of the sampled scores per bucket and its 95% t interval: a wide band is few turns, not a "
        "change. Score / scale, so 1.0 is best on every scorer.", "percentunit",
    ),
    Query(
        "score_over_time", "Mean score per monitor and agent, by scorer version", "timeseries",
        f"""
SELECT $__timeInterval(bucket) AS time, agent, monitor, scorer_version,
       avgIfMerge(mean) AS mean_score
FROM scores_1m
WHERE $__timeFilter(bucket) AND {_vars("project", "agent", "monitor")}
GROUP BY time, agent, monitor, scorer_version
HAVING countIfMerge(scored) > 0
ORDER BY time, agent, monitor, scorer_version""",
        ("time", "agent", "monitor", "scorer_version", "mean_score"),
        "From the per-minute rollup; score / scale, so 1.0 is best on every scorer.", "percentunit",
    ),
    Query(
        "score_quantiles", "Score p10 / p50 / p90 per monitor", "timeseries",
        f"""
SELECT time, monitor, q[1] AS p10, q[2] AS p50, q[3] AS p90
FROM (
    SELECT $__timeInterval(bucket) AS time, monitor,
           quantilesTDigestIfMerge(0.1, 0.5, 0.9)(quantiles) AS q
    FROM scores_1m
    WHERE $__timeFilter(bucket) AND {_vars("project", "agent", "monitor")}
    GROUP BY time, monitor
    HAVING countIfMerge(scored) > 0
)
ORDER BY time, monitor""",
        ("time", "monitor", "p10", "p50", "p90"), "", "percentunit",
    ),
    Query(
        "score_distribution", "Score distribution per monitor", "barchart",
        f"""
SELECT monitor, toFloat64(least(floor({_SCORE} * 10), 9) / 10) AS bin, count() AS turns
FROM scores FINAL
WHERE status = 'scored' AND score IS NOT NULL AND $__timeFilter(trace_time)
  AND {_vars("project", "agent", "monitor")}
GROUP BY monitor, bin
ORDER BY monitor, bin""",
        ("monitor", "bin", "turns"), "Scored turns in ten bins of score / scale (bin 0.9 holds 0.9..1.0).",
    ),
    Query(
        "status_over_time", "Turns per status (scored, abstained, unscored, failed)", "timeseries",
        f"""
SELECT $__timeInterval(bucket) AS time, monitor,
       countIfMerge(scored) AS scored, countIfMerge(abstained) AS abstained, countIfMerge(unscored) AS unscored,
       countIfMerge(failed) AS failed
FROM scores_1m
WHERE $__timeFilter(bucket) AND {_vars("project", "agent", "monitor")}
GROUP BY time, monitor
ORDER BY time, monitor""",
        ("time", "monitor", "scored", "abstained", "unscored", "failed"),
    ),
    Query(
        "coverage_funnel", "Coverage funnel: received → sampled → scored / abstained / unscored / failed", "table",
        f"""
SELECT e.project AS project, e.agent AS agent, e.monitor AS monitor,
       any(r.received) AS received,
       any(r.steps) AS steps,
       any(r.superseded) AS superseded,
       any(r.failed_runs) AS failed_runs,
       any(r.no_turn) AS no_turn,
       any(r.joined) AS joined,
       any(r.conflicts) AS conflicts,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'filtered') AS filtered,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'skipped') AS skipped,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'probe') AS probe,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'shed') AS shed,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'budget') AS budget,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'sampled') AS sampled,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'scored') AS scored,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'abstained') AS abstained,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'unscored') AS unscored,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'not_applicable') AS not_applicable,
       uniqExactIf(e.trace_id, e.span_id, e.stage = 'failed') AS failed,
       if(sampled > not_applicable, (scored + abstained) / (sampled - not_applicable), NULL) AS coverage,
       any(l.lost) AS lost,
       any(d.dead_lettered) AS dead_lettered
FROM pipeline_events AS e
LEFT JOIN ({_LOST}) AS l ON l.project = e.project AND l.agent = e.agent AND l.monitor = e.monitor
LEFT JOIN (
    SELECT project, agent, uniqExactIf(trace_id, span_id, stage = 'received') AS received,
           uniqExactIf(trace_id, span_id, stage = 'step') AS steps,
           uniqExactIf(trace_id, span_id, stage = 'superseded') AS superseded,
           uniqExactIf(trace_id, span_id, stage = 'failed_run') AS failed_runs,
           uniqExactIf(trace_id, span_id, stage = 'no_turn') AS no_turn,
           uniqExactIf(trace_id, span_id, stage = 'joined') AS joined,
           countIf(stage = 'conflict') AS conflicts
    FROM pipeline_events
    WHERE stage IN ('received', 'step', 'superseded', 'failed_run', 'no_turn', 'joined', 'conflict')
      AND $__timeFilter(event_time)
    GROUP BY project, agent
) AS r ON r.project = e.project AND r.agent = e.agent
LEFT JOIN (
    SELECT JSONExtractString(payload, 'project') AS project, JSONExtractString(payload, 'agent') AS agent,
           count() AS dead_lettered
    FROM dead_letters FINAL
    WHERE $__timeFilter(received_at)
    GROUP BY project, agent
) AS d ON d.project = e.project AND d.agent = e.agent
WHERE e.monitor != '' AND $__timeFilter(e.event_time) AND {_vars("project", "agent", "monitor", alias="e.")}
GROUP BY project, agent, monitor
ORDER BY monitor, agent""",
        ("project", "agent", "monitor", "received", "steps", "superseded", "failed_runs", "no_turn", "joined",
         "conflicts",
         "filtered", "skipped", "probe", "shed", "budget", "sampled", "scored", "abstained", "unscored",
         "not_applicable", "failed", "coverage", "lost", "dead_lettered"),
        "Distinct turns (trace, span) per stage, exact under redelivery. steps: LLM calls that only asked for a "
        "tool and that no call of their trace answered (each call its own trace), never scored. superseded: turns a "
        "later assembly of their trace replaced (a late root), removed with their scores. failed_runs: agent runs that "
        "ended in error without an answer, recorded with their error and never scored. no_turn: traces with GenAI "
        "spans that made no turn (no LLM call, or no known convention; the worker logs why). "
        "joined: traces that joined another trace's run (work that run handed on by a span link and waited for), "
        "scored as part of its turn, not turns of their own. conflicts: spans or turns "
        "sent again under a stored id with other content, refused (the stored turn kept). probe: vigil's own traffic (probe "
        "follow-ups), never sampled. shed: sampled turns not scored because the score queue was over its bound "
        "(VIGIL_SCORE_QUEUE_MAX). budget: turns the monitor's rate chose but its judge budget did not (paced "
        "down to keep the day's spend under it, or paused at it). not_applicable: turns the scorer does not apply to. "
        "coverage = (scored + abstained) / (sampled - not_applicable): turns that got a verdict of those due one. "
        f"{_LOST_MEANS} "
        "dead_lettered: the agent's turns vigil could not take (never received), from dead_letters.",
    ),
    Query(
        "lost_turns", "Lost: sampled turns the broker lost before they were scored", "table",
        f"""
SELECT l.project AS project, l.agent AS agent, l.monitor AS monitor, l.lost AS lost,
       (SELECT max(reset_at) FROM broker_epochs FINAL WHERE previous != '') AS broker_reset
FROM ({_LOST}) AS l
WHERE {_vars("project", "agent", "monitor", alias="l.")}
ORDER BY lost DESC, monitor, agent""",
        ("project", "agent", "monitor", "lost", "broker_reset"),
        f"{_LOST_MEANS} broker_reset: when the broker last came back empty.",
    ),
    Query(
        "dead_letters", "Dead letters: what vigil could not process, and why", "table",
        """
SELECT queue, error_type, JSONExtractString(payload, 'project') AS project,
       JSONExtractString(payload, 'agent') AS agent, count() AS letters, max(received_at) AS last_seen,
       argMax(reason, received_at) AS reason
FROM dead_letters FINAL
WHERE $__timeFilter(received_at)
GROUP BY queue, error_type, project, agent
ORDER BY letters DESC, last_seen DESC
LIMIT 50""",
        ("queue", "error_type", "project", "agent", "letters", "last_seen", "reason"),
        "Messages dead-lettered with their reason (an invalid turn, a refused row, an unknown task), by kind; "
        "the reason is the latest one's.",
    ),
    Query(
        "unscored_reasons", "Why turns went unscored, did not apply or failed, per monitor (top 3 reasons)", "table",
        f"""
SELECT monitor, outcome AS status, error_type, reason, count() AS turns, max(trace_time) AS last_seen
FROM (
    SELECT monitor, if(label = 'not_applicable', 'not_applicable', status) AS outcome, error_type, reason, trace_time
    FROM scores FINAL
    WHERE status IN ('unscored', 'failed') AND $__timeFilter(trace_time) AND {_vars("project", "agent", "monitor")}
)
GROUP BY monitor, outcome, error_type, reason
ORDER BY monitor, outcome, turns DESC, last_seen DESC
LIMIT 3 BY monitor, outcome""",
        ("monitor", "status", "error_type", "reason", "turns", "last_seen"),
        "The most common reasons a monitor gave no score: unscored (no verdict: nothing to score, an unreadable "
        "reply), not_applicable (the scorer does not apply to the turn) or failed (an error).",
    ),
    Query(
        "queue_lag", "Queue lag (received → scored) p50 / p95", "timeseries",
        f"""
SELECT time, monitor, q[1] AS p50_s, q[2] AS p95_s
FROM (
    SELECT $__timeInterval(s.scored_at) AS time, s.monitor AS monitor,
           quantiles(0.5, 0.95)(greatest(dateDiff('millisecond', t.first_received, s.scored_at), 0) / 1000) AS q
    FROM (
        SELECT trace_id, monitor, scored_at FROM scores FINAL
        WHERE $__timeFilter(scored_at) AND {_vars("project", "agent", "monitor")}
    ) AS s
    INNER JOIN (
        SELECT trace_id, min(received_at) AS first_received FROM traces
        WHERE received_at >= $__fromTime - INTERVAL 1 DAY AND received_at <= $__toTime
        GROUP BY trace_id
    ) AS t ON t.trace_id = s.trace_id
    GROUP BY time, monitor
)
ORDER BY time, monitor""",
        ("time", "monitor", "p50_s", "p95_s"),
        "From when vigil received a turn to when it was scored, by when it was scored: turns sent long after they "
        "happened (a replay, the demo's back-dated history) are not read as lag.", "s",
    ),
    Query(
        "judge_calls", "Judge calls by status", "timeseries",
        f"""
SELECT $__timeInterval(called_at) AS time, judge, status, count() AS calls
FROM judge_calls FINAL
WHERE $__timeFilter(called_at) AND {_vars("project", "monitor")}
GROUP BY time, judge, status
ORDER BY time, judge, status""",
        ("time", "judge", "status", "calls"),
    ),
    Query(
        "judge_tokens_cost", "Judge tokens and cost", "timeseries",
        f"""
SELECT $__timeInterval(called_at) AS time, judge,
       sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
       sum(cost_usd) AS cost_usd
FROM judge_calls FINAL
WHERE NOT cached AND $__timeFilter(called_at) AND {_vars("project", "monitor")}
GROUP BY time, judge
ORDER BY time, judge""",
        ("time", "judge", "prompt_tokens", "completion_tokens", "cost_usd"),
    ),
    Query(
        "judge_spend", "Judge spend per monitor per day (a monitor's budget: vigil judge status)", "table",
        f"""
SELECT toDate(called_at) AS day, monitor, sum(cost_usd) AS cost_usd,
       sum(prompt_tokens + completion_tokens) AS tokens, count() AS calls
FROM judge_calls FINAL
WHERE NOT cached AND $__timeFilter(called_at) AND {_vars("project", "monitor")}
GROUP BY day, monitor
ORDER BY day DESC, cost_usd DESC""",
        ("day", "monitor", "cost_usd", "tokens", "calls"),
        "What each monitor's judge calls cost per UTC day, the day its budget (budget: usd_per_day, "
        "tokens_per_day) is kept over; today's forecast and the budget itself: vigil judge status.",
    ),
    Query(
        "judge_latency", "Judge latency p50 / p95", "timeseries",
        f"""
SELECT time, judge, q[1] AS p50_ms, q[2] AS p95_ms
FROM (
    SELECT $__timeInterval(called_at) AS time, judge, quantiles(0.5, 0.95)(latency_ms) AS q
    FROM judge_calls FINAL
    WHERE NOT cached AND $__timeFilter(called_at) AND {_vars("project", "monitor")}
    GROUP BY time, judge
)
ORDER BY time, judge""",
        ("time", "judge", "p50_ms", "p95_ms"), "", "ms",
    ),
    Query(
        "judge_summary", "Judges: calls, errors, tokens, cost, latency", "table",
        f"""
SELECT judge, arrayStringConcat(arraySort(groupUniqArray(model)), ', ') AS models,
       countIf(NOT cached) AS calls,
       countIf(cached) AS cache_hits,
       countIf(status NOT IN ('ok', 'cached')) AS errors,
       if(count() > 0, errors / count(), 0) AS error_rate,
       sumIf(prompt_tokens, NOT cached) AS prompt_tokens,
       sumIf(completion_tokens, NOT cached) AS completion_tokens,
       sumIf(cached_prompt_tokens, NOT cached) AS cached_prompt_tokens,
       sumIf(cost_usd, NOT cached) AS cost_usd,
       quantileIf(0.5)(latency_ms, NOT cached) AS p50_ms,
       quantileIf(0.95)(latency_ms, NOT cached) AS p95_ms,
       max(called_at) AS last_call
FROM judge_calls FINAL
WHERE $__timeFilter(called_at) AND {_vars("project", "monitor")}
GROUP BY judge
ORDER BY judge""",
        ("judge", "models", "calls", "cache_hits", "errors", "error_rate", "prompt_tokens", "completion_tokens",
         "cached_prompt_tokens", "cost_usd", "p50_ms", "p95_ms", "last_call"),
    ),
    Query(
        "judge_errors", "Judge errors by status", "table",
        f"""
SELECT judge, status, count() AS calls, max(called_at) AS last_seen
FROM judge_calls FINAL
WHERE status NOT IN ('ok', 'cached') AND $__timeFilter(called_at) AND {_vars("project", "monitor")}
GROUP BY judge, status
ORDER BY calls DESC""",
        ("judge", "status", "calls", "last_seen"),
    ),
    Query(
        "paused_judges", "Paused judges", "table",
        f"""
SELECT judge, status, last_seen, source
FROM (
    SELECT judge, argMax(status, called_at) AS status, max(called_at) AS last_seen, 'judge_calls' AS source
    FROM judge_calls FINAL
    WHERE $__timeFilter(called_at)
    GROUP BY judge
    HAVING status IN ({_PAUSING})
    UNION ALL
    SELECT judge, 'alert firing' AS status, updated_at AS last_seen, 'alerts' AS source
    FROM alerts FINAL
    WHERE kind = 'judge_paused' AND state = 'firing'
)
ORDER BY judge""",
        ("judge", "status", "last_seen", "source"),
        "A judge whose latest call was refused (401/402/403/404), or a firing judge_paused alert.",
    ),
    Query(
        "worst_turns", "Worst recent turns per monitor (failing its pass line): question, answer, reason", "table",
        f"""
WITH worst AS (
    SELECT trace_time, project, agent, monitor, scorer_version, {_SCORE} AS score_norm, label, reason, trace_id
    FROM scores FINAL
    WHERE status = 'scored' AND score IS NOT NULL AND NOT {_JUDGE_POSITIVE} AND $__timeFilter(trace_time)
      AND {_vars("project", "agent", "monitor")}
    ORDER BY score_norm ASC, trace_time DESC
    LIMIT 5 BY monitor
)
SELECT w.trace_time AS trace_time, w.agent AS agent, w.monitor AS monitor, w.scorer_version AS scorer_version,
       w.score_norm AS score, w.label AS label, w.reason AS reason, w.trace_id AS trace_id,
       t.question AS question, t.answer AS answer
FROM worst AS w
LEFT JOIN (
    SELECT trace_id, any(question) AS question, any(output) AS answer
    FROM traces
    WHERE $__timeFilter(started_at) AND trace_id IN (SELECT trace_id FROM worst)
    GROUP BY trace_id
) AS t ON t.trace_id = w.trace_id
ORDER BY monitor, score ASC, trace_time DESC""",
        ("trace_time", "agent", "monitor", "scorer_version", "score", "label", "reason", "trace_id", "question",
         "answer"),
        "The five lowest-scored turns of each monitor in the range (their text read from the range's traces: a "
        "score's trace_time is its turn's started_at).",
    ),
    Query(
        "judge_evals", "Judge evaluations: agreement with human labels (vigil eval)", "table",
        """
SELECT started_at, scorer, scorer_version, judge, judge_model, dataset, dataset_format, n, pairs,
       pairwise_accuracy, pairwise_accuracy_low, pairwise_accuracy_high, reference_pairwise_accuracy, ties,
       spearman, kendall_tau_b, cohen_kappa, unscored + failed AS no_verdict, abstained, cost_usd,
       dataset_sha256, run_id
FROM judge_evals FINAL
ORDER BY started_at DESC
LIMIT 50""",
        ("started_at", "scorer", "scorer_version", "judge", "judge_model", "dataset", "dataset_format", "n",
         "pairs", "pairwise_accuracy", "pairwise_accuracy_low", "pairwise_accuracy_high",
         "reference_pairwise_accuracy", "ties", "spearman", "kendall_tau_b", "cohen_kappa", "no_verdict",
         "abstained", "cost_usd", "dataset_sha256", "run_id"),
        "The latest 50 `vigil eval` runs, whatever the time range: how often each judge and scorer version agreed "
        "with people (pairwise accuracy with its 95% Wilson interval), beside plain word recall of the reference.",
    ),
    Query(
        "judge_agreement", "Judge-human agreement per monitor (score vs feedback, 95% Wilson interval)", "table",
        f"""
SELECT s.project AS project, s.agent AS agent, s.monitor AS monitor,
       count() AS pairs,
       countIf(s.judge_positive = {_HUMAN_POSITIVE}) AS agreed,
       countIf(NOT {_HUMAN_POSITIVE}) AS negative_feedback,
       agreed / pairs AS agreement,
       {_wilson("agreed", "pairs", "-")} AS agreement_low,
       {_wilson("agreed", "pairs", "+")} AS agreement_high
FROM (
    SELECT trace_id, project, agent, monitor, pass_line, {_JUDGE_POSITIVE} AS judge_positive
    FROM scores FINAL
    WHERE status = 'scored' AND score IS NOT NULL AND $__timeFilter(trace_time)
      AND {_vars("project", "agent", "monitor")}
) AS s
INNER JOIN ({_FEEDBACK_SIDES}
) AS f ON {_FEEDBACK_PAIRS}
GROUP BY project, agent, monitor
ORDER BY monitor, agent""",
        ("project", "agent", "monitor", "pairs", "agreed", "negative_feedback", "agreement", "agreement_low",
         "agreement_high"),
        "Turns scored in the range that also got human feedback. A pair agrees when the score and the feedback "
        "fall on the same side of the monitor's pass line (pass_at; 0.5 of the scale unless set).",
    ),
    Query(
        "recent_alerts", "Alerts", "table",
        """
SELECT updated_at, state, kind, rule, project, agent, monitor, judge, fired_at, message, since, drop, drop_low,
       drop_high, segments, agents, recent_mean, baseline_mean
FROM alerts FINAL
WHERE $__timeFilter(updated_at)
ORDER BY updated_at DESC
LIMIT 50""",
        ("updated_at", "state", "kind", "rule", "project", "agent", "monitor", "judge", "fired_at", "message", "since",
         "drop", "drop_low", "drop_high", "segments", "agents", "recent_mean", "baseline_mean"),
        "A regression's row says since when (the detector's change-point estimate), the drop with its 95% interval, "
        "and the segments that explain it (JSON, ranked: key, value, n, recent and baseline mean, share of the "
        "drop).",
    ),
    Query(
        "detector_statistic", "Regression detector: statistic against its threshold (1.0 fires)", "timeseries",
        f"""
SELECT $__timeInterval(checked_at) AS time, monitor, max(statistic) AS statistic, max(firing) AS firing
FROM detector_checks
WHERE $__timeFilter(checked_at) AND $__conditionalAll(has({_selected("monitor")}, monitor), $monitor)
GROUP BY time, monitor
ORDER BY time, monitor""",
        ("time", "monitor", "statistic", "firing"),
        "Each monitor's highest CUSUM over its own threshold, per check: at 1.0 the sequential detector fires (the "
        "threshold is set for the rule's false alarms a month on the monitor's own score distribution); firing is 1 "
        "while the alert is on. Grafana's regression rule fires on the same column.",
    ),
]

PANELS: dict[str, Query] = {q.name: q for q in _PANEL_LIST}

# What the report reads besides the panels: how the scored turns spread over time, to pick each chart's bucket.
REPORT_QUERIES: dict[str, Query] = {
    "detector_modes": Query(
        "detector_modes", "The regression detector's latest check per monitor", "table",
        """
SELECT monitor, argMax(mode, checked_at) AS mode, argMax(reason, checked_at) AS reason
FROM detector_checks
WHERE checked_at <= $__toTime
GROUP BY monitor
ORDER BY monitor""",
        ("monitor", "mode", "reason"),
    ),
    "score_density": Query(
        "score_density", "Scored turns per minute, per monitor", "table",
        f"""
SELECT agent, monitor, bucket AS minute, countIfMerge(scored) AS scored
FROM scores_1m
WHERE $__timeFilter(bucket) AND {_vars("project", "agent", "monitor")}
GROUP BY agent, monitor, minute
HAVING scored > 0
ORDER BY agent, monitor, minute""",
        ("agent", "monitor", "minute", "scored"),
    ),
    "delivery": Query(
        "delivery", "Turns shipped by the SDK and received by the workers, per agent", "table",
        f"""
SELECT project, agent, sum(p_shipped) AS shipped, sum(p_received) AS received,
       toInt64(shipped) - toInt64(received) AS lost
FROM (
    SELECT producer, any(project) AS project, any(agent) AS agent,
           max(b.shipped) AS p_shipped, sum(b.turns) AS p_received
    FROM producer_batches AS b FINAL
    WHERE producer IN (SELECT producer FROM producer_batches WHERE $__timeFilter(received_at))
      AND {_vars("project", "agent")}
    GROUP BY producer
)
GROUP BY project, agent
ORDER BY lost DESC, project, agent""",
        ("project", "agent", "shipped", "received", "lost"),
        "Each SDK process (a producer) numbers its batches and counts the turns it shipped; a batch that never "
        "reached a worker (a broker restarted without persistence) shows as lost: the shipped count of a later "
        "batch includes it. Counted over the whole life of every producer heard from in the range.",
    ),
}

# Alerts drawn on the dashboard's time series where they fired (a Grafana annotation query: time, text, tags).
ANNOTATIONS: dict[str, Query] = {
    "alerts_fired": Query(
        "alerts_fired", "vigil alerts", "table",
        f"""
SELECT coalesce(since, fired_at) AS time, if(state = 'firing', now64(3), updated_at) AS timeEnd, message AS text,
       arrayFilter(x -> x != '', arrayConcat([kind, agent, monitor, judge], agents)) AS tags
FROM alerts FINAL
WHERE $__timeFilter(fired_at) AND $__conditionalAll((has({_selected("monitor")}, monitor) OR monitor = ''), $monitor)
ORDER BY time""",
        ("time", "timeEnd", "text", "tags"),
        "Each alert as a region from the change it names (else when it fired) to now, or to when it resolved; the "
        "text is the alert's sentence, the tags name its agents.",
    ),
}

# A variable's options: the value Grafana substitutes (first column: the name URL-encoded, see ``_selected``) and
# the text it shows (second column: the name).
VARIABLES: dict[str, Query] = {
    name: Query(name, name, "variable",
                f"SELECT DISTINCT encodeURLComponent({name}) AS value, {name} AS text FROM scores_1h ORDER BY text",
                ("value", "text"))
    for name in ("project", "agent", "monitor")
}

# The detector's inputs. Windows end at $__toTime (Grafana: the evaluation time; the detector: its injected now).
# Recent: the per-minute rollup; baseline: the hourly rollup, hour-aligned, ending before the recent window.
_WINDOWS = """
SELECT project, agent, monitor, scorer_version, 'recent' AS period,
       countIfMerge(scored) AS n, avgIfMerge(mean) AS mean, varSampIfMerge(variance) AS variance,
       countMerge(rows) AS turns, countIfMerge(failed) AS failed
FROM scores_1m
WHERE bucket >= $__toTime - INTERVAL {window_minutes} MINUTE AND bucket < $__toTime
GROUP BY project, agent, monitor, scorer_version
UNION ALL
SELECT project, agent, monitor, scorer_version, 'baseline' AS period,
       countIfMerge(scored) AS n, avgIfMerge(mean) AS mean, varSampIfMerge(variance) AS variance,
       countMerge(rows) AS turns, countIfMerge(failed) AS failed
FROM scores_1h
WHERE bucket >= toStartOfHour($__toTime - INTERVAL ({window_minutes} + {baseline_minutes}) MINUTE)
  AND bucket < toStartOfHour($__toTime - INTERVAL {window_minutes} MINUTE)
GROUP BY project, agent, monitor, scorer_version"""

_COVERAGE = """
SELECT project, agent, monitor,
       uniqExactIf(trace_id, span_id, stage = 'sampled') AS sampled,
       uniqExactIf(trace_id, span_id, stage = 'scored') AS scored,
       uniqExactIf(trace_id, span_id, stage = 'not_applicable') AS not_applicable,
       if(sampled > not_applicable, scored / (sampled - not_applicable), 1) AS coverage
FROM pipeline_events
WHERE monitor != '' AND event_time >= $__toTime - INTERVAL {window_minutes} MINUTE AND event_time < $__toTime
GROUP BY project, agent, monitor"""

# Agent runs per agent: every turn is received once (monitor ''), a run that ended in error without an answer also
# as a failed run (its turn carries the error and is never scored).
_FAILED_RUNS = """
SELECT project, agent,
       uniqExactIf(trace_id, span_id, stage = 'received') AS received,
       uniqExactIf(trace_id, span_id, stage = 'failed_run') AS failed_runs
FROM pipeline_events
WHERE monitor = '' AND stage IN ('received', 'failed_run')
  AND event_time >= $__toTime - INTERVAL {window_minutes} MINUTE AND event_time < $__toTime
GROUP BY project, agent"""

_JUDGE_STATUS = f"""
SELECT judge, argMax(status, called_at) AS last_status, max(called_at) AS last_call, count() AS calls,
       toUInt8(last_status IN ({_PAUSING})) AS paused
FROM judge_calls
WHERE called_at >= $__toTime - INTERVAL {{window_minutes}} MINUTE AND called_at < $__toTime
GROUP BY judge"""

# Agreement outcomes (1 agree, 0 disagree) per monitor: the recent window and the baseline before it, by the
# scored turn's time. Feedback that comes later fills older windows in; the detector reads them as they are now.
_AGREEMENT_WINDOWS = f"""
SELECT project, agent, monitor, period, count() AS n, avg(agree) AS mean, varSamp(agree) AS variance
FROM (
    SELECT s.project AS project, s.agent AS agent, s.monitor AS monitor,
           if(s.trace_time >= $__toTime - INTERVAL {{window_minutes}} MINUTE, 'recent', 'baseline') AS period,
           toFloat64(s.judge_positive = {_HUMAN_POSITIVE}) AS agree
    FROM (
        SELECT trace_id, project, agent, monitor, trace_time, pass_line, {_JUDGE_POSITIVE} AS judge_positive
        FROM scores FINAL
        WHERE status = 'scored' AND score IS NOT NULL AND trace_time < $__toTime
          AND trace_time >= $__toTime - INTERVAL ({{window_minutes}} + {{baseline_minutes}}) MINUTE
    ) AS s
    INNER JOIN ({_FEEDBACK_SIDES}
    ) AS f ON {_FEEDBACK_PAIRS}
)
GROUP BY project, agent, monitor, period"""

DETECTOR_QUERIES: dict[str, Query] = {
    q.name: q
    for q in [
        Query("windows", "Recent and baseline windows per scorer version", "alert", _WINDOWS,
              ("project", "agent", "monitor", "scorer_version", "period", "n", "mean", "variance", "turns",
               "failed")),
        Query("agreement_windows", "Judge-human agreement, recent and baseline windows", "alert",
              _AGREEMENT_WINDOWS, ("project", "agent", "monitor", "period", "n", "mean", "variance")),
        Query("coverage", "Scored / sampled per monitor", "alert", _COVERAGE,
              ("project", "agent", "monitor", "sampled", "scored", "not_applicable", "coverage")),
        Query("failed_runs", "Failed runs / received runs per agent", "alert", _FAILED_RUNS,
              ("project", "agent", "received", "failed_runs")),
        Query("judge_status", "Each judge's latest call status", "alert", _JUDGE_STATUS,
              ("judge", "last_status", "last_call", "calls", "paused")),
        Query("alert_states", "The latest row of each (rule, subject)", "alert", """
SELECT rule, project, agent, monitor, judge,
       argMax(alert_id, updated_at) AS alert_id, argMax(state, updated_at) AS state,
       argMax(fired_at, updated_at) AS fired_at, max(updated_at) AS last_updated
FROM alerts FINAL
GROUP BY rule, project, agent, monitor, judge""",
              ("rule", "project", "agent", "monitor", "judge", "alert_id", "state", "fired_at", "last_updated")),
    ]
}

# Grafana's alert rules: label columns and exactly one numeric column, ``value``; one alert instance per row.
ALERT_QUERIES: dict[str, Query] = {
    q.name: q
    for q in [
        Query(
            "detector_firing", "The sequential regression detector is firing", "alert",
            """
SELECT rule, monitor, toFloat64(argMax(firing, checked_at)) AS value
FROM detector_checks
WHERE checked_at >= $__toTime - INTERVAL {window_minutes} MINUTE AND checked_at <= $__toTime
GROUP BY rule, monitor""",
            ("rule", "monitor", "value"),
            "1 while the latest check of a sequential regression rule says firing: the very decision vigil notifies on.",
        ),
        Query(
            "failure_rate", "A monitor's failure rate", "alert",
            f"""
SELECT project, agent, monitor, sum(failed) / sum(turns) AS value
FROM ({_WINDOWS})
WHERE period = 'recent'
GROUP BY project, agent, monitor
HAVING sum(turns) >= {{min_samples}}""",
            ("project", "agent", "monitor", "value"), "Failed / all scores in the window.",
        ),
        Query(
            "failed_runs", "An agent's share of failed runs", "alert",
            f"""
SELECT project, agent, failed_runs / received AS value
FROM ({_FAILED_RUNS})
WHERE received >= {{min_samples}}""",
            ("project", "agent", "value"), "Runs that ended in error without an answer / all runs in the window.",
        ),
        Query(
            "coverage_drop", "A monitor's coverage dropped", "alert",
            f"""
SELECT project, agent, monitor, coverage AS value
FROM ({_COVERAGE})
WHERE sampled - not_applicable >= {{min_samples}}""",
            ("project", "agent", "monitor", "value"), "Scored / sampled in the window.",
        ),
        Query(
            "agreement_low", "A monitor's judge-human agreement is low", "alert",
            f"""
SELECT project, agent, monitor, mean AS value
FROM ({_AGREEMENT_WINDOWS})
WHERE period = 'recent' AND n >= {{min_samples}}""",
            ("project", "agent", "monitor", "value"),
            "Share of score-feedback pairs in the window where judge and human fall on the same side of the pass line.",
        ),
        Query(
            "judge_paused", "A judge is paused", "alert",
            f"""
SELECT judge, toFloat64(max(paused)) AS value
FROM (
    SELECT judge, paused FROM ({_JUDGE_STATUS})
    UNION ALL
    SELECT judge, toUInt8(1) AS paused FROM alerts FINAL
    WHERE kind = 'judge_paused' AND state = 'firing' AND judge != ''
)
GROUP BY judge""",
            ("judge", "value"), "1 while a judge's latest call was refused or a judge_paused alert is firing.",
        ),
    ]
}

# ``vigil show TRACE_ID``: one turn (every span of the trace) with all its scores and judge calls. A prefix of the
# trace id is enough when it is unique. Bound server-side: {trace_id:String}.
TURN_QUERIES: dict[str, Query] = {
    q.name: q
    for q in [
        Query("turn", "The turn's spans", "table", """
SELECT trace_id, span_id, session_id, project, agent, environment, started_at, ended_at, system, input_json,
       question, output, contexts_json, reference, tool_calls_json, model, prompt_tokens, completion_tokens, tags,
       metadata, truncated, spans_json
FROM traces FINAL
WHERE startsWith(trace_id, {trace_id:String})
ORDER BY started_at, span_id
LIMIT 20""",
              ("trace_id", "span_id", "session_id", "project", "agent", "environment", "started_at", "ended_at",
               "system", "input_json", "question", "output", "contexts_json", "reference", "tool_calls_json",
               "model", "prompt_tokens", "completion_tokens", "tags", "metadata", "truncated", "spans_json")),
        Query("scores", "Every score of the turn", "table", """
SELECT trace_id, span_id, monitor, scorer, scorer_version, status, score, scale, pass_line, label, reason, steps_json,
       details_json, error_type, judge, judge_model, judge_calls, prompt_tokens, completion_tokens, cost_usd,
       latency_ms, scored_at, project
FROM scores FINAL
WHERE startsWith(trace_id, {trace_id:String})
ORDER BY monitor, span_id""",
              ("trace_id", "span_id", "monitor", "scorer", "scorer_version", "status", "score", "scale", "pass_line",
               "label",
               "reason", "steps_json", "details_json", "error_type", "judge", "judge_model", "judge_calls",
               "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms", "scored_at", "project")),
        Query("stages", "The turn's way through the pipeline", "table", """
SELECT monitor, stage, min(event_time) AS at
FROM pipeline_events
WHERE startsWith(trace_id, {trace_id:String})
GROUP BY monitor, stage
ORDER BY at, monitor""",
              ("monitor", "stage", "at")),
        Query("feedback", "Feedback and reviewers' labels on the turn", "table", """
SELECT name, value, scale, comment, source, author, created_at
FROM feedback FINAL
WHERE trace_id = {trace_id:String}
ORDER BY created_at""",
              ("name", "value", "scale", "comment", "source", "author", "created_at")),
        Query("dead_letters", "Dead letters that carried the trace id", "table", """
SELECT received_at, queue, error_type, reason
FROM dead_letters FINAL
WHERE startsWith(JSONExtractString(payload, 'trace_id'), {trace_id:String})
ORDER BY received_at""",
              ("received_at", "queue", "error_type", "reason")),
    ]
}
# A stored turn read back by its trace id (the writer re-scores a turn that got negative feedback after it was
# ingested); ``{trace_id:String}`` is a clickhouse-connect server-side parameter, passed with ``parameters=``.
TRACE_ROWS = Query(
    "trace_rows", "A turn's stored rows by trace id", "lookup", """
SELECT trace_id, span_id, session_id, project, agent, environment, started_at, ended_at, system, input_json, output,
       contexts_json, reference, tool_calls_json, model, prompt_tokens, completion_tokens, tags, metadata, truncated
FROM traces FINAL
WHERE trace_id = {trace_id:String}
ORDER BY span_id""",
    ("trace_id", "span_id", "session_id", "project", "agent", "environment", "started_at", "ended_at", "system",
     "input_json", "output", "contexts_json", "reference", "tool_calls_json", "model", "prompt_tokens",
     "completion_tokens", "tags", "metadata", "truncated"),
)

_MACRO_FN = re.compile(r"\$__(timeFilter|timeFilter_ms|timeInterval|dateFilter)\(([^()]*)\)")
_CONDITIONAL_ALL = "$__conditionalAll("
_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")
_PLACEHOLDER = re.compile(r"\{(window_minutes|baseline_minutes|min_samples)\}")


def bind(sql: str, **values: int) -> str:
    """Fill the ``{window_minutes}``-style placeholders of an alert query (the only braces in this SQL)."""
    return _PLACEHOLDER.sub(lambda m: str(int(values[m.group(1)])), sql)


def _percent_encode(text: str, keep: str) -> str:
    """Each UTF-8 byte of ``text`` outside ASCII letters, digits and ``keep`` as ``%XX`` (upper-case hex)."""
    return "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in keep) else f"%{b:02X}"
                   for b in text.encode("utf-8"))


def option_value(name: str) -> str:
    """A variable option's value as ClickHouse's ``encodeURLComponent(name)`` gives it (``VARIABLES``): every byte
    but ``A-Z a-z 0-9 - _ . ~`` percent-encoded."""
    return _percent_encode(name, "-_.~")


def grafana_percentencode(value: str | Sequence[str]) -> str:
    """Grafana's ``${var:percentencode}``, byte for byte (scenes' and the legacy ``formatRegistry``): a list is
    joined as ``{a,b}`` first ("like glob, but url escaped"), then ``encodeURIComponentStrict``: JavaScript's
    ``encodeURIComponent`` (which keeps ``A-Z a-z 0-9 - _ . ! ~ * ' ( )``) with ``! ' ( ) *`` encoded too."""
    text = value if isinstance(value, str) else "{" + ",".join(value) + "}"
    uri_component = _percent_encode(text, "-_.!~*'()")
    return re.sub(r"[!'()*]", lambda m: f"%{ord(m.group(0)):X}", uri_component)


def _macro_args(sql: str, open_paren: int) -> list[str] | None:
    """The plugin's ``getMacroArgs``: the arguments of the call whose ``(`` is at ``open_paren``, split at its
    top-level commas by counting brackets (string literals are not special to it)."""
    args, depth, last = [], 0, open_paren + 1
    for match in re.finditer(r"[(),]", sql[open_paren:]):
        at = open_paren + match.start()
        depth += {"(": 1, ")": -1}.get(match.group(0), 0)
        if match.group(0) == "," and depth == 1:
            args.append(sql[last:at])
            last = at + 1
        if depth == 0:
            args.append(sql[last:at])
            return args
    return None


def _conditional_all(sql: str, variables: Mapping[str, Sequence[str] | None]) -> str:
    """The plugin's ``applyConditionalAll``: from the last ``$__conditionalAll(phrase, $var)`` back to the first,
    the phrase, or ``1=1`` when ``$var`` selects All (here: absent, None or empty)."""
    while (at := sql.rfind(_CONDITIONAL_ALL)) != -1:
        args = _macro_args(sql, at + len(_CONDITIONAL_ALL) - 1)
        if args is None or len(args) != 2:
            return sql
        phrase, var = args
        if not variables.get(var.strip()[1:]):
            phrase = "1=1"
        sql = sql.replace(f"{_CONDITIONAL_ALL}{args[0]},{args[1]})", phrase, 1)  # JavaScript: the first only
    return sql


def render(
    sql: str,
    *,
    start: datetime,
    end: datetime,
    interval_s: int = 60,
    variables: Mapping[str, Sequence[str] | None] | None = None,
) -> str:
    """Expand the Grafana macros and dashboard variables as ``grafana-clickhouse-datasource`` and Grafana do.

    ``variables`` maps a variable to the names selected (the options' text); a variable that is absent, None or
    empty selects All (``$__conditionalAll`` becomes ``1=1``). A selection is substituted as Grafana would: the
    options' values (``option_value``) through the variable's format. Only the formats vigil's SQL uses are
    known: ``percentencode`` and ``text``; any other is an error, so no format goes unchecked.
    """
    variables = variables or {}
    from_s, to_s = int(start.timestamp()), int(end.timestamp())
    from_ms, to_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)

    def macro(match: re.Match[str]) -> str:
        name, column = match.group(1), match.group(2).strip()
        if name == "timeFilter":
            # The end's own second is in range (a DateTime64 row at hh:mm:ss.5 is after toDateTime(hh:mm:ss)).
            return f"{column} >= toDateTime({from_s}) AND {column} <= toDateTime({math.ceil(end.timestamp())})"
        if name == "timeFilter_ms":
            return (f"{column} >= fromUnixTimestamp64Milli({from_ms}) AND "
                    f"{column} <= fromUnixTimestamp64Milli({to_ms})")
        if name == "dateFilter":
            return f"{column} >= toDate('{start:%Y-%m-%d}') AND {column} <= toDate('{end:%Y-%m-%d}')"
        return f"toStartOfInterval(toDateTime({column}), INTERVAL {max(int(interval_s), 1)} second)"

    def variable(match: re.Match[str]) -> str:
        name, fmt = match.group(1) or match.group(3), match.group(2)
        if name not in variables:
            return match.group(0)
        names = list(variables[name] or [])
        if fmt == "percentencode":
            return grafana_percentencode([option_value(n) for n in names])
        if fmt == "text":
            return " + ".join(names)
        raise ValueError(f"variable format {fmt or '(none)'} of ${name} is not one render knows how Grafana applies")

    sql = _conditional_all(sql, variables)
    sql = _MACRO_FN.sub(macro, sql)
    sql = (sql.replace("$__fromTime_ms", f"fromUnixTimestamp64Milli({from_ms})")
              .replace("$__toTime_ms", f"fromUnixTimestamp64Milli({to_ms})")
              .replace("$__fromTime", f"toDateTime({from_s})")
              .replace("$__toTime", f"toDateTime({to_s})")
              .replace("$__interval_s", str(max(int(interval_s), 1))))
    return _VARIABLE.sub(variable, sql)
