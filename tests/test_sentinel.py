"""Redis Sentinel: a ``sentinel://`` REDIS_URL finds the master through the Sentinels, for every client vigil has (the
SDK's shipper, the worker's Celery connection, its own redis-py clients), and after a failover they all follow the
new master. Real parts: a master and a replica redis-server and a Sentinel (the same binary, ``--sentinel``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.sentinel import MasterNotFoundError, Sentinel
from vigil.producers import Monitor
from vigil.schemas.broker import SENTINEL_TRANSPORT, TRANSPORT, broker
from vigil.worker.demo.embedded_redis import free_port, redis_server_binary
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, make_turn, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def test_a_sentinel_url_names_its_sentinels_master_database_and_password():
    b = broker("sentinel://:s3cret@10.0.0.1:26379,10.0.0.2/2?master_name=vigil-main&sentinel_password=watch")

    assert b.transport == SENTINEL_TRANSPORT
    assert b.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379))
    assert (b.master, b.master_kwargs) == ("vigil-main", {"db": 2, "password": "s3cret"})
    assert b.options == {"master_name": "vigil-main", "sentinel_kwargs": {"password": "watch"}}
    assert b.url == "sentinel://:s3cret@10.0.0.1:26379/2;sentinel://:s3cret@10.0.0.2:26379/2"


def test_kombus_own_sentinel_form_reads_the_same():
    ours = broker("sentinel://a:26379,b:26380/0?master_name=m")
    kombus = broker("sentinel://a:26379;sentinel://b:26380/0?master_name=m")

    assert (kombus.sentinels, kombus.master, kombus.url) == (ours.sentinels, ours.master, ours.url)
    assert broker(ours.url + "?master_name=m").sentinels == ours.sentinels  # the worker re-reads its kombu URL


def test_a_plain_url_keeps_the_journaled_redis_transport():
    b = broker("redis://:pw@127.0.0.1:6379/0")
    assert (b.transport, b.sentinels, b.ssl) == (TRANSPORT, (), None)


@pytest.mark.parametrize(("url", "says"), [
    ("sentinel://10.0.0.1:26379", "needs ?master_name=NAME"),
    ("redis+sentinel://h:26379/0?master_name=m", "for Sentinel write sentinel://HOST:PORT"),
    ("sentinel://h:26379/0?master_name=m&ssl_cert_reqs=required", "ssl_cert_reqs is not an option of sentinel://"),
    ("sentinel://h:port/0?master_name=m", "'h:port' is not a Sentinel address"),
    ("sentinel://h:26379/zero?master_name=m", "the database must be a number"),
])
def test_a_wrong_sentinel_url_says_what_to_write(url, says):
    with pytest.raises(ValueError, match="REDIS_URL: ") as raised:
        broker(url)
    assert says in str(raised.value)


def test_vigil_worker_with_a_sentinel_url_missing_its_master_fails_with_one_line(tmp_path):
    env = {**os.environ, "REDIS_URL": "sentinel://:secret@10.0.0.1:26379", "VIGIL_HOME": str(tmp_path),
           "VIGIL_CONFIG": str(CONFIG)}
    done = subprocess.run([sys.executable, "-m", "vigil.worker", "worker"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)

    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "master_name" in lines[0] and "secret" not in done.stderr


class Group:
    """A master, a replica of it, and one Sentinel watching them (quorum 1, down after 1 s)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.master_port, self.replica_port, self.sentinel_port = free_port(), free_port(), free_port()
        self.processes: dict[str, subprocess.Popen] = {}

    def _server(self, name: str, *args: str) -> None:
        data = self.directory / name
        data.mkdir(parents=True, exist_ok=True)
        self.processes[name] = subprocess.Popen(
            [redis_server_binary(), *args, "--bind", "127.0.0.1", "--dir", str(data), "--daemonize", "no",
             "--loglevel", "warning", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def start(self) -> Group:
        self._server("master", "--port", str(self.master_port))
        self._wait(self.master_port)
        self._server("replica", "--port", str(self.replica_port),
                     "--replicaof", "127.0.0.1", str(self.master_port))
        self._wait(self.replica_port)
        conf = self.directory / "sentinel.conf"  # Sentinel rewrites its own config file: it must be writable
        conf.write_text(f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {self.directory}\n"
                        f"sentinel monitor vigil-main 127.0.0.1 {self.master_port} 1\n"
                        "sentinel down-after-milliseconds vigil-main 1000\n"
                        "sentinel failover-timeout vigil-main 5000\n")
        self.processes["sentinel"] = subprocess.Popen(
            [redis_server_binary(), str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self._wait(self.sentinel_port)
        deadline = time.monotonic() + 30
        while self._role(self.replica_port).get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.1)
        return self

    @property
    def url(self) -> str:
        return f"sentinel://127.0.0.1:{self.sentinel_port}/0?master_name=vigil-main"

    def master(self) -> int | None:
        """The master's port as a client sees it (redis-py asks the Sentinel and checks the master's state, so
        right after a promotion there is briefly none)."""
        try:
            return Sentinel([("127.0.0.1", self.sentinel_port)]).discover_master("vigil-main")[1]
        except MasterNotFoundError:
            return None

    def kill_master_and_wait_for_failover(self, timeout: float = 60) -> int:
        self.processes["master"].send_signal(signal.SIGKILL)
        self.processes["master"].wait(10)
        deadline = time.monotonic() + timeout
        while (port := self.master()) in (None, self.master_port):
            assert time.monotonic() < deadline, "the Sentinel never promoted the replica"
            time.sleep(0.2)
        return port

    def _role(self, port: int) -> dict:
        client = redis.Redis(port=port)
        try:
            return client.info("replication")
        finally:
            client.close()

    def _wait(self, port: int) -> None:
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(port=port, socket_connect_timeout=0.5).ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, f"nothing listens on {port}"
                time.sleep(0.05)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


@pytest.fixture
def group(tmp_path):
    started = Group(tmp_path / "sentinel").start()
    yield started
    started.stop()


def _ship(url: str, turns: list[dict], spool: Path) -> None:
    monitor = Monitor(redis_url=url, spool_path=spool)
    for turn in turns:
        assert monitor.capture(turn)
    assert monitor.flush(timeout=60), monitor.counters()
    monitor.shutdown(timeout=30)


def test_the_sdk_and_a_worker_follow_the_master_through_a_failover_and_lose_no_turn(group, tmp_path):
    before = [make_turn(i) for i in range(5)]
    after = [make_turn(100 + i) for i in range(5)]
    worker = WorkerProcess(group.url, tmp_path / "vigil", CONFIG).start()
    try:
        _ship(group.url, before, tmp_path / "spool-1.jsonl")
        wait_drained(f"redis://127.0.0.1:{group.master_port}/0", worker)

        new_port = group.kill_master_and_wait_for_failover()
        _ship(group.url, after, tmp_path / "spool-2.jsonl")
        wait_drained(f"redis://127.0.0.1:{new_port}/0", worker)
    finally:
        assert worker.stop() == 0, worker.output()[-3000:]

    assert new_port == group.replica_port
    scored = {row[0] for row in connect(worker.dsn).query("SELECT trace_id FROM scores FINAL").result_rows}
    assert {t["trace_id"] for t in before + after} <= scored, worker.output()[-3000:]


def _connections(port: int, name: str) -> int:
    """How many connections the master holds from clients named ``name``."""
    client = redis.Redis(port=port)
    try:
        return sum(1 for c in client.client_list() if c["name"] == name)
    finally:
        client.close()


def _at_once(client: redis.Redis, callers: int) -> list:
    """What ``callers`` threads starting together each get from a BLPOP that holds its connection for a second
    (None: it timed out, as nothing comes), or the error they got."""
    start, answers = threading.Barrier(callers), []

    def call() -> None:
        start.wait()
        try:
            answers.append(client.blpop(["nothing-comes"], timeout=1))
        except redis.RedisError as exc:
            answers.append(repr(exc))

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_a_sentinel_client_waits_for_a_free_connection_and_never_opens_more_than_its_pool(group):
    """Five callers at once, each holding a connection for a second (a BLPOP that times out), on a client of 4
    connections: the fifth waits for one and gets its answer; the master never sees more than 4. Before, a Sentinel
    client's pool ignored its size and raised MaxConnectionsError at redis-py's own 100."""
    client = broker(group.url).redis(max_connections=4, client_name="sync-pool")
    answers = _at_once(client, 5)
    opened = _connections(group.master_port, "sync-pool")
    client.close()

    assert answers == [None] * 5
    assert opened == 4


def test_an_asyncio_sentinel_client_waits_for_a_free_connection_too(group):
    async def calls() -> tuple[list, int]:
        client = broker(group.url).async_redis(max_connections=4, client_name="async-pool")
        answers = await asyncio.gather(*(client.blpop(["nothing-comes"], timeout=1) for _ in range(5)),
                                       return_exceptions=True)
        opened = _connections(group.master_port, "async-pool")
        await client.aclose()
        return answers, opened

    answers, opened = asyncio.run(calls())

    assert answers == [None] * 5
    assert opened == 4


def test_a_sentinel_client_of_the_default_size_lets_a_burst_over_it_wait(group):
    """101 callers at once on a client of the default 100 connections (a worker's 100 threads and one more): none
    fails. Before, the 101st raised MaxConnectionsError: Too many connections."""
    client = broker(group.url).redis()
    answers = _at_once(client, 101)
    client.close()

    assert [a for a in answers if a is not None] == []
    assert len(answers) == 101
