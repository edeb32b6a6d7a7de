"""Beyond the score queue's bound, ingest sheds load: it samples less, deterministically on the trace id, and
counts every shed turn in the funnel. A real `vigil worker`, a real Redis, the scripted judge slowed down."""

from __future__ import annotations

import threading
import time

import redis
import yaml
from vigil.worker.pipeline.app import SCORE_QUEUE
from vigil.worker.pipeline.sampling import sample_point
from vigil.worker.pipeline.shedding import admitted_fraction
from vigil.worker.report import build_report
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, send, wait_drained

BOUND, BATCH, BATCHES, CONCURRENCY = 6, 10, 24, 2
STATEMENTS = {"statements": ["Returns are accepted within 30 days."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers the question"}]}


def slow_judge(body: dict) -> Reply:
    step = body["response_format"]["json_schema"]["name"]
    return Reply.json(STATEMENTS if step.endswith("preprocess") else VERDICTS, delay=0.1)


def write_config(server: ScriptedJudge, path) -> None:
    path.write_text(yaml.safe_dump({
        "judges": [{"name": "llm", "kind": "openai", "base_url": server.base_url, "model": "judge-model",
                    "api_key_env": "VIGIL_TEST_JUDGE_KEY", "rpm": 60000}],
        "monitors": [{"name": "all", "scorer": "answer_relevancy", "judge": "llm", "reason": "template"},
                     {"name": "half", "scorer": "answer_relevancy", "judge": "llm", "reason": "template",
                      "sampling_rate": 0.5}],
    }))


def test_the_admitted_fraction_is_what_fits_under_the_bound():
    assert admitted_fraction(depth=0, bound=10, wanted=4) == 1.0
    assert admitted_fraction(depth=8, bound=10, wanted=4) == 0.5
    assert admitted_fraction(depth=12, bound=10, wanted=4) == 0.0
    assert admitted_fraction(depth=10**6, bound=0, wanted=4) == 1.0  # 0: no bound


def test_beyond_the_bound_turns_are_shed_and_counted_the_queue_stays_near_it_and_every_turn_is_accounted_for(
        redis_url, tmp_path):
    """Given a score queue bounded at 6 and a judge slower than the turns arrive, when 240 turns are ingested, then
    some are shed (stage ``shed`` in `vigil report`'s funnel), the score queue never holds more than the bound plus
    one batch per ingest thread, every received turn is scored, shed or skipped, and the half-rate monitor's turns
    are a subset of the full-rate one's (the cut is on the trace id)."""
    client = redis.Redis.from_url(redis_url)
    config = tmp_path / "vigil.yaml"
    turns = [make_turn(i) for i in range(BATCH * BATCHES)]
    depths: list[int] = []
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            depths.append(client.llen(SCORE_QUEUE))
            time.sleep(0.005)

    with ScriptedJudge(slow_judge) as server:
        write_config(server, config)
        for i in range(BATCHES):
            send(redis_url, turns[i * BATCH:(i + 1) * BATCH])
        watcher = threading.Thread(target=watch)
        watcher.start()
        worker = WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_SCORE_QUEUE_MAX=str(BOUND),
                               VIGIL_TEST_JUDGE_KEY="k").start("-c", str(CONCURRENCY))
        try:
            wait_drained(redis_url, worker, timeout=300)
        finally:
            watching.set()
            watcher.join()
            assert worker.stop() == 0

    store = connect(worker.dsn)
    stages = {(monitor, stage): set(trace_ids) for monitor, stage, trace_ids in store.query(
        "SELECT monitor, stage, groupUniqArray(trace_id) FROM pipeline_events GROUP BY monitor, stage").result_rows}
    scored = {(monitor, trace_id) for monitor, trace_id in store.query(
        "SELECT monitor, trace_id FROM scores FINAL WHERE status = 'scored'").result_rows}
    funnel = {row.monitor: row for row in build_report(store).funnel}

    received = {t["trace_id"] for t in turns}
    assert stages[("", "received")] == received
    assert len(depths) > 0 and max(depths) <= BOUND + CONCURRENCY * BATCH
    for monitor in ("all", "half"):
        shed, sampled = stages.get((monitor, "shed"), set()), stages[(monitor, "sampled")]
        skipped = stages.get((monitor, "skipped"), set())
        assert shed, f"{monitor}: nothing was shed"
        assert shed | sampled | skipped == received and not (shed & sampled or shed & skipped or sampled & skipped)
        assert {t for m, t in scored if m == monitor} == sampled
        assert funnel[monitor].shed == len(shed) and funnel[monitor].received == len(received)
        rate = 1.0 if monitor == "all" else 0.5
        assert all(sample_point(t) < rate for t in shed), "only turns the monitor samples can be shed"
    assert {t for m, t in scored if m == "half"} <= {t for m, t in scored if m == "all"}
