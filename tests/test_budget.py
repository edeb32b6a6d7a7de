"""Judge budgets (``vigil.worker.pipeline.budget``): a monitor's daily spend is kept under its budget by pacing the
sampling rate through the day, not by a cliff; scores keep their inclusion probability so means stay unbiased; a USD
budget over a judge with no price is refused. The ledger runs on a real redis-server; the worker test runs a real
`vigil worker` against the scripted judge."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import subprocess
import sys

import pytest
import redis
import yaml
from vigil.schemas import Score
from vigil.schemas.config import Budget, load_config
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.pipeline import budget
from vigil.worker.pipeline.sampling import sampled
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

MIDNIGHT = dt.datetime(2026, 11, 2, tzinfo=dt.UTC).timestamp()
COST = 0.005  # USD per judged turn


def traffic(turns: int, seed: int = 7) -> list[tuple[float, str, float]]:
    """A day of (time, trace id, score): more traffic by day than by night, and a quality that moves with the hour
    (worse in the evening), so a mean that ignored the rate changes would be biased."""
    rng = random.Random(seed)
    out = []
    for i in range(turns):
        while True:  # diurnal intensity by rejection: 0.3 at night, 1.0 at 14:00
            t = rng.uniform(0, budget.DAY_S)
            hour = t / 3600
            if rng.random() < 0.3 + 0.7 * math.exp(-((hour - 14) / 5) ** 2):
                break
        quality = 0.65 - 0.25 * math.exp(-((hour - 20) / 2.5) ** 2) + rng.gauss(0, 0.15)
        out.append((MIDNIGHT + t, f"trace-{seed}-{i}", min(1.0, max(0.0, quality))))
    return sorted(out)


def score(monitor: str, value: float, rate: float, at: float) -> Score:
    return Score(trace_id="t", project="p", agent="a", environment="e", score_id="s", monitor=monitor, scorer="x",
                 scorer_version="1", status="scored", score=value, judge_calls=1, cost_usd=COST, prompt_tokens=300,
                 completion_tokens=20, inclusion=rate, trace_time=dt.datetime.fromtimestamp(at, dt.UTC))


def config(usd_per_day: float) -> object:
    from vigil.schemas import VigilConfig

    return VigilConfig.model_validate({
        "judges": [{"name": "j", "base_url": "http://127.0.0.1:9", "price_per_prompt_token": 1e-5}],
        "monitors": [{"name": "m", "scorer": "answer_relevancy", "judge": "j",
                      "budget": {"usd_per_day": usd_per_day}}]})


@pytest.fixture
def ledger():
    with EmbeddedRedis() as server:
        yield redis.Redis.from_url(server.url)


def test_a_day_at_twice_the_budget_ends_under_it_with_every_hour_monitored_and_an_unbiased_mean(ledger):
    """Given a day whose traffic, all judged, would cost twice the budget, when every turn goes through the pace the
    ingest task uses (the real ledger in Redis, read before each turn, the score recorded after it), then the day's
    spend ends under the budget, every hour has scores, and the mean weighted by inclusion probability holds the
    full-sampling mean within its 95% interval."""
    day = traffic(4000)
    full_cost = len(day) * COST
    cfg = config(usd_per_day=full_cost / 2)
    kept: list[tuple[float, float, float]] = []  # (time, score, inclusion)
    for at, trace_id, value in day:
        paced = budget.paces(ledger, cfg, at)
        pace = budget.current(paced, "m")
        rate = budget.rate_for(cfg.monitors[0], pace)
        admitted = not pace.paused and sampled(trace_id, rate)
        pipe = ledger.pipeline()
        budget.count(pipe, {"m": 1}, {"m": int(admitted)}, at)
        pipe.execute()
        if admitted:
            budget.record(ledger, [score("m", value, rate, at)], at)
            kept.append((at, value, rate))

    spent = budget.read_spend(ledger, ["m"], day[-1][0])["m"].usd
    assert spent <= full_cost / 2
    assert spent > 0.8 * full_cost / 2, "the budget is used, not left idle"
    hours = {int((at - MIDNIGHT) // 3600) for at, _, _ in kept}
    assert hours == set(range(24)), f"hours without a score: {sorted(set(range(24)) - hours)}"
    full_mean = sum(v for _, _, v in day) / len(day)
    mean, se = budget.weighted_mean((v, p) for _, v, p in kept)
    assert abs(mean - full_mean) <= 1.96 * se
    assert len({round(p, 3) for _, _, p in kept}) > 1, "the rate changed during the day"


def test_a_burst_at_the_start_of_a_day_cannot_start_more_turns_than_the_budget_has_room_for(ledger):
    """Given yesterday's cost per turn and a budget for 10 turns, when 100 turns arrive at once (one ingest batch,
    read once), then 10 are admitted and the rest wait for tomorrow: what is in flight counts as spent."""
    cfg = config(usd_per_day=10 * COST)
    yesterday = MIDNIGHT - 3600
    budget.record(ledger, [score("m", 0.5, 1.0, yesterday)], yesterday)
    now = MIDNIGHT + 60
    paced = budget.paces(ledger, cfg, now)
    admitted = 0
    for _ in range(100):
        pace = budget.current(paced, "m")
        if not pace.paused:
            budget.take(paced, "m")
            admitted += 1
    assert admitted == 10


def test_before_any_cost_is_known_only_a_few_turns_are_in_flight():
    spend = budget.Spend(admitted=budget.PROBE_TURNS)
    assert budget.pace(Budget(usd_per_day=1.0), spend, seconds_left=3600, owner="m").paused
    assert not budget.pace(Budget(usd_per_day=1.0), budget.Spend(), seconds_left=3600, owner="m").paused


@pytest.mark.parametrize(("spend", "factor"), [
    pytest.param(budget.Spend(usd=1.0, admitted=100, done=100, due_per_s=0.001), 1.0, id="quiet day: full rate"),
    pytest.param(budget.Spend(usd=1.0, admitted=100, done=100, due_per_s=1.0), 1.5 / 864, id="busy day: paced"),
])
def test_the_rate_is_paced_to_what_the_rest_of_the_day_can_afford_and_never_above_the_configured_rate(spend, factor):
    pace = budget.pace(Budget(usd_per_day=2.5), spend, seconds_left=86_400, owner="monitor m")
    assert pace.factor == pytest.approx(factor, rel=0.01)
    assert pace.factor <= 1.0


def test_a_spent_budget_pauses_the_monitor_and_says_so_in_words():
    pace = budget.pace(Budget(tokens_per_day=1000), budget.Spend(tokens=1000, admitted=5, done=5), seconds_left=600,
                       owner="monitor relevancy")
    assert pace.paused
    assert pace.reason == ("monitor relevancy's judge budget of 1,000 tokens a day is spent (1,000 tokens); "
                           "it resumes at 00:00 UTC")


def test_a_usd_budget_over_a_judge_with_no_price_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "vigil.yaml"
    path.write_text(yaml.safe_dump({
        "judges": [{"name": "gpt", "base_url": "http://127.0.0.1:9", "model": "m"}],
        "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "gpt",
                      "budget": {"usd_per_day": 5}}]}))
    result = subprocess.run([sys.executable, "-m", "vigil.worker", "config", "check", str(path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "monitors.0.budget.usd_per_day" in result.stderr + result.stdout or \
        "monitors[0].budget.usd_per_day" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    with pytest.raises(Exception, match="tokens_per_day"):
        load_config(path)
    path.write_text(path.read_text().replace("usd_per_day: 5", "tokens_per_day: 50000"))
    assert load_config(path).monitors[0].budget.tokens_per_day == 50_000  # a token budget needs no price


STATEMENTS = {"statements": ["Returns are accepted within 30 days."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers the question"}]}


def test_a_worker_under_a_token_budget_stops_judging_at_it_and_the_rest_is_counted_as_budget(redis_url, tmp_path):
    """Given a real worker whose monitor may spend 2,000 judge tokens a day and a judge whose calls cost 200 tokens
    each (two calls a turn), when 30 turns arrive, then the judge is asked for no more than the budget allows,
    the turns not judged are stage ``budget`` in the funnel, every score records its inclusion probability, and
    `vigil judge status` shows the spend and the pause."""
    redis.Redis.from_url(redis_url).flushdb()

    def script(body: dict) -> Reply:
        step = body["response_format"]["json_schema"]["name"]
        return Reply.json(STATEMENTS if step.endswith("preprocess") else VERDICTS, prompt_tokens=180,
                          completion_tokens=20)

    path = tmp_path / "vigil.yaml"
    with ScriptedJudge(script) as server:
        path.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "base_url": server.base_url, "model": "judge-model",
                        "api_key_env": "VIGIL_TEST_JUDGE_KEY"}],
            "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm", "reason": "template",
                          "budget": {"tokens_per_day": 2000}}]}))
        send(redis_url, [make_turn(i) for i in range(30)])
        worker = WorkerProcess(redis_url, tmp_path / "vigil", path, VIGIL_TEST_JUDGE_KEY="k").start()
        try:
            wait_drained(redis_url, worker)
            env = {**os.environ, "REDIS_URL": redis_url, "VIGIL_CONFIG": str(path), "VIGIL_TEST_JUDGE_KEY": "k"}
            check = subprocess.run([sys.executable, "-m", "vigil.worker", "config", "check", str(path)], env=env,
                                   capture_output=True, text=True, check=False)
            status = subprocess.run([sys.executable, "-m", "vigil.worker", "judge", "status", "--dsn",
                                     f"chdb://{tmp_path}/none"], env=env, capture_output=True, text=True,
                                    check=False)
        finally:
            assert worker.stop() == 0
    asked_tokens = 200 * len(server.requests)
    assert asked_tokens <= 2000 + 2 * 200, "at most one turn's calls beyond the budget (a turn's cost is learnt)"
    store = connect(worker.dsn)
    stages = dict(store.query("SELECT stage, uniqExact(trace_id) FROM pipeline_events WHERE monitor = 'relevancy' "
                              "GROUP BY stage").result_rows)
    scored = stages.get("scored", 0)
    assert 0 < scored < 30 and stages.get("budget", 0) == 30 - scored
    assert {r[0] for r in store.query("SELECT inclusion FROM scores FINAL").result_rows} == {1.0}
    assert "relevancy" in status.stdout and "paused" in status.stdout, status.stdout + status.stderr
    assert "relevancy" in check.stdout and "paused" in check.stdout and "2,000 tokens" in check.stdout, check.stdout


def test_an_anchor_set_that_is_not_a_file_is_a_config_error_naming_the_field(tmp_path):
    path = tmp_path / "vigil.yaml"
    path.write_text(yaml.safe_dump({
        "judges": [{"name": "j", "kind": "baseline"}],
        "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "j",
                      "anchors": {"dataset": str(tmp_path / "missing.jsonl")}}]}))
    result = subprocess.run([sys.executable, "-m", "vigil.worker", "config", "check", str(path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "monitors.0.anchors.dataset" in result.stderr + result.stdout


def test_a_backtest_replays_a_budget_and_says_how_many_scores_each_day_kept(tmp_path):
    """Given two days of scores whose judge calls would cost twice a monitor's budget, `vigil alerts backtest` says
    per day how many scores the budget would have kept (about half, never more than it allows) and replays the
    rules on those."""
    day = traffic(1500, seed=3)
    lines = []
    for offset in (0, budget.DAY_S):
        lines += [json.dumps({"ts": at + offset, "monitor": "m", "score": value, "trace_id": f"{trace_id}-{offset}",
                              "cost_usd": COST, "tokens": 320}) for at, trace_id, value in day]
    scores = tmp_path / "scores.jsonl"
    scores.write_text("\n".join(lines))
    path = tmp_path / "vigil.yaml"
    path.write_text(yaml.safe_dump({
        "judges": [{"name": "j", "base_url": "http://127.0.0.1:9", "price_per_prompt_token": 1e-5}],
        "monitors": [{"name": "m", "scorer": "answer_relevancy", "judge": "j",
                      "budget": {"usd_per_day": len(day) * COST / 2}}],
        "alerts": [{"name": "drop", "kind": "regression"}]}))
    result = subprocess.run([sys.executable, "-m", "vigil.worker", "alerts", "backtest", "--config", str(path),
                             "--scores", str(scores), "--json"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    days = json.loads(result.stdout)["budget"]
    assert [d["day"] for d in days] == ["2026-11-02", "2026-11-03"]
    for d in days:
        assert d["scores"] == len(day)
        assert 0.4 * len(day) <= d["kept"] <= len(day) / 2
