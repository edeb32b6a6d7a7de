"""The regression detector's saved state is data anyone with write access to the store can spoil: one corrupt or
future-dated ``detector_checks`` row made every `vigil alerts check` exit 1, for every rule, for good. Such a row is
set aside (one log line), that monitor's state is rebuilt from its history, and every other rule is checked as
usual: here both rules fire on a real drop in their monitor's scores, whatever their saved rows said."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from tests.quality_seed import insert_scores, series

RULES = {"relevancy-drop": "relevancy", "alignment-drop": "alignment"}
SPOILED = "relevancy-drop"


def seed(store, now: datetime) -> None:
    """A day of scores near 0.8 for both monitors, then an hour near 0.4."""
    for seq, monitor in enumerate(RULES.values()):
        insert_scores(store, series(start=now - timedelta(days=1), minutes=23 * 60, every_s=120, monitor=monitor,
                                    value=lambda rng, i: rng.gauss(0.8, 0.1), seed=seq))
        insert_scores(store, series(start=now - timedelta(hours=1), minutes=59, every_s=30, monitor=monitor,
                                    value=lambda rng, i: rng.gauss(0.4, 0.1), seed=10 + seq))


def spoil(store, now: datetime, how: str) -> None:
    """A row for one rule's monitor: a state that is not JSON, or a sound-looking one dated a year ahead."""
    checked_at = now + timedelta(days=365) if how == "future" else now - timedelta(minutes=5)
    state = "{not json" if how == "corrupt" else '{"mode": "watching", "last_score_at": 4102444800.0}'
    store.insert("detector_checks", [[checked_at, SPOILED, RULES[SPOILED], "1", "watching", 0, 0.0, 1.0, 0, None,
                                      None, None, None, None, None, "", checked_at, state]],
                 column_names=["checked_at", "rule", "monitor", "scorer_version", "mode", "firing", "statistic",
                               "threshold", "scores", "baseline_mean", "recent_mean", "since", "drop", "drop_low",
                               "drop_high", "reason", "cursor", "state"])


def alerts_check(config, dsn: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIGIL_DEBUG": "1"}  # the command's log lines on stderr (a worker's beat logs them anyway)
    return subprocess.run([sys.executable, "-m", "vigil.worker", "alerts", "check", "--config", str(config),
                           "--dsn", dsn], env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("how", ["corrupt", "future"])
def test_alerts_check_sets_a_spoiled_state_aside_and_checks_every_rule(store, chdb_dsn, tmp_path, how):
    now = datetime.now(UTC)
    seed(store, now)
    spoil(store, now, how)
    store.close()
    config = tmp_path / "vigil.yaml"
    config.write_text(yaml.safe_dump({
        "judges": [{"name": "baseline", "kind": "baseline"}],
        "monitors": [{"name": m, "scorer": "answer_relevancy", "judge": "baseline"} for m in RULES.values()],
        "alerts": [
        {"name": rule, "kind": "regression", "monitor": monitor, "warmup_minutes": 60, "baseline_minutes": 2880,
         "min_samples": 30} for rule, monitor in RULES.items()]}))

    first = alerts_check(config, chdb_dsn)

    assert first.returncode == 0, first.stderr[-3000:]
    assert "2 alert event(s)" in first.stdout, first.stdout
    fired = [line for line in first.stdout.splitlines() if "fell from" in line]
    assert len(fired) == 2 and any("relevancy" in line for line in fired) and any("alignment" in line for line in fired)
    set_aside = [line for line in first.stderr.splitlines() if "detector state set aside" in line]
    assert len(set_aside) == 1 and SPOILED in set_aside[0], first.stderr[-3000:]

    again = alerts_check(config, chdb_dsn)

    assert again.returncode == 0, again.stderr[-3000:]
    healed = [line for line in again.stderr.splitlines() if "detector state set aside" in line]
    assert len(healed) == (0 if how == "corrupt" else 1)  # a sound row now stands; a future one is never read
