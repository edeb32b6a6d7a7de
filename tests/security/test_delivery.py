"""What vigil cannot keep it must say, and what it can keep it keeps: turns spooled by forked children (pre-fork
servers) are drained by the next process; a broker without persistence is named at worker start."""

from __future__ import annotations

import os

import redis
from rich.console import Console
from vigil.producers import Monitor
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.pipeline.durability import persistence_problem
from vigil.worker.report.build import build_report
from vigil.worker.report.text import print_report
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, make_turn, send, wait_drained
from tests.security.test_tls import CONFIG
from tests.test_sdk import down_url, turns


def test_turns_spooled_by_forked_children_are_shipped_by_the_next_process(redis_url, tmp_path):
    """A gunicorn-style pre-fork server with the broker down: the parent and two children each spool; a restarted
    server (broker back) ships every turn, and no spool file is left."""
    spool = tmp_path / "agent.jsonl"
    parent = Monitor(down_url(), spool_path=spool, agent="support-bot", flush_interval=3600)
    children = []
    for child in range(2):
        pid = os.fork()
        if pid == 0:
            for i in range(3):
                parent.capture(input=f"child {child} turn {i}", output="a")
            parent.shutdown(timeout=5)  # the broker is down: the child's turns go to <spool>.<pid>
            os._exit(0)
        children.append(pid)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    parent.capture(input="parent turn", output="a")
    parent.shutdown(timeout=5)
    # each child spooled to <spool>.<pid>; a child starting after its sibling exited may already have adopted it
    assert 1 <= len(list(tmp_path.glob("agent.jsonl.*[0-9]"))) <= 2

    restarted = Monitor(redis_url, spool_path=spool, agent="support-bot", flush_interval=3600)
    try:
        assert restarted.flush(timeout=20)
    finally:
        assert restarted.shutdown(timeout=10)
    shipped = sorted(turn["input"][0]["content"] for turn in turns(redis_url))
    assert shipped == sorted(["parent turn", *(f"child {c} turn {i}" for c in range(2) for i in range(3))])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("agent.jsonl")], "every spool file drained"


def test_a_live_process_spool_is_left_to_it(redis_url, tmp_path):
    """A sibling whose process still holds its lock is not adopted (it ships its own turns)."""
    spool = tmp_path / "agent.jsonl"
    holder = Monitor(down_url(), spool_path=spool, agent="support-bot", flush_interval=3600)
    holder.capture(input="held", output="a")
    assert holder.flush(timeout=2) is False  # spooled, and the holder keeps its lock
    other = Monitor(redis_url, spool_path=spool, agent="support-bot", flush_interval=3600)
    try:
        assert other.flush(timeout=10)
        assert turns(redis_url) == []
    finally:
        other.shutdown(timeout=5)
        holder.shutdown(timeout=1)


def test_the_persistence_check_names_a_broker_without_aof_or_rdb_and_passes_one_with_aof(redis_url):
    client = redis.Redis.from_url(redis_url)  # the test server runs with --save "" --appendonly no
    try:
        assert "neither AOF nor RDB" in persistence_problem(client)
        client.config_set("save", "900 1")
        assert "RDB snapshots only" in persistence_problem(client)
        client.config_set("appendonly", "yes")
        assert persistence_problem(client) is None
    finally:
        client.config_set("appendonly", "no")
        client.config_set("save", "")
        client.close()


def test_a_worker_on_a_broker_without_persistence_says_so_loudly_at_start(redis_url, tmp_path):
    send(redis_url, [make_turn(1)])  # drained once the worker is up and running
    worker = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG).start()
    try:
        wait_drained(redis_url, worker)
    finally:
        assert worker.stop() == 0
    assert "BROKER IS NOT DURABLE" in worker.output() and "neither AOF nor RDB" in worker.output()


def test_turns_lost_by_a_broker_restart_without_persistence_show_as_shipped_but_never_received(tmp_path):
    """Two batches shipped, the broker restarted without persistence, a third shipped: the worker receives one
    batch; the report says 20 turns were shipped and never received."""
    (tmp_path / "redis").mkdir()
    server = EmbeddedRedis(data_dir=tmp_path / "redis").start()  # its own dir: it survives the restart
    try:
        monitor = Monitor(server.url, spool_path=tmp_path / "spool.jsonl", agent="support-bot", flush_interval=3600,
                          backoff_initial=0.05, backoff_max=0.2)
        for batch in range(3):
            if batch == 2:
                server.stop()
                server.start()  # same port, nothing kept
            for i in range(10):
                monitor.capture(input=f"batch {batch} turn {i}", output="a")
            assert monitor.flush(timeout=20)
        assert monitor.shutdown(timeout=10)
        worker = WorkerProcess(server.url, tmp_path / "vigil", CONFIG).start()
        try:
            wait_drained(server.url, worker)
        finally:
            assert worker.stop() == 0
    finally:
        server.stop()
    store = connect(worker.dsn)
    report = build_report(store)
    [delivery] = report.delivery
    assert (delivery.agent, delivery.shipped, delivery.received, delivery.lost) == ("support-bot", 30, 10, 20)
    console = Console(record=True, width=200)
    print_report(report, console)
    assert "support-bot: 20 turn(s) shipped but never received" in console.export_text()
