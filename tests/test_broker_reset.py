"""A broker that comes back empty, on real parts: a real redis-server without persistence is restarted under a real
`vigil worker` while sampled turns wait on the score queue. Their rows are in ClickHouse, their score tasks are gone
with the broker: vigil names them lost (the coverage funnel, `vigil report` as JSON, text and page, the dashboard's
panel), and the turns shipped after the restart are scored and not counted."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from vigil.schemas.broker import INGEST_QUEUE, SCORE_QUEUE
from vigil.worker.cli import main
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.pipeline.backlog import backlog
from vigil.worker.pipeline.broker_epoch import Epoch, begin, epoch_row
from vigil.worker.pipeline.sampling import sampled
from vigil.worker.report import Report
from vigil.worker.store import connect
from vigil.worker.store.queries import PANELS, render

from tests.pipeline import (
    WorkerProcess,
    make_turn,
    ship,
    wait_drained,
    wait_while_alive,
)

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"
RESET = "BROKER CAME BACK EMPTY"


def _written(client: redis.Redis, tasks: int) -> bool:
    """Ingest done and its rows inserted: nothing queued but the score tasks, nothing waiting to be written."""
    now = backlog(client)
    return now[SCORE_QUEUE] == tasks and not any(v for k, v in now.items() if k not in (SCORE_QUEUE, "journaled"))


def _half_sampled(count: int) -> list[dict]:
    """``count`` turns, half of which the monitor sampling at 0.5 samples (sampling is decided on the trace id)."""
    chosen: dict[bool, list[dict]] = {True: [], False: []}
    i = 0
    while min(len(v) for v in chosen.values()) < count // 2:
        turn = make_turn(i)
        chosen[sampled(turn["trace_id"], 0.5)].append(turn)
        i += 1
    return chosen[True][:count // 2] + chosen[False][:count // 2]


@pytest.fixture
def restartable(tmp_path):
    servers = [EmbeddedRedis().start()]
    yield servers
    for server in servers:
        server.stop()


def test_sampled_turns_whose_work_a_broker_restarted_without_persistence_lost_are_counted_lost_everywhere(
        restartable, tmp_path):
    url = restartable[0].url
    before, after = _half_sampled(6), [make_turn(100 + i) for i in range(3)]
    home = tmp_path / "vigil"

    # Ingest only: the score tasks of the first turns wait in Redis, their `sampled` rows reach ClickHouse.
    worker = WorkerProcess(url, home, CONFIG).start("-Q", INGEST_QUEUE)
    try:
        ship(url, before)
        wait_while_alive(worker, lambda: _written(redis.Redis.from_url(url), len(before)), "the sampled rows to be written")
        restartable[0].stop()  # no AOF, no RDB: it comes back empty
        restartable.append(EmbeddedRedis(port=restartable[0].port).start())
        wait_while_alive(worker, lambda: RESET in worker.output(), "the writer to notice the broker came back empty")
    finally:
        assert worker.stop() == 0

    worker = WorkerProcess(url, home, CONFIG).start()  # both queues: what arrives now is scored
    try:
        ship(url, after)
        wait_drained(url, worker)
    finally:
        assert worker.stop() == 0

    result = CliRunner().invoke(main, ["report", "--dsn", worker.dsn, "--json", "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    funnel = {f.monitor: f for f in Report.model_validate(json.loads(result.stdout)).funnel}
    assert (funnel["relevancy"].sampled, funnel["relevancy"].scored, funnel["relevancy"].lost) == (9, 3, 6)
    assert funnel["relevancy-half"].lost == 3  # the half it sampled of the turns before the reset
    page = (tmp_path / "r.html").read_text()
    chart = page[page.index('data-chart="funnel-relevancy"'):]
    assert re.search(r'data-label="lost"[^>]*/><text class="value"[^>]*>(\d+)<', chart).group(1) == "6"

    text = CliRunner().invoke(main, ["report", "--dsn", worker.dsn], env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    header = next((line for line in text.output.splitlines() if "sampled" in line and "lost" in line), None)
    assert header is not None, text.output
    row = next(line for line in text.output.splitlines() if "support-bot" in line and "│" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    columns = [c.strip() for c in header.split("┃" if "┃" in header else "│") if c.strip()]
    assert cells[columns.index("lost")] == "6"

    store = connect(worker.dsn)  # closed at once: one chDB path at a time per process, and others follow here
    now = datetime.now(UTC)
    try:
        panel = list(store.query(render(PANELS["lost_turns"].sql, start=now - timedelta(hours=1),
                                        end=now + timedelta(minutes=1))).named_results())
    finally:
        store.close()
    assert {r["monitor"]: r["lost"] for r in panel}["relevancy"] == 6
    assert all(r["broker_reset"] is not None for r in panel)


@pytest.mark.parametrize(("previous", "expected"), [
    (("", ""), 1000.0),  # the first epoch: a new broker, nothing was lost (previous stays empty)
    (("e1", "run-1"), 1000.0),  # same run id: the broker was flushed, noticed now
    (("e1", "run-0"), 941.0),  # another run id: it restarted in the second 60 s ago, and lost its work by its end
], ids=["first epoch", "flushed", "restarted"])
def test_a_reset_is_dated_from_the_brokers_start_when_it_restarted_else_from_when_it_was_noticed(previous, expected):
    epoch = Epoch(id="e2", run_id="run-1", uptime_s=60.0, started=1000.0)

    row = epoch_row(epoch, previous if previous[0] else None)

    assert (row.previous, row.reset_at.timestamp()) == (previous[0], expected)


def _at_fraction(fraction: float) -> None:
    """Sleep until the clock's fraction of a second is ``fraction`` (within the next second)."""
    time.sleep((fraction - time.time() % 1.0) % 1.0)


def test_a_turn_sampled_on_the_old_broker_in_the_second_it_restarted_is_before_the_reset(restartable):
    """Redis states its start to the second: a sample half-way through the second of the restart, the reset noticed
    two seconds later just after a second began, must still be dated before the reset (it was dated after, and the
    turn's lost work went uncounted)."""
    first = redis.Redis.from_url(restartable[0].url)
    previous = begin(first)
    assert previous is not None

    _at_fraction(0.5)
    sampled_at = time.time()
    restartable[0].stop()
    restartable.append(EmbeddedRedis(port=restartable[0].port).start())
    time.sleep(1.0)
    _at_fraction(0.05)

    epoch = begin(redis.Redis.from_url(restartable[-1].url))
    assert epoch is not None and epoch.run_id != previous.run_id
    row = epoch_row(epoch, (previous.id, previous.run_id))
    assert sampled_at < row.reset_at.timestamp() <= epoch.started
