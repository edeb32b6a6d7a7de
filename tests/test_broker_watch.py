"""An unreachable broker is said in one line, with its host:port and the cause: at start a bounded wait then an exit,
later one line per retry interval and one when it is back (``vigil.worker.pipeline.broker_watch``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import redis
from vigil.worker.pipeline.broker_watch import (
    BrokerUnreachable,
    BrokerWatch,
    cause,
    wait_for_broker,
    where,
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Clock:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _failing(times: int):
    """A ping that fails ``times`` times as a refused connection would, then answers."""
    calls = {"n": 0}

    def ping(client: redis.Redis) -> None:
        calls["n"] += 1
        if calls["n"] <= times:
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    return ping


@pytest.mark.parametrize(("url", "expected"), [
    ("redis://:pw@10.0.0.5:6380/0", "10.0.0.5:6380"),
    ("rediss://cache.internal/1", "cache.internal:6379"),
    ("sentinel://:pw@s1:26379,s2:26380/0?master_name=mymaster", "Sentinel s1:26379,s2:26380 (master mymaster)"),
], ids=["redis with a password", "TLS on the default port", "Sentinel"])
def test_the_broker_is_named_by_host_and_port_never_by_its_password(url, expected):
    assert where(url) == expected


def test_the_cause_is_the_servers_or_the_os_words_without_the_address_again():
    assert cause(redis.ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")) == \
        "Connection refused"
    assert cause(redis.ConnectionError("Error -2 connecting to nohost.invalid:6379. Name or service not known.")) \
        == "Name or service not known"


def test_an_unreachable_broker_at_start_is_one_line_then_an_error_once_the_wait_is_over():
    port, said = _closed_port(), []

    with pytest.raises(BrokerUnreachable) as gave_up:
        wait_for_broker(f"redis://:secret@127.0.0.1:{port}/0", 2.0, say=said.append)

    assert said == [(f"cannot reach the broker at 127.0.0.1:{port} (REDIS_URL): Connection refused; retrying for up "
                     "to 2 s (--broker-wait)")]
    assert str(gave_up.value).startswith(f"cannot reach the broker at 127.0.0.1:{port} (REDIS_URL): Connection "
                                         "refused; gave up after ")
    assert "secret" not in str(gave_up.value)


def test_no_wait_at_all_is_the_error_line_alone():
    said = []

    with pytest.raises(BrokerUnreachable):
        wait_for_broker(f"redis://127.0.0.1:{_closed_port()}/0", 0, say=said.append)

    assert said == []


def test_a_broker_that_comes_up_within_the_wait_is_said_to_have_answered():
    clock, said = _Clock(), []

    wait_for_broker("redis://127.0.0.1:6390/0", 30, say=said.append, clock=clock, sleep=clock.sleep,
                    ping=_failing(3))

    assert said == [("cannot reach the broker at 127.0.0.1:6390 (REDIS_URL): Connection refused; retrying for up to "
                     "30 s (--broker-wait)"), "the broker at 127.0.0.1:6390 answered after 3 s"]


def test_a_reachable_broker_starts_without_a_word(redis_url):
    said = []

    wait_for_broker(redis_url, 30, say=said.append)

    assert said == []


def test_a_lost_broker_is_one_line_per_check_and_one_more_when_it_is_back(logs):
    clock = _Clock()
    watch = BrokerWatch("redis://127.0.0.1:6390/0", interval=5, ping=_failing(3), clock=clock)

    answers = []
    for _ in range(5):
        answers.append(watch.check())
        clock.sleep(5)

    assert answers == [False, False, False, True, True]
    assert [(e["event"], e.get("down_s"), e.get("error")) for e in logs] == [
        ("broker unreachable", 0, "Connection refused"), ("broker unreachable", 5, "Connection refused"),
        ("broker unreachable", 10, "Connection refused"), ("broker reachable again", 15, None)]
    assert all(e["broker"] == "127.0.0.1:6390" for e in logs)


@pytest.mark.parametrize("command", [["worker"], ["beat"], ["intake", "--port", "0"]])
def test_a_process_started_on_an_unreachable_broker_exits_non_zero_after_its_wait(command, tmp_path):
    """Given no Redis on REDIS_URL's port, when `vigil worker`, `beat` or `intake` starts with --broker-wait 1,
    then it says where and why at once, and exits non-zero once the wait is over, without a traceback."""
    port = _closed_port()
    (tmp_path / "ok.yaml").write_text("judges: [{name: b, kind: baseline}]\n", encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if k not in ("CLICKHOUSE_DSN", "VIGIL_DEBUG")},
           "REDIS_URL": f"redis://127.0.0.1:{port}/0", "VIGIL_CONFIG": str(tmp_path / "ok.yaml"),
           "VIGIL_HOME": str(tmp_path / "home")}

    run = subprocess.run([sys.executable, "-m", "vigil.worker", *command, "--broker-wait", "1"], env=env,
                         capture_output=True, text=True, timeout=120, check=False)

    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0
    assert lines[0].startswith(f"vigil: cannot reach the broker at 127.0.0.1:{port} (REDIS_URL): Connection refused")
    assert lines[-1].startswith(f"vigil: error: cannot reach the broker at 127.0.0.1:{port}")
    assert len(lines) == 2 and "Traceback" not in run.stderr


def test_a_running_worker_that_loses_its_broker_says_so_once_per_interval_and_when_it_is_back(tmp_path):
    """Given a real worker on its own Redis, when the Redis stops and starts again on the same port, then the
    worker's log has the watch's `broker unreachable` lines naming it (not the writer's and the mover's per-second
    retries, nor Celery's seven-line warning), then `broker reachable again`."""
    from vigil.worker.demo.embedded_redis import EmbeddedRedis

    from tests.pipeline import WorkerProcess
    from tests.test_worker_shutdown import CONFIG, wait_for_line

    server = EmbeddedRedis().start()
    worker = WorkerProcess(server.url, tmp_path / "vigil", CONFIG).start()
    try:
        wait_for_line(worker, "writer started")
        server.stop()
        wait_for_line(worker, '"event": "broker unreachable"')
        server = EmbeddedRedis(port=server.port).start()
        wait_for_line(worker, '"event": "broker reachable again"')
    finally:
        worker.stop()
        server.stop()

    lines = worker.output().splitlines()
    lost = [line for line in lines if '"event": "broker unreachable"' in line]
    assert all(f'"broker": "127.0.0.1:{server.port}"' in line for line in lost)
    assert not any("writer cannot reach redis" in line or "could not release parked work" in line for line in lines)
    assert "In Celery 5.1 we introduced" not in worker.output()
