"""The periodic regression check on real parts: the writer process runs it on chDB, on its own schedule and for
`vigil beat`'s task, once per interval whoever asks."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import redis
import yaml
from vigil.schemas import Score, ScoreStatus, score_id
from vigil.worker.sinks.write_queue import push
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess


def scores(now: datetime) -> list[Score]:
    """A week at mean 0.8, then the last hour at mean 0.3: a regression any sound test calls."""
    rng = random.Random(7)
    rows = []
    points = [(now - timedelta(days=7) + timedelta(minutes=20 * i), 0.8) for i in range(7 * 72 - 6)]
    points += [(now - timedelta(minutes=58) + timedelta(minutes=i), 0.3) for i in range(50)]
    for i, (at, mean) in enumerate(points):
        trace = f"{i:032x}"
        rows.append(Score(score_id=score_id(trace, None, "relevancy", "1"), trace_id=trace, project="shop",
                          agent="support-bot", environment="prod", monitor="relevancy", scorer="answer_relevancy",
                          scorer_version="1", status=ScoreStatus.SCORED,
                          score=min(max(rng.gauss(mean, 0.1), 0.0), 1.0), reason="seeded", trace_time=at))
    return rows


def _worker(redis_url, tmp_path, url: str) -> WorkerProcess:
    config = tmp_path / "vigil.yaml"
    config.write_text(yaml.safe_dump({
        "judges": [{"name": "offline", "kind": "baseline"}],
        "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "offline"}],
        "alerts": [{"name": "relevancy-drop", "kind": "regression", "monitor": "relevancy", "window_minutes": 60,
                    "min_samples": 20, "webhook_url": url}],
    }))
    push(redis.Redis.from_url(redis_url), [("scores", scores(datetime.now(UTC)))])
    return WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_ALERTS_INTERVAL="1")


def _wait_for_webhook(worker: WorkerProcess, bodies: list) -> None:
    deadline = time.monotonic() + 90
    while not bodies:
        assert worker.process.poll() is None, worker.output()[-3000:]
        assert time.monotonic() < deadline, worker.output()[-3000:]
        time.sleep(0.2)


def test_the_worker_alone_runs_the_regression_check_and_fires_the_alert_to_the_webhook(
        redis_url, tmp_path, webhook_receiver):
    """The README's step 3: a worker with its writer checks the alert rules; no `vigil beat` runs here."""
    url, bodies = webhook_receiver
    worker = _worker(redis_url, tmp_path, url).start()
    try:
        _wait_for_webhook(worker, bodies)
    finally:
        assert worker.stop() == 0
    assert bodies[0]["text"].startswith(":rotating_light: [vigil] FIRING: relevancy")


def test_one_check_claims_each_interval_whoever_asks(redis_url):
    """Writers and a beat's task all ask; one per interval gets it, and the next interval is free again."""
    from vigil.worker.pipeline.beat import CHECK_CLAIM_KEY, claim_check

    client = redis.Redis.from_url(redis_url)
    assert [claim_check(client, 60) for _ in range(3)] == [True, False, False]
    ttl_ms = client.pttl(CHECK_CLAIM_KEY)
    assert 0 < ttl_ms <= 54_000, "the claim lapses before the next interval's tick"
    client.delete(CHECK_CLAIM_KEY)  # the TTL passing, without waiting for it
    assert claim_check(client, 60)


def test_beat_schedules_the_regression_check_and_the_writer_fires_the_alert_to_the_webhook(
        redis_url, tmp_path, webhook_receiver):
    url, bodies = webhook_receiver
    worker = _worker(redis_url, tmp_path, url).start()
    beat = subprocess.Popen([sys.executable, "-m", "vigil.worker", "beat"], env=worker.env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait_for_webhook(worker, bodies)
    finally:
        beat.terminate()
        beat.wait(30)
        assert worker.stop() == 0

    assert bodies[0]["text"].startswith(":rotating_light: [vigil] FIRING: relevancy")
    rows = connect(worker.dsn).query("SELECT rule, monitor, state FROM alerts FINAL").result_rows
    assert rows == [("relevancy-drop", "relevancy", "firing")]
    assert len(bodies) == 1, "renotify interval: a firing alert is not re-sent on every beat"
