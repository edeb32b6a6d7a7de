"""Anchor sets (``vigil.worker.alerts.anchors``) tell the judge's drift from the agent's: labelled turns that never
change, re-scored by the monitor's current judge through the real judge stack (the `openai` client against the
scripted judge server, the limiter in a real redis-server), kept in chDB, and read by the regression alert when it
fires. A real `vigil worker` runs the anchor sets on its own schedule."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
import yaml
from vigil.schemas import VigilConfig
from vigil.worker.alerts import check_alerts
from vigil.worker.alerts.anchors import ANCHOR_COLUMNS, attribute, run_anchors
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.pipeline.runtime import Runtime
from vigil.worker.settings import get_settings
from vigil.worker.sinks.otel import Telemetry
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge, message_text
from tests.pipeline import WorkerProcess, wait_while_alive
from tests.quality_seed import SCORE_COLUMNS, insert_scores, series

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(minutes=60)
WEEK = 7 * 24 * 60
GOOD = "You can return it within 30 days for a full refund."
BAD = "Our office dog is called Biscuit."


def anchor_items(n: int = 12) -> list[dict]:
    """Half good answers, half off-topic ones, labelled by people."""
    return [{"id": f"a{i}", "human": 1 if i % 2 == 0 else 0,
             "turn": {"trace_id": f"anchor-{i}", "agent": "support-bot",
                      "input": [{"role": "user", "content": f"Can I return item {i}?"}],
                      "output": GOOD if i % 2 == 0 else BAD}} for i in range(n)]


class Judges:
    """A fair judge (a good answer's statement is relevant, an off-topic one is not) that can turn harsh (nothing is
    relevant), as a provider's silent model update might."""

    def __init__(self) -> None:
        self.harsh = False

    def __call__(self, body: dict) -> Reply:
        step = body["response_format"]["json_schema"]["name"]
        text = "\n".join(message_text(m) for m in body["messages"])
        if step.endswith("preprocess"):  # the answer's one statement
            return Reply.json({"statements": [BAD if BAD in text else GOOD]})
        verdict = "no" if self.harsh or BAD in text else "yes"
        return Reply.json({"results": [{"result": verdict, "reason": "scripted"}]})


def config(server: ScriptedJudge, dataset) -> VigilConfig:
    return VigilConfig.model_validate({
        "judges": [{"name": "llm", "base_url": server.base_url, "model": "judge-model", "api_key_env": "K"}],
        "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm", "reason": "template",
                      "anchors": {"dataset": str(dataset)}}],
        "alerts": [{"name": "relevancy-drop", "kind": "regression", "method": "window", "window_minutes": 60,
                    "baseline_minutes": WEEK, "min_samples": 30, "min_effect_size": 0.5, "p_value": 0.01}]})


@pytest.fixture
def stack(tmp_path, monkeypatch):
    """A redis-server for the judge's limiter and the budget ledger, and the scripted judge with a switch."""
    dataset = tmp_path / "anchors.jsonl"
    dataset.write_text("\n".join(json.dumps(i) for i in anchor_items()))
    judges = Judges()
    with EmbeddedRedis() as server, ScriptedJudge(judges) as judge:
        monkeypatch.setenv("REDIS_URL", server.url)
        monkeypatch.setenv("K", "key")
        get_settings.cache_clear()
        cfg = config(judge, dataset)
        rt = Runtime(config=cfg, redis=redis.Redis.from_url(server.url), telemetry=Telemetry.create())
        yield rt, judges, judge
    get_settings.cache_clear()


def live_scores(store, *, recent_mean: float) -> None:
    """A week of the agent's scores at 0.8, then the last hour at ``recent_mean``."""
    insert_scores(store, series(start=NOW - timedelta(minutes=WEEK + 60), minutes=WEEK, every_s=600,
                                value=lambda rng, i: rng.gauss(0.8, 0.1), seed=1))
    insert_scores(store, series(start=SINCE, minutes=60, every_s=30,
                                value=lambda rng, i: rng.gauss(recent_mean, 0.1), seed=2))


def anchor_runs(rt, store, judges, *, harsh_from: datetime | None) -> None:
    """Anchor runs every 20 minutes over the last three hours; the judge turns harsh at ``harsh_from``."""
    insert = lambda rows: store.insert("anchor_scores", rows, column_names=list(ANCHOR_COLUMNS))
    for minutes in range(-180, 1, 20):
        at = NOW + timedelta(minutes=minutes)
        judges.harsh = harsh_from is not None and at >= harsh_from
        assert run_anchors(rt, insert, rt.config.monitors[0], now=at) == 12


def test_a_judge_that_turned_harsh_with_the_agent_unchanged_is_named_as_the_cause(stack, store):
    rt, judges, _ = stack
    live_scores(store, recent_mean=0.45)  # what a harsher judge does to the agent's scores
    anchor_runs(rt, store, judges, harsh_from=SINCE)

    [event] = check_alerts(store, rt.config, now=NOW, notifier=lambda e: None)

    assert "likely judge drift" in event.message, event.message
    assert "the judge's verdicts on the anchor set changed since 11:00 (0.50 to 0.00 on the same 12 turns)" in \
        event.message
    stored = store.query("SELECT message FROM alerts FINAL").result_rows
    assert stored == [(event.message,)]  # the same sentence for the report, Grafana and the webhook


def test_an_agent_that_got_worse_with_the_judge_unchanged_is_named_as_the_cause(stack, store):
    rt, judges, _ = stack
    live_scores(store, recent_mean=0.45)
    anchor_runs(rt, store, judges, harsh_from=None)

    [event] = check_alerts(store, rt.config, now=NOW, notifier=lambda e: None)

    assert event.message.endswith("; the judge is stable on the anchor set (0.50 to 0.50 on the same 12 turns): "
                                  "the agent changed"), event.message


def test_without_an_anchor_run_since_the_change_the_alert_does_not_guess(stack, store):
    rt, _, _ = stack
    live_scores(store, recent_mean=0.45)
    insert = lambda rows: store.insert("anchor_scores", rows, column_names=list(ANCHOR_COLUMNS))
    run_anchors(rt, insert, rt.config.monitors[0], now=SINCE - timedelta(minutes=30))

    [event] = check_alerts(store, rt.config, now=NOW, notifier=lambda e: None)

    assert attribute(store, "relevancy", SINCE, NOW) is None
    assert "anchor" not in event.message


def test_an_anchor_run_asks_the_judge_again_instead_of_reading_the_reply_cache(stack, store):
    rt, judges, server = stack
    cached = rt.config.model_copy(deep=True)
    cached.judges[0].cache_ttl_s = 3600
    rt = Runtime(config=cached, redis=rt.redis, telemetry=rt.telemetry)
    insert = lambda rows: store.insert("anchor_scores", rows, column_names=list(ANCHOR_COLUMNS))
    run_anchors(rt, insert, rt.config.monitors[0], now=SINCE)
    asked = len(server.requests)
    judges.harsh = True
    run_anchors(rt, insert, rt.config.monitors[0], now=NOW)
    assert len(server.requests) == 2 * asked, "every item asked again, none served from the cache"


def test_a_worker_re_scores_its_anchor_set_on_its_own_schedule(redis_url, tmp_path):
    redis.Redis.from_url(redis_url).flushdb()
    dataset = tmp_path / "anchors.jsonl"
    dataset.write_text("\n".join(json.dumps(i) for i in anchor_items(6)))
    with ScriptedJudge(Judges()) as server:
        path = tmp_path / "vigil.yaml"
        path.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "base_url": server.base_url, "model": "judge-model", "api_key_env": "K"}],
            "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm", "reason": "template",
                          "anchors": {"dataset": str(dataset), "every_minutes": 60}}]}))
        worker = WorkerProcess(redis_url, tmp_path / "vigil", path, K="key", VIGIL_ALERTS_INTERVAL="1").start()
        try:
            wait_while_alive(worker, lambda: len(server.requests) >= 12, "the anchor set's judge calls")
            time.sleep(3)  # a later tick within the hour runs no second set
        finally:
            assert worker.stop() == 0
    assert len(server.requests) == 12  # 6 items x 2 calls, once
    rows = connect(worker.dsn).query("SELECT item_id, status, score FROM anchor_scores FINAL ORDER BY item_id")
    assert [(r[0], r[1], r[2]) for r in rows.result_rows] == [
        (f"a{i}", "scored", 1.0 if i % 2 == 0 else 0.0) for i in range(6)]


def test_a_judge_model_that_changed_is_a_segment_like_any_other(store):
    """Given a monitor whose judge answered from a new model for half the turns since the change, the segment that
    explains the drop is that judge model."""
    from vigil.worker.alerts.watch import segments

    def with_model(rows: list[list], model: str) -> list[list]:
        for row in rows:
            row[SCORE_COLUMNS.index("judge_model")] = model
        return rows

    insert_scores(store, with_model(series(start=SINCE - timedelta(hours=20), minutes=20 * 60, every_s=300,
                                           value=lambda rng, i: rng.gauss(0.8, 0.05), seed=1), "judge-v1"))
    insert_scores(store, with_model(series(start=SINCE, minutes=60, every_s=60,
                                           value=lambda rng, i: rng.gauss(0.8, 0.05), seed=2), "judge-v1"))
    insert_scores(store, with_model(series(start=SINCE + timedelta(seconds=30), minutes=60, every_s=60,
                                           value=lambda rng, i: rng.gauss(0.3, 0.05), seed=3), "judge-v2"))

    blame = segments(store, "relevancy", "1", SINCE, NOW)

    assert (blame.segments[0].key, blame.segments[0].value) == ("judge_model", "judge-v2")


def test_a_backtest_from_the_store_says_what_the_anchors_say_of_each_alert(stack, store):
    from vigil.worker.alerts.backtest import backtest, stored_scores

    rt, judges, _ = stack
    live_scores(store, recent_mean=0.45)
    anchor_runs(rt, store, judges, harsh_from=SINCE)
    config = rt.config.model_copy(update={"alerts": [
        rt.config.alerts[0].model_copy(update={"method": "sequential"})]})

    found = backtest(config, stored_scores(store, ["relevancy"], NOW - timedelta(days=8)), client=store)

    [alert] = [a for a in found if a.fired_at >= SINCE]  # the week before may have its own episodes
    assert alert.sentence.endswith(": likely judge drift"), alert.sentence
