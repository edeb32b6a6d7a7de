"""A flood of negative feedback through the SDK into a real `vigil worker` (with its writer): the markers it leaves
are capped (the oldest dropped), each trace gets one rescore task however often it is complained about, at most
``VIGIL_FEEDBACK_MAX_RESCORES`` wait at once (the rest counted as skipped), only traces ingest has taken in get one,
and they wait on `vigil.feedback`, never in front of the alert checks; every feedback row is still stored."""

from __future__ import annotations

import uuid

import pytest
import redis
from vigil.producers import Monitor
from vigil.worker.pipeline.feedback import MARKS, RESCORING, SKIPPED, rescore_key
from vigil.worker.store import connect

from tests.abuse import wait_until
from tests.pipeline import WorkerProcess
from tests.test_feedback_pipeline import CONFIG, _turns_by_half_sampling, capture


@pytest.fixture
def worker(redis_url, tmp_path):
    config = tmp_path / "vigil.yaml"
    config.write_text(CONFIG.replace("BASE_URL", "http://127.0.0.1:9/v1"))  # never reached: no turn is stored
    process = WorkerProcess(redis_url, tmp_path / "vigil", config, VIGIL_TEST_JUDGE_KEY="k",
                            VIGIL_FEEDBACK_MAX_MARKS="500", VIGIL_FEEDBACK_MAX_RESCORES="20")
    yield process.start()
    if process.process.poll() is None:
        process.stop()


def test_negative_feedback_on_traces_that_do_not_exist_costs_a_bounded_number_of_markers_and_rescores(
        redis_url, worker, tmp_path):
    monitor = Monitor(redis_url, project="acme", agent="support-bot", spool_path=tmp_path / "spool.jsonl")
    ghosts = [uuid.uuid4().hex for _ in range(3000)]
    hammered = uuid.uuid4().hex
    for trace_id in ghosts:
        assert monitor.feedback(trace_id, "thumbs", False, author="u1")
    for i in range(3000):  # one trace complained about by 3,000 authors
        assert monitor.feedback(hammered, "thumbs", False, author=f"u{i}")
    assert monitor.flush(timeout=60)
    monitor.shutdown(timeout=10)

    client = redis.Redis.from_url(redis_url)
    sent = lambda: sum(1 for _ in client.scan_iter(match="vigil.feedback.rescore.*"))  # noqa: E731
    state = lambda: (client.llen("vigil.ingest"), int(client.get(SKIPPED) or 0), sent())  # noqa: E731
    # no trace exists: each is counted as skipped (the one complained about 3,000 times once per batch it came in)
    wait_until(lambda: state()[0] == 0 and state()[1] >= 3001, timeout=120,
               what="every feedback batch to be ingested")
    markers = sum(1 for _ in client.scan_iter(match="vigil.feedback.negative.*"))

    assert client.zcard(MARKS) == markers == 500
    assert sent() == 0 and client.zcard(RESCORING) == 0
    assert client.llen("vigil.alerts") == 0, "no rescore waits in front of the alert checks"
    wait_until(lambda: client.llen("vigil.write") == 0, timeout=60, what="the feedback rows to be written")
    assert worker.stop() == 0
    assert connect(worker.dsn).query("SELECT count() FROM feedback FINAL").result_rows[0][0] == 6000


def test_only_a_trace_that_was_ingested_gets_a_rescore_task_the_others_are_counted_as_skipped(
        redis_url, worker, tmp_path):
    monitor = Monitor(redis_url, project="acme", agent="support-bot", spool_path=tmp_path / "spool.jsonl")
    _, (real, *_) = _turns_by_half_sampling(1)
    client = redis.Redis.from_url(redis_url)
    capture(monitor, real)
    assert monitor.flush(timeout=30)
    # taken off the queue is not yet ingested: the task marks its trace seen when it is done (acks late)
    wait_until(lambda: client.llen("vigil.ingest") == 0 and client.hlen("unacked") == 0
               and client.llen("vigil.write") == 0, timeout=60, what="the turn to be ingested")
    ghosts = [uuid.uuid4().hex for _ in range(10)]
    for trace_id in [*ghosts, real["trace_id"]]:
        assert monitor.feedback(trace_id, "thumbs", False)
    assert monitor.flush(timeout=30)
    monitor.shutdown(timeout=10)
    # the ghosts' feedback counted skipped and the real trace's rescore task made: the real trace's feedback task may
    # still be running when the queue is empty (acks late), and the rescore task it makes stays reserved by the worker
    # (its judge is never reached), so an empty unacked list is no sign of done
    wait_until(lambda: int(client.get(SKIPPED) or 0) >= 10 and client.llen("vigil.ingest") == 0
               and client.exists(rescore_key("acme", real["trace_id"])), timeout=60,
               what="the ghosts' feedback to be skipped and the real trace's rescore task")

    assert not any(client.exists(rescore_key("acme", g)) for g in ghosts)
    assert int(client.get(SKIPPED)) == 10
    assert worker.stop() == 0
