"""The batching writer: what ClickHouse refuses is dead-lettered without blocking the batch, and what a vanished
writer left in flight is taken back and written."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
import redis
from vigil.schemas import JudgeCall, Score, ScoreStatus
from vigil.schemas.rows import JudgeCallRow
from vigil.worker.sinks.write_queue import WRITE_QUEUE, inflight_key, owner_key, push
from vigil.worker.sinks.writer import Writer, WriterIdLost, block_timeout


def a_score(trace_id: str) -> Score:
    return Score(score_id=f"s-{trace_id}", trace_id=trace_id, project="p", agent="a", environment="prod",
                 monitor="m", scorer="answer_relevancy", scorer_version="1", status=ScoreStatus.SCORED, score=0.5,
                 trace_time=datetime.now(UTC))


def test_a_row_clickhouse_refuses_is_dead_lettered_and_the_rest_of_the_batch_is_written(redis_url, store):
    """A token count beyond UInt32 passes the row model but not the column: only that row goes to dead letters."""
    client = redis.Redis.from_url(redis_url)
    score = a_score("t1")
    good = JudgeCallRow.of(JudgeCall(step="analyze", model="m", prompt_tokens=10), 0, score=score)
    bad = JudgeCallRow.of(JudgeCall(step="reason", model="m", prompt_tokens=5_000_000_000), 1, score=score)
    push(client, [("scores", [score]), ("judge_calls", [good, bad])])
    writer = Writer(client, store, writer_id="w1", batch_age_s=0.1)

    writer.run_once()

    assert store.query("SELECT count() FROM scores").result_rows == [(1,)]
    assert store.query("SELECT step FROM judge_calls").result_rows == [("analyze",)]
    (reason, error_type), = store.query("SELECT reason, error_type FROM dead_letters").result_rows
    assert error_type == "refused_row" and "judge_calls row refused by ClickHouse" in reason
    assert client.llen(inflight_key("w1")) == 0 and client.llen(WRITE_QUEUE) == 0


def test_an_in_flight_list_whose_writer_has_no_heartbeat_is_taken_back_and_written(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    entry = json.dumps({"table": "scores", "rows": [a_score("t2").model_dump(mode="json")]})
    client.rpush(inflight_key("vanished-pod-7f9c"), entry)  # left by a writer killed mid-batch, never restarted
    client.rpush(inflight_key("live-writer"), entry)
    client.set(owner_key("live-writer"), "alive", ex=60)
    writer = Writer(client, store, writer_id="w2", batch_age_s=0.1)

    writer.run_once()

    assert store.query("SELECT trace_id FROM scores").result_rows == [("t2",)]
    assert client.exists(inflight_key("vanished-pod-7f9c")) == 0
    assert client.llen(inflight_key("live-writer")) == 1, "a live writer's batch is its own"


def test_a_writer_holds_its_id_with_a_heartbeat_and_gives_it_up_when_it_stops(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    writer = Writer(client, store, writer_id="w3", batch_age_s=0.05)
    writer.claim()
    assert 0 < client.ttl(owner_key("w3")) <= writer.heartbeat_s
    writer.start().stop()
    assert client.exists(owner_key("w3")) == 0


def test_a_second_writer_with_a_live_writers_id_waits_instead_of_sharing_its_list(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    client.set(owner_key("w4"), "another process", ex=60)
    writer = Writer(client, store, writer_id="w4", batch_age_s=0.05)
    writer._stop.set()  # give up at the first wait instead of waiting for the other writer
    writer.claim()
    assert client.get(owner_key("w4")) == b"another process"


def test_a_later_failed_run_of_a_score_never_replaces_the_scored_row(redis_url, store):
    """A redelivered turn scored again while the judge is down fails; the good row stays the one FINAL reads."""
    client = redis.Redis.from_url(redis_url)
    scored = a_score("t5")
    failed = scored.model_copy(update={"status": ScoreStatus.FAILED, "score": None, "error_type": "timeout",
                                       "scored_at": datetime.now(UTC)})
    push(client, [("scores", [scored])])
    first = Writer(client, store, writer_id="w5", batch_age_s=0.05)
    first.run_once()
    first.release()  # it stops; the next run takes the id
    push(client, [("scores", [failed])])
    Writer(client, store, writer_id="w5", batch_age_s=0.05).run_once()

    assert store.query("SELECT status, score FROM scores FINAL").result_rows == [("scored", 0.5)]
    store.command("OPTIMIZE TABLE scores FINAL")
    assert store.query("SELECT status FROM scores").result_rows == [("scored",)]


def entries_of(*trace_ids: str) -> list[str]:
    return [json.dumps({"table": "scores", "rows": [a_score(t).model_dump(mode="json")]}) for t in trace_ids]


class SlowInsert(Writer):
    """A writer whose next insert first lets ``meanwhile`` run: the moment between reading its in-flight list and
    clearing it, held open so the other writer's steps can be placed there by hand."""

    meanwhile = None

    def _insert_isolating(self, table, rows):
        step, self.meanwhile = self.meanwhile, None
        if step is not None:
            step()
        return super()._insert_isolating(table, rows)


def stored_trace_ids(store) -> list[tuple[str, int]]:
    return store.query("SELECT trace_id, count() FROM scores FINAL GROUP BY trace_id ORDER BY trace_id").result_rows


def test_two_writers_with_one_id_lose_no_row_when_their_steps_interleave(redis_url, store):
    """The interleaving that lost two rows: A reads its batch and inserts slowly; its heartbeat runs out; B, started
    with the same id, takes it, writes A's batch and gathers two new rows; A finishes and clears its list. A must
    clear only what it inserted, and on its next beat find that B holds the id and stop writing from the list."""
    client = redis.Redis.from_url(redis_url)
    client.rpush(WRITE_QUEUE, *entries_of("r1", "r2"))
    a = SlowInsert(client, store, writer_id="shared", batch_rows=2, batch_age_s=0.1)
    b = Writer(client, store, writer_id="shared", batch_rows=2, batch_age_s=0.1)
    a.claim()
    a.beat()
    a._collect()  # A's in-flight list: r1, r2

    def b_takes_over() -> None:
        client.delete(owner_key("shared"))  # A's heartbeat runs out while it inserts
        b.claim()
        b.run_once()  # B writes r1, r2 (left in flight) and clears them
        client.rpush(WRITE_QUEUE, *entries_of("r3", "r4"))
        b.beat()
        b._collect()  # B's batch in the shared list: r3, r4

    a.meanwhile = b_takes_over
    a.flush_inflight()  # A inserts r1, r2, then clears what it inserted

    assert client.llen(inflight_key("shared")) == 2, "B's batch is still in flight"
    with pytest.raises(WriterIdLost):
        a.beat()
    assert client.get(owner_key("shared")) == b._token.encode(), "A did not take the id back from B"
    b.run_once()

    assert stored_trace_ids(store) == [("r1", 1), ("r2", 1), ("r3", 1), ("r4", 1)]
    assert client.llen(inflight_key("shared")) == 0 and client.llen(WRITE_QUEUE) == 0


def test_a_writer_that_lost_its_id_stops_writing_and_waits_to_take_it_back(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    writer = Writer(client, store, writer_id="w6", batch_age_s=0.05, heartbeat_s=0.3)
    writer.claim()
    client.set(owner_key("w6"), "a replacement that took over", px=200)  # this writer stalled past its heartbeat
    client.rpush(WRITE_QUEUE, *entries_of("t6"))

    with pytest.raises(WriterIdLost):
        writer.run_once()
    assert client.llen(WRITE_QUEUE) == 1, "nothing was taken from the queue by the writer that lost its id"

    writer.start()  # the loop waits while the other holds the id, then takes it back and writes
    try:
        deadline = time.monotonic() + 30
        while stored_trace_ids(store) != [("t6", 1)] and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        writer.stop()
    assert stored_trace_ids(store) == [("t6", 1)]


def test_stopping_a_writer_never_deletes_the_id_another_writer_holds(redis_url, store):
    client = redis.Redis.from_url(redis_url)
    writer = Writer(client, store, writer_id="w7", batch_age_s=0.05)
    writer.claim()
    client.set(owner_key("w7"), "the writer that took over", ex=60)
    assert writer.release() is False
    assert client.get(owner_key("w7")) == b"the writer that took over"


def test_a_reclaim_leaves_the_list_of_a_writer_that_renews_its_heartbeat_just_before_the_move(redis_url, store):
    """The reclaim checks the owner and moves the list in one step. The slow writer's heartbeat has run out when the
    reclaimer looks, and it renews just before the reclaimer's move command reaches Redis: it keeps its batch (with
    the check and the move as separate commands, the move came after the renewal and took the batch)."""
    client = redis.Redis.from_url(redis_url)
    client.rpush(inflight_key("slow"), *entries_of("t8"))
    slow = Writer(client, store, writer_id="slow", heartbeat_s=60)

    class RenewsBeforeTheMove(redis.Redis):
        renewed = False

        def execute_command(self, *args, **options):
            if args[0] in ("LMOVE", "EVALSHA", "EVAL") and not self.renewed:
                self.renewed = True
                slow.claim()
            return super().execute_command(*args, **options)

    reclaimer = Writer(RenewsBeforeTheMove.from_url(redis_url), store, writer_id="other")
    reclaimer.reclaim_orphans()

    assert reclaimer.redis.renewed, "the slow writer renewed during the reclaim"
    assert client.llen(inflight_key("slow")) == 1 and client.llen(WRITE_QUEUE) == 0


@pytest.mark.parametrize("remaining", [0.0004, 0.0, -0.2, 0.3, 7.0])
def test_the_writers_block_is_never_a_timeout_redis_reads_as_forever(remaining):
    assert 0.01 <= block_timeout(remaining) <= 0.5


def test_a_sub_millisecond_wait_on_an_idle_queue_returns_instead_of_blocking_forever(redis_url):
    """Redis rounds a BLMOVE timeout to milliseconds and reads 0 as "block forever": the writer's last sliver of a
    batch's age used to stall it until the socket timed out (an ERROR with a traceback on an idle worker)."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5)

    with pytest.raises(redis.TimeoutError):
        client.blmove(WRITE_QUEUE, "vigil.test.dest", timeout=0.0004)  # what the writer used to send
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    assert client.blmove(WRITE_QUEUE, "vigil.test.dest", timeout=block_timeout(0.0004)) is None


def test_opening_and_writing_the_store_loads_no_pandas_pyarrow_or_numpy(tmp_path):
    """vigil writes rows of Python values, never DataFrames or arrays, and reads chDB in the Native format, never
    Arrow: a process that opens, migrates and writes the store (every worker does) never pays for importing pandas or
    numpy (clickhouse-connect's insert imported them to ask) or pyarrow (chDB's connection module did). In a fresh
    process: this one may have loaded them already."""
    script = ("import sys; from vigil.worker.store import connect, migrate; c = connect(sys.argv[1]); migrate(c); "
              "c.insert('feedback', [['t1', 'thumbs', 0.0]], column_names=['trace_id', 'name', 'value']); "
              "print(c.query('SELECT count() FROM feedback').result_rows[0][0], 'pandas' in sys.modules, "
              "'pyarrow' in sys.modules, 'numpy' in sys.modules); c.close()")
    run = subprocess.run([sys.executable, "-c", script, f"chdb://{tmp_path / 'chdb'}"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["1", "False", "False", "False"]
