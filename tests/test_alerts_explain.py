"""`vigil alerts check --explain` answers "why didn't my alert fire?" for every rule and every monitor it watches:
the verdict, and how much more history or how many more turns a rule needs (``vigil.worker.alerts.explain``)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from vigil.schemas import VigilConfig
from vigil.worker.alerts.check import evaluate
from vigil.worker.alerts.explain import explain

from tests.pipeline import migrated_home
from tests.quality_seed import insert_scores, series

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CONFIG = {
    "judges": [{"name": "offline", "kind": "baseline"}],
    "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "offline"},
                 {"name": "silent", "scorer": "answer_relevancy", "judge": "offline"}],
    "alerts": [{"name": "score-regression", "kind": "regression"},
               {"name": "floor", "kind": "threshold", "threshold": 0.5},
               {"name": "failures", "kind": "failure_rate"}],
}


def _a_new_install(store) -> None:
    """Ten scores of one monitor in the last half hour: what a first day looks like."""
    insert_scores(store, series(start=NOW - timedelta(minutes=30), minutes=30, every_s=180,
                                value=lambda rng, i: 0.7, monitor="relevancy"))


def test_every_rule_says_for_every_monitor_why_it_cannot_tell_yet_and_how_much_more_it_needs(store):
    _a_new_install(store)
    config = VigilConfig.model_validate(CONFIG)

    lines = explain(evaluate(store, config, now=NOW), config)

    assert lines[0].startswith("score-regression (regression: a drop against each monitor's own baseline")
    assert lines[1].startswith("  cannot tell: relevancy: learning the baseline: 10 scores over 0.")
    assert lines[1].endswith("needs 30 over 24 h: 20 more scores and 23.6 more hours")
    assert lines[2] == "  cannot tell: silent: no scores yet: nothing to measure"
    assert lines[3] == "floor (threshold: below 0.5 over 60 min; every monitor)"
    assert lines[4].endswith(": mean 0.70 over the last 60 min: too few turns (n=10, need 30: 20 more)")
    assert lines[5] == "  cannot tell: silent: no scores in the last 60 min: nothing to measure"
    assert lines[6] == "failures (failure_rate: above 0.2 over 60 min; every monitor)"
    assert len(lines) == 9


def test_the_command_prints_the_explanation_for_a_store_without_scores(tmp_path):
    path = tmp_path / "vigil.yaml"
    path.write_text(VigilConfig.model_validate(CONFIG).model_dump_json(), encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if k != "CLICKHOUSE_DSN"}, "VIGIL_HOME": str(tmp_path / "home")}
    migrated_home(tmp_path / "home")

    run = subprocess.run([sys.executable, "-m", "vigil.worker", "alerts", "check", "--config", str(path),
                          "--explain"], env=env, capture_output=True, text=True, timeout=120, check=False)

    assert run.returncode == 0, run.stderr
    assert "  cannot tell: relevancy: no scores yet: nothing to measure" in run.stdout.splitlines()
    assert "  cannot tell: silent: no scores in the last 60 min: nothing to measure" in run.stdout.splitlines()
    assert run.stdout.splitlines()[-1] == "0 alert event(s)"


def test_a_failed_runs_rule_explains_per_agent_not_per_monitor(store):
    store.insert("pipeline_events", [[NOW - timedelta(minutes=5), "default", "support-bot", "", "received", f"t{i}"]
                                     for i in range(10)],
                 column_names=["event_time", "project", "agent", "monitor", "stage", "trace_id"])
    config = VigilConfig.model_validate(CONFIG | {"alerts": [{"name": "runs", "kind": "failed_runs"}]})

    lines = explain(evaluate(store, config, now=NOW), config)
    quiet = explain(evaluate(store, config, now=NOW + timedelta(hours=2)), config)

    assert lines == ["runs (failed_runs: above 0.05 over 60 min; every agent)",
                     "  cannot tell: support-bot: 10 runs in the last 60 min: too few to tell (need 30: 20 more)"]
    assert quiet == ["runs (failed_runs: above 0.05 over 60 min; every agent)",
                     "  cannot tell: no runs received in the last 60 min"]
