"""The sequential regression detector: its calibration on a stationary stream, detection, resolution, the change
point, segment ranking (pure), and on a real chDB store: restart survival, backfill silence, the first check's
rebuild from history with its segments, and the backtest taking the live check's decisions."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from click.testing import CliRunner
from vigil.schemas import AlertRule, VigilConfig
from vigil.worker.alerts import check_alerts
from vigil.worker.alerts.model import Subject
from vigil.worker.alerts.replay import episodes, params_for
from vigil.worker.alerts.segments import SegmentCounts, rank_segments
from vigil.worker.alerts.sequential import DetectorParams, DetectorState, step
from vigil.worker.cli import main as cli

from tests.quality_seed import SCORE_COLUMNS, insert_scores, score_row

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
T0 = NOW.timestamp()
PARAMS = DetectorParams(warmup_s=3600.0, min_samples=30, half_life_s=2 * 86400.0)


def _stream(rng, *, start, minutes, rate, mean, sd=0.15, pass_fail=False):
    n = rng.poisson(rate * minutes)
    ts = np.sort(start + rng.random(n) * minutes * 60)
    xs = (rng.random(n) < mean).astype(float) if pass_fail else np.clip(rng.normal(mean, sd, n), 0, 1)
    return ts, xs


def _run(state, ts, xs, *, every=60.0, params=PARAMS):
    """Step per ``every`` seconds of stream; yields (check time, decision)."""
    at = np.ceil(ts / every) * every
    for t in np.unique(at):
        mask = at == t
        state, decision = step(state, ts[mask], xs[mask], float(t), params)
        yield state, float(t), decision


@pytest.mark.parametrize("pass_fail", [False, True], ids=["continuous", "pass-fail"])
def test_false_alarms_on_a_stationary_stream_stay_near_the_stated_rate(pass_fail):
    """Given a rate of 30 false alarms a month (one a day), 20 days of unchanged scores raise about 20 alarms;
    a Gaussian threshold on pass/fail scores would raise several times that."""
    rng = np.random.default_rng(7)
    params = PARAMS.model_copy(update={"false_alarms_per_month": 30.0})
    ts, xs = _stream(rng, start=T0, minutes=21 * 1440, rate=2, mean=0.85 if pass_fail else 0.7, pass_fail=pass_fail)
    fired, watching_from = 0, None
    for state, at, decision in _run(DetectorState(), ts, xs, every=600.0, params=params):
        watching_from = watching_from or (at if state.mode != "warmup" else None)
        fired += decision.fired
    days = (ts[-1] - watching_from) / 86400
    assert 0.25 * days <= fired <= 2.0 * days, (fired, days)


def test_a_drop_fires_with_its_start_and_size_then_resolves_when_the_scores_recover():
    rng = np.random.default_rng(3)
    before = _stream(rng, start=T0, minutes=2 * 1440, rate=5, mean=0.7)
    onset = T0 + 2 * 86400
    during = _stream(rng, start=onset, minutes=120, rate=5, mean=0.6)  # 0.67 sd lower
    after = _stream(rng, start=onset + 7200, minutes=600, rate=5, mean=0.7)
    ts, xs = (np.concatenate(p) for p in zip(before, during, after, strict=True))
    fired = resolved = None
    for _, at, decision in _run(DetectorState(), ts, xs):
        if decision.fired and fired is None:
            fired = decision
        if decision.resolved and fired is not None:
            resolved = at
            break

    assert fired is not None and fired.breach is True
    assert onset <= fired.crossed_at <= onset + 3600
    assert abs(fired.since - onset) <= 20 * 60
    assert fired.drop_low <= 0.1 <= fired.drop_high
    assert resolved is not None and resolved > onset + 7200


def test_unchanged_scores_do_not_fire_and_say_why():
    rng = np.random.default_rng(5)
    ts, xs = _stream(rng, start=T0, minutes=1440, rate=5, mean=0.8, sd=0.1)
    decisions = [d for _, _, d in _run(DetectorState(), ts, xs)]

    assert not any(d.fired for d in decisions)
    assert decisions[0].breach is None and decisions[0].reason.startswith("learning the baseline")
    assert decisions[-1].breach is False and "of its threshold" in decisions[-1].reason


def test_the_segment_that_dropped_ranks_first_and_ubiquitous_values_are_left_out():
    total = SegmentCounts(key="", value="", recent_n=100, recent_sum=68.0, baseline_n=1000, baseline_sum=800.0)
    counts = [
        SegmentCounts(key="model", value="gpt-x", recent_n=30, recent_sum=12.0, baseline_n=300, baseline_sum=240.0),
        SegmentCounts(key="model", value="gpt-y", recent_n=70, recent_sum=56.0, baseline_n=700, baseline_sum=560.0),
        SegmentCounts(key="tag", value="rag", recent_n=100, recent_sum=68.0, baseline_n=1000, baseline_sum=800.0),
        SegmentCounts(key="release", value="v2", recent_n=30, recent_sum=12.0),
    ]

    ranked = rank_segments(counts, total)

    assert [(s.key, s.value) for s in ranked] == [("model", "gpt-x"), ("release", "v2")]
    first = ranked[0]
    assert first.n == 30 and first.traffic == pytest.approx(0.3) and first.recent_mean == pytest.approx(0.4)
    assert first.baseline_mean == pytest.approx(0.8) and first.share == pytest.approx(1.0)
    assert ranked[1].baseline_mean is None  # a release the baseline never saw


# --- on the store -------------------------------------------------------------------------------------------------

RULE = {"name": "relevancy", "kind": "regression", "warmup_minutes": 60, "baseline_minutes": 2 * 1440,
        "min_samples": 30}


def config(**overrides) -> VigilConfig:
    return VigilConfig(judges=[{"name": "baseline", "kind": "baseline"}],
                       monitors=[{"name": "relevancy", "scorer": "answer_relevancy", "judge": "baseline"}],
                       alerts=[AlertRule(**RULE | overrides)])


def rows(rng, *, start, minutes, rate, mean, model="m-1", lag_s=2.0, seq=0):
    ts, xs = _stream(rng, start=start.timestamp(), minutes=minutes, rate=rate, mean=mean, sd=0.1)
    out = [score_row(at=datetime.fromtimestamp(t, UTC), score=float(x), seq=seq + i, lag_s=lag_s)
           for i, (t, x) in enumerate(zip(ts, xs, strict=True))]
    return out, [(r[1], model) for r in out]


def insert(store, scored) -> None:
    data, models = scored
    insert_scores(store, data)
    at = SCORE_COLUMNS.index("trace_time")
    store.insert("traces", [[r[1], r[3], r[4], "prod", r[at], model, {"release": model}]
                            for r, (_, model) in zip(data, models, strict=True)],
                 column_names=["trace_id", "project", "agent", "environment", "started_at", "model", "metadata"])


class Recorder(list):
    def __call__(self, event) -> None:
        self.append(event)


def test_the_first_check_rebuilds_from_history_and_names_the_segment(store):
    """Given a day of stored scores and a drop in the last hour on one model only, the first check ever replays
    the history, fires, and puts that model first among the segments."""
    rng = np.random.default_rng(11)
    insert(store, rows(rng, start=NOW - timedelta(days=1), minutes=23 * 60, rate=3, mean=0.8))
    insert(store, rows(rng, start=NOW - timedelta(hours=1), minutes=60, rate=2, mean=0.8, seq=10**6))
    insert(store, rows(rng, start=NOW - timedelta(hours=1), minutes=60, rate=2, mean=0.45, model="m-2", seq=2 * 10**6))

    (event,) = check_alerts(store, config(), now=NOW, notifier=Recorder())

    assert (event.action, event.monitor) == ("fired", "relevancy")
    assert NOW - timedelta(hours=1, minutes=20) <= event.since <= NOW
    assert event.drop_low <= 0.175 <= event.drop_high
    assert (event.segments[0].key, event.segments[0].value) in {("model", "m-2"), ("release", "m-2")}
    assert "m-2" in event.text()
    stored = store.query("SELECT since, drop, segments FROM alerts FINAL").result_rows
    assert stored[0][0] is not None and json.loads(stored[0][2])[0]["value"] == "m-2"
    (check,) = store.query("SELECT firing, statistic >= 1, mode FROM detector_checks").result_rows
    assert check == (1, 1, "firing")


def test_a_restart_resumes_from_the_saved_state_not_the_history(store):
    """The state is read back from the last check's row: with the history deleted after the first check, a drop
    still fires (a rebuild from what is left would still be warming up)."""
    rng = np.random.default_rng(12)
    insert(store, rows(rng, start=NOW - timedelta(days=1), minutes=24 * 60, rate=3, mean=0.8))
    assert check_alerts(store, config(), now=NOW, notifier=Recorder()) == []
    store.command("ALTER TABLE scores DELETE WHERE trace_time < {t:DateTime64(3)} SETTINGS mutations_sync = 1",
                  parameters={"t": NOW})

    insert(store, rows(rng, start=NOW, minutes=30, rate=3, mean=0.4, seq=10**6))
    events = check_alerts(store, config(), now=NOW + timedelta(minutes=30), notifier=Recorder())

    assert [e.action for e in events] == ["fired"]
    (mode,) = store.query("SELECT argMax(mode, checked_at) FROM detector_checks").result_rows[0]
    assert mode == "firing"


def test_a_rule_naming_a_monitor_checks_only_that_monitor_before_and_after_it_has_a_state(store):
    """A sequential rule with ``monitor`` set writes check rows for that monitor alone: on its first check (rebuilt
    from the history) and on the next (from the saved state), while another monitor's scores keep arriving."""
    start = NOW - timedelta(hours=2)
    insert_scores(store, [score_row(at=start + timedelta(minutes=i), score=0.8, monitor=monitor, seq=i)
                          for i in range(120) for monitor in ("relevancy", "other")])
    cfg = config(monitor="relevancy")
    check_alerts(store, cfg, now=NOW, notifier=Recorder())
    insert_scores(store, [score_row(at=NOW + timedelta(seconds=i), score=0.8, monitor=monitor, seq=10**6 + i)
                          for i in range(30) for monitor in ("relevancy", "other")])
    check_alerts(store, cfg, now=NOW + timedelta(minutes=1), notifier=Recorder())

    checked = store.query("SELECT monitor, count() FROM detector_checks GROUP BY monitor").result_rows
    assert checked == [("relevancy", 2)]


def test_a_backfill_of_old_low_scores_does_not_page(store):
    rng = np.random.default_rng(13)
    insert(store, rows(rng, start=NOW - timedelta(days=1), minutes=24 * 60, rate=3, mean=0.8))
    assert check_alerts(store, config(), now=NOW, notifier=Recorder()) == []

    old = NOW - timedelta(days=1, hours=6)  # last week's turns replayed now: scored now, for turns of long ago
    insert(store, rows(rng, start=old, minutes=120, rate=5, mean=0.2, lag_s=(NOW - old).total_seconds(), seq=10**6))
    insert(store, rows(rng, start=NOW, minutes=10, rate=3, mean=0.8, seq=2 * 10**6))

    assert check_alerts(store, config(), now=NOW + timedelta(minutes=10), notifier=Recorder()) == []
    (scored,) = store.query("SELECT argMax(scores, checked_at) FROM detector_checks").result_rows[0]
    assert 10 <= scored <= 60  # the live ten minutes, none of the backfill


def test_backtest_takes_the_same_decisions_as_the_live_check(store, tmp_path):
    """The same scores, checked live minute by minute and replayed by ``vigil alerts backtest --json``: the same
    alert fires at the same minute and resolves at the same minute."""
    rng = np.random.default_rng(14)
    history = rows(rng, start=NOW - timedelta(hours=2), minutes=120, rate=2, mean=0.8)
    drop = rows(rng, start=NOW, minutes=40, rate=4, mean=0.5, seq=10**6)
    back = rows(rng, start=NOW + timedelta(minutes=40), minutes=80, rate=4, mean=0.8, seq=2 * 10**6)
    insert(store, history)
    cfg = config()
    live = check_alerts(store, cfg, now=NOW, notifier=Recorder())
    at = SCORE_COLUMNS.index("trace_time")
    for minute in range(1, 121):
        now = NOW + timedelta(minutes=minute)
        batch = [r for r in drop[0] + back[0] if now - timedelta(minutes=1) < r[at] <= now]
        if batch:
            insert_scores(store, batch)
        live += check_alerts(store, cfg, now=now, notifier=Recorder())
    lines = tmp_path / "scores.jsonl"
    lines.write_text("".join(json.dumps({"ts": r[at].isoformat(), "monitor": "relevancy", "score": r[10]}) + "\n"
                             for r in history[0] + drop[0] + back[0]))
    cfg_path = tmp_path / "vigil.yaml"
    cfg_path.write_text(json.dumps(cfg.model_dump(mode="json", exclude_none=True)))

    result = CliRunner().invoke(cli, ["alerts", "backtest", "--config", str(cfg_path), "--scores", str(lines),
                                      "--json"])

    assert result.exit_code == 0, result.output
    (replayed,) = json.loads(result.output)["alerts"]
    assert set(replayed) == {"rule", "monitor", "fired_at", "resolved_at", "since", "estimate", "segments", "agents",
                             "sentence"}
    fired = [e for e in live if e.action == "fired"]
    resolved = [e for e in live if e.action == "resolved"]
    assert len(fired) == 1 and len(resolved) == 1
    assert datetime.fromisoformat(replayed["fired_at"]) == fired[0].fired_at
    assert datetime.fromisoformat(replayed["resolved_at"]) == resolved[0].updated_at
    assert math.isclose(replayed["estimate"], fired[0].drop, rel_tol=1e-6)


def test_episodes_use_the_rules_parameters():
    rule = AlertRule(**RULE | {"false_alarms_per_month": 5})
    params = params_for(rule)
    assert params.false_alarms_per_month == 5 and params.warmup_s == 3600 and params.half_life_s == 86400
    found, state = episodes(rule, Subject(monitor="m"), np.asarray([T0]), np.asarray([0.5]))
    assert found == [] and state.mode == "warmup"


def test_evaluate_keeps_the_reason_a_rule_did_not_fire(store):
    """What ``vigil alerts check --explain`` prints: every rule's verdict, sent or not, with why."""
    from vigil.worker.alerts.check import evaluate

    rng = np.random.default_rng(15)
    insert(store, rows(rng, start=NOW - timedelta(days=1), minutes=24 * 60, rate=2, mean=0.8))

    (outcome,) = evaluate(store, config(), now=NOW)

    assert outcome.event is None and outcome.verdict.breach is False
    assert outcome.verdict.message.startswith("relevancy: watching: highest CUSUM")
    assert "1 false alarm(s) a month" in outcome.verdict.message


def test_a_backtest_of_the_store_finds_the_drop_and_names_its_segment_from_the_traces(store):
    """``vigil alerts backtest --since``: the stored scores replayed, the segments by the live check's query."""
    from vigil.worker.alerts.backtest import backtest, stored_scores

    rng = np.random.default_rng(16)
    insert(store, rows(rng, start=NOW - timedelta(days=1), minutes=24 * 60, rate=2, mean=0.8))
    insert(store, rows(rng, start=NOW, minutes=60, rate=2, mean=0.8, seq=10**6))
    insert(store, rows(rng, start=NOW, minutes=60, rate=2, mean=0.4, model="m-2", seq=2 * 10**6))

    streams = stored_scores(store, ["relevancy"], NOW - timedelta(days=2))
    (alert,) = backtest(config(), streams, client=store)

    assert alert.monitor == "relevancy" and NOW <= alert.fired_at <= NOW + timedelta(minutes=30)
    assert alert.resolved_at is None and 0 < alert.estimate_low < alert.estimate < alert.estimate_high
    assert (alert.segments[0].key, alert.segments[0].value) in {("model", "m-2"), ("release", "m-2")}


def test_a_backtest_names_an_unknown_monitor_and_a_rule_it_cannot_replay(tmp_path):
    from vigil.worker.alerts.backtest import backtest, read_scores

    lines = tmp_path / "scores.jsonl"
    lines.write_text('{"ts": 1772400000, "monitor": "other", "score": 0.5}\n')
    with pytest.raises(ValueError, match="monitor 'other' is not in the config"):
        backtest(config(), read_scores(lines))
    lines.write_text('{"ts": 1772400000, "monitor": "relevancy", "score": 1.5}\n')
    with pytest.raises(ValueError, match=r"scores.jsonl:1: score: Input should be less than or equal to 1"):
        read_scores(lines)
    window = config(method="window")
    with pytest.raises(ValueError, match="no sequential regression rule"):
        backtest(window, {})


def test_the_backtest_command_replays_the_store(store, chdb_dsn, tmp_path):
    """``vigil alerts backtest --config FILE --since …`` reads the store (it crashed on a name clash: TypeError)."""
    rng = np.random.default_rng(17)
    insert(store, rows(rng, start=NOW - timedelta(days=1), minutes=24 * 60, rate=2, mean=0.8))
    insert(store, rows(rng, start=NOW, minutes=60, rate=2, mean=0.4, seq=10**6))
    store.close()
    cfg_path = tmp_path / "vigil.yaml"
    cfg_path.write_text(json.dumps(config().model_dump(mode="json", exclude_none=True)))

    result = CliRunner().invoke(cli, ["alerts", "backtest", "--config", str(cfg_path), "--dsn", chdb_dsn,
                                      "--since", (NOW - timedelta(days=2)).isoformat()])

    assert result.exit_code == 0, result.output
    assert re.search(r"fired 2026-03-02 \d\d:\d\d UTC \(relevancy; .*\): relevancy on support-bot fell from 0\.\d\d to "
                     r"0\.\d\d between \d\d:\d\d and \d\d:\d\d UTC", result.output)
    assert re.search(r"\n1 alert\(s\) from \d+ score\(s\) of 1 monitor\(s\), 1 rule\(s\)$", result.output.rstrip())
