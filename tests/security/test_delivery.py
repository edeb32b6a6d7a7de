"""What vigil cannot keep it must say, and what it can keep it keeps: turns spooled by forked children (pre-fork
servers) are drained by the next process; a broker without persistence is named at worker start."""

from __future__ import annotations

import os
from pathlib import Path

from producers import Monitor
from tests.security.test_tls import CONFIG
from tests.pipeline import WorkerProcess, wait_drained
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
    assert len(list(tmp_path.glob("agent.jsonl.*[0-9]"))) == 2, "each child spooled to its own file"

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
