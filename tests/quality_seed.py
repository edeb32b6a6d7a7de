"""Seeded ClickHouse data for the dashboard, report and alert tests: scores, judge calls, pipeline events, traces,
human feedback."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from clickhouse_connect.driver.client import Client

__all__ = ["SCORE_COLUMNS", "insert_scores", "score_row", "seed_everything"]

SCORE_COLUMNS = ["score_id", "trace_id", "span_id", "project", "agent", "environment", "monitor", "scorer",
                 "scorer_version", "status", "score", "scale", "label", "reason", "error_type", "judge",
                 "judge_model", "judge_calls", "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms",
                 "trace_time", "scored_at"]


def _id(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]


def score_row(*, at: datetime, score: float | None, agent: str = "support-bot", monitor: str = "relevancy",
              status: str = "scored", version: str = "1", project: str = "shop", seq: int = 0,
              reason: str = "", lag_s: float = 2.0) -> list:
    trace_id = _id("trace", project, agent, at.isoformat(), seq)
    label = "" if score is None else ("good" if score >= 0.5 else "bad")
    return [_id(trace_id, monitor, version), trace_id, "", project, agent, "prod", monitor, "answer_relevancy",
            version, status, score, 1.0, label, reason or f"score {score}", "" if status != "failed" else "timeout",
            "baseline", "baseline-1", 2, 300, 40, 0.002, 120.0, at, at + timedelta(seconds=lag_s)]


def insert_scores(client: Client, rows: Iterable[list]) -> None:
    client.insert("scores", list(rows), column_names=SCORE_COLUMNS)


def series(*, start: datetime, minutes: int, every_s: int, value: Callable[[random.Random, int], float],
           seed: int = 0, **kw) -> list[list]:
    """One score every ``every_s`` seconds over ``minutes``, each from ``value(rng, i)`` clamped to 0..1."""
    rng = random.Random(seed)
    count = minutes * 60 // every_s
    return [score_row(at=start + timedelta(seconds=i * every_s), score=min(max(value(rng, i), 0.0), 1.0),
                      seq=i, **kw) for i in range(count)]


def seed_everything(client: Client, *, now: datetime) -> None:
    """Two agents, two monitors, two scorer versions; unscored and failed turns; judge errors and a 401; a funnel;
    four turns a broker reset lost; three traces that joined another trace's run; a firing regression alert and a paused judge; two kept `vigil eval` runs of one scorer by two judges."""
    rows = []
    for agent_i, agent in enumerate(("support-bot", "assistant")):
        for monitor in ("relevancy", "alignment"):
            for i in range(240):  # one turn every 5 minutes over the last 20 hours
                at = now - timedelta(minutes=5 * i + 1)
                status = "failed" if i % 37 == 0 else "unscored" if i % 23 == 0 else "scored"
                score = None if status != "scored" else round(0.2 + 0.7 * ((i * 7 + agent_i) % 10) / 10, 2)
                rows.append(score_row(at=at, score=score, agent=agent, monitor=monitor, status=status,
                                      version="2" if i < 60 else "1", seq=i,
                                      reason=f"{agent}/{monitor} turn {i}: answer was off-topic"))
            for i in range(120):  # and one every 30 seconds in the last hour, enough for the alert windows
                at = now - timedelta(seconds=30 * i + 15)
                status = "failed" if i % 11 == 0 else "scored"
                rows.append(score_row(at=at, score=None if status == "failed" else 0.3 + 0.05 * (i % 10),
                                      agent=agent, monitor=monitor, status=status, version="2", seq=1000 + i,
                                      reason=f"{agent}/{monitor} recent turn {i}"))
    insert_scores(client, rows)
    traces = [[r[1], r[3], r[4], "prod", r[22], f"question {n}", r[22]] for n, r in enumerate(rows)]
    client.insert("traces", traces, column_names=["trace_id", "project", "agent", "environment", "started_at",
                                                  "question", "received_at"])
    calls = []
    for i, r in enumerate(rows[:400]):
        status = "http_429" if i % 40 == 0 else "ok"
        calls.append([_id("call", i), r[0], r[1], r[3], r[6], "answer_relevancy", "baseline", "baseline-1",
                      "analyze", 300, 40, 0.002, 100.0 + i % 50, status, 1, i % 9 == 0, r[22]])
    calls.append([_id("call", "refused"), "", "", "shop", "alignment", "prompt_alignment", "openai-main", "gpt-x",
                  "analyze", 0, 0, 0.0, 30.0, "http_401", 1, False, now - timedelta(minutes=2)])
    client.insert("judge_calls", calls, column_names=[
        "call_id", "score_id", "trace_id", "project", "monitor", "scorer", "judge", "model", "step", "prompt_tokens",
        "completion_tokens", "cost_usd", "latency_ms", "status", "attempt", "cached", "called_at"])
    events = []
    for r in rows:
        trace_id, project, agent, monitor, status, at = r[1], r[3], r[4], r[6], r[9], r[22]
        events.append([at, project, agent, "", "received", trace_id])
        events.append([at, project, agent, monitor, "sampled", trace_id])
        events.append([r[23], project, agent, monitor, status, trace_id])
    # The broker came back empty 3 hours ago: four turns sampled before then never got an outcome (lost); two sampled
    # after it are still waiting (not lost). The first epoch, two days ago, was a new broker: not a reset.
    for i in range(4):
        events.append([now - timedelta(hours=4, minutes=i), "shop", "support-bot", "relevancy", "sampled",
                       _id("lost", i)])
    for i in range(2):
        events.append([now - timedelta(hours=1, minutes=i), "shop", "support-bot", "relevancy", "sampled",
                       _id("waiting", i)])
    # Three traces of support-bot whose work joined its runs in other traces (span links), per turn monitor as the
    # worker counts them: no turn of their own.
    events += [[now - timedelta(hours=2, minutes=i), "shop", "support-bot", monitor, "joined", _id("joined", i)]
               for i in range(3) for monitor in ("relevancy", "alignment")]
    client.insert("pipeline_events", events,
                  column_names=["event_time", "project", "agent", "monitor", "stage", "trace_id"])
    client.insert("broker_epochs", [
        ["first", "", "run-1", now - timedelta(days=2), now - timedelta(days=2)],
        ["second", "first", "run-2", now - timedelta(hours=3), now - timedelta(hours=3) + timedelta(seconds=5)],
    ], column_names=["epoch", "previous", "run_id", "reset_at", "started_at"])
    feedback = [[_id("feedback", r[1]), r[1], "thumbs", float(n % 4 != 0), 1.0, "", "user", "", r[22]]
                for n, r in enumerate(rows) if n % 3 == 0]  # on a third of the turns; every fourth thumbs down
    client.insert("feedback", feedback, column_names=["feedback_id", "trace_id", "name", "value", "scale", "comment",
                                                      "source", "author", "created_at"])
    client.insert("alerts", [
        [_id("alert", 1), "score-regression", "regression", "shop", "support-bot", "relevancy", "", "firing",
         now - timedelta(minutes=30), now - timedelta(minutes=30), 0.41, 0.62, 120, 2000, 1e-9, 1.4,
         "relevancy on shop/support-bot: mean 0.41 over the last 60 min vs 0.62 baseline"],
        [_id("alert", 2), "judge-paused", "judge_paused", "", "", "", "openai-main", "firing",
         now - timedelta(minutes=2), now - timedelta(minutes=2), 1.0, None, 0, 0, None, None,
         "judge openai-main is paused (http_401)"],
    ], column_names=["alert_id", "rule", "kind", "project", "agent", "monitor", "judge", "state", "fired_at",
                     "updated_at", "recent_mean", "baseline_mean", "recent_n", "baseline_n", "p_value",
                     "effect_size", "message"])
    client.insert("detector_checks", [  # the sequential detector's checks of the last hour: crossing 1.0 at 30 min
        [now - timedelta(minutes=m), "score-regression", "relevancy", "2", "firing" if m <= 30 else "watching",
         int(m <= 30), 1.0 + (30 - m) / 60, 1.0, 2, 0.62, 0.41 if m <= 30 else None,
         now - timedelta(minutes=50) if m <= 30 else None, 0.21 if m <= 30 else None, None, None, "seeded",
         now - timedelta(minutes=m), "{}"]
        for m in range(60, 0, -1)
    ], column_names=["checked_at", "rule", "monitor", "scorer_version", "mode", "firing", "statistic", "threshold",
                     "scores", "baseline_mean", "recent_mean", "since", "drop", "drop_low", "drop_high", "reason",
                     "cursor", "state"])
    client.insert("dead_letters", [
        [_id("dead", i), now - timedelta(minutes=5 * i), "vigil.ingest", "output: Input should be a valid string",
         "invalid_turn", json.dumps({"trace_id": f"dead-{i}", "project": "shop", "agent": "support-bot",
                                     "output": {"text": "a dict"}})]
        for i in range(1, 4)
    ], column_names=["dead_id", "received_at", "queue", "reason", "error_type", "payload"])
    client.insert("judge_evals", [
        [_id("eval", model), "correctness.jsonl", "jsonl", "ab12", "rag_correctness", "1", "baseline" if model ==
         "baseline-word-overlap-v1" else "openai-main", model, 200, 198, 2, 0, 100, accuracy, accuracy - 0.07,
         accuracy + 0.06, 0.63, 0.4, now - timedelta(days=day), now - timedelta(days=day) + timedelta(minutes=3)]
        for day, model, accuracy in ((3, "baseline-word-overlap-v1", 0.61), (1, "gpt-x", 0.78))
    ], column_names=["run_id", "dataset", "dataset_format", "dataset_sha256", "scorer", "scorer_version", "judge",
                     "judge_model", "n", "scored", "unscored", "failed", "pairs", "pairwise_accuracy",
                     "pairwise_accuracy_low", "pairwise_accuracy_high", "reference_pairwise_accuracy", "spearman",
                     "started_at", "ended_at"])
