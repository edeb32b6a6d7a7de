"""The batching ClickHouse writer: the only process that inserts.

It moves entries from the write queue to its own in-flight list (a reliable queue: LMOVE is atomic), inserts a
batch per table when the batch is big enough or old enough, and only then clears the in-flight list. Each writer
keeps a heartbeat key; a writer that finds an in-flight list whose owner has no heartbeat (killed, rescheduled
under another name) moves its entries back onto the queue. A replay duplicates nothing: the tables are
ReplacingMergeTree on deterministic ids. A row that fails validation, or that ClickHouse refuses, is
dead-lettered, never retried forever, and never blocks the rest of its batch; a lost connection keeps the batch
in flight and retries it.

Ownership is explicit: the heartbeat key holds this writer's token, and every renewal, release and reclaim is a
compare-and-set in one Lua script, so two writers started with the same id never both write from one in-flight list
(the second waits; one that finds its id taken by another live writer stops writing and waits to take it back).
After an insert the writer removes exactly the entries it inserted (by digest, atomically), never a count of them:
whatever another process pushed or moved meanwhile stays.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from hashlib import sha1, sha256

import redis
import structlog
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from clickhouse_connect.driver.insert import InsertContext
from pydantic import BaseModel, ValidationError
from vigil.schemas.broker import broker
from vigil.schemas.rows import TABLES, BrokerEpoch, DeadLetter
from vigil.worker.pipeline import broker_epoch
from vigil.worker.sinks.write_queue import (
    WRITE_BYTES,
    WRITE_QUEUE,
    inflight_key,
    owner_key,
)
from vigil.worker.store.supersede import delete_superseded

__all__ = ["Writer", "WriterIdLost", "block_timeout", "current_writer", "open_writer"]

log = structlog.get_logger("vigil.writer")

# KEYS[1] owner key; ARGV[1] token, ARGV[2] ttl ms. 1: renewed; 2: had run out and is taken again; 0: another
# writer holds it.
_BEAT = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
"""

# KEYS[1] owner key; ARGV[1] token. Deletes the key only while it holds this token.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS[1] owner key of the orphan, KEYS[2] its in-flight list, KEYS[3] the write queue. Moves the list back to the
# head of the queue only while nobody holds the owner key: checked and moved in one step.
_RECLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
local moved = 0
while redis.call('LMOVE', KEYS[2], KEYS[3], 'RIGHT', 'LEFT') do moved = moved + 1 end
return moved
"""

# KEYS[1] an in-flight list, KEYS[2] the write queue's byte count; ARGV the SHA-1 digests of the entries inserted, in
# order. Removes exactly those entries (each once) and subtracts their bytes: the common case, the list still
# beginning with them, is one LTRIM; otherwise the list is rebuilt without them. Returns the entries removed.
_REMOVE = """
local function release(bytes)
  if bytes > 0 and tonumber(redis.call('DECRBY', KEYS[2], bytes)) < 0 then redis.call('SET', KEYS[2], 0) end
end
local n = #ARGV
local head = redis.call('LRANGE', KEYS[1], 0, n - 1)
local same = #head == n
local bytes = 0
if same then
  for i = 1, n do
    if redis.sha1hex(head[i]) ~= ARGV[i] then same = false break end
    bytes = bytes + string.len(head[i])
  end
end
if same then
  redis.call('LTRIM', KEYS[1], n, -1)
  release(bytes)
  return n
end
bytes = 0
local wanted = {}
for i = 1, n do wanted[ARGV[i]] = (wanted[ARGV[i]] or 0) + 1 end
local all = redis.call('LRANGE', KEYS[1], 0, -1)
local kept, removed = {}, 0
for i = 1, #all do
  local digest = redis.sha1hex(all[i])
  if (wanted[digest] or 0) > 0 then
    wanted[digest] = wanted[digest] - 1
    removed = removed + 1
    bytes = bytes + string.len(all[i])
  else
    kept[#kept + 1] = all[i]
  end
end
if removed > 0 then
  redis.call('DEL', KEYS[1])
  for i = 1, #kept do redis.call('RPUSH', KEYS[1], kept[i]) end
end
release(bytes)
return removed
"""

# KEYS: the write queue's byte count, the queue, every in-flight list. When all of them are empty the count is set to
# 0 (entries pushed by an older vigil, or removed by hand, left it wrong). Returns what it said before.
_RECONCILE = """
for i = 2, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then return -1 end
end
local before = tonumber(redis.call('GET', KEYS[1]) or '0')
if before ~= 0 then redis.call('SET', KEYS[1], 0) end
return before
"""


class WriterIdLost(RuntimeError):
    """Another live writer holds this writer's id: this one must not write from its in-flight list."""


def block_timeout(remaining_s: float, longest_s: float = 0.5) -> float:
    """How long one BLMOVE may block for a batch that may still gather ``remaining_s``: at most ``longest_s`` and at
    least 10 ms. Redis reads a timeout that rounds to 0 ms as "block forever", and a batch's last sub-millisecond
    used to stall the writer for the whole socket timeout (and log an ERROR) on an idle, healthy worker."""
    return max(min(remaining_s, longest_s), 0.01)


class Writer:
    def __init__(self, redis_client: redis.Redis, store: Client, *, writer_id: str = "default",
                 batch_rows: int = 5000, batch_age_s: float = 1.0, heartbeat_s: float = 15.0) -> None:
        self.redis = redis_client
        self.store = store
        self.writer_id = writer_id
        self.inflight = inflight_key(writer_id)
        self.owner = owner_key(writer_id)
        self.heartbeat_s = heartbeat_s
        self._token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._next_reclaim = 0.0
        self.batch_rows = batch_rows
        self.batch_age_s = batch_age_s
        self.burst = 200
        self.written: dict[str, int] = defaultdict(int)
        self._contexts: dict[str, InsertContext] = {}
        self.lock = threading.Lock()  # the store is shared with the alert checker in the same process
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reads = None  # on chDB: the ReadServer answering other local processes' queries (open_writer)
        self._beat = redis_client.register_script(_BEAT)
        self._release = redis_client.register_script(_RELEASE)
        self._reclaim = redis_client.register_script(_RECLAIM)
        self._remove = redis_client.register_script(_REMOVE)
        self._reconcile = redis_client.register_script(_RECONCILE)

    # -- one batch -------------------------------------------------------------------------------------------
    def _collect(self) -> int:
        """Move entries into the in-flight list until the batch is full or old enough; return rows gathered."""
        rows = sum(self._row_counts(self.redis.lrange(self.inflight, 0, -1)))  # left over from a crash
        started = time.monotonic()
        while rows < self.batch_rows and not self._stop.is_set():
            remaining = self.batch_age_s - (time.monotonic() - started)
            if remaining <= 0:
                break
            entry = self.redis.blmove(WRITE_QUEUE, self.inflight, timeout=block_timeout(remaining), src="LEFT",
                                      dest="RIGHT")
            if entry is None:
                continue
            rows += sum(self._row_counts([entry]))
            # Whatever else is waiting comes along in one round trip (LMOVE is atomic per entry).
            pipe = self.redis.pipeline(transaction=False)
            for _ in range(self.burst):
                pipe.lmove(WRITE_QUEUE, self.inflight, "LEFT", "RIGHT")
            rows += sum(self._row_counts([e for e in pipe.execute() if e is not None]))
        return rows

    @staticmethod
    def _row_counts(entries: list[bytes]) -> list[int]:
        counts = []
        for entry in entries:
            try:
                counts.append(len(json.loads(entry).get("rows", [])))
            except (ValueError, AttributeError):
                counts.append(1)
        return counts

    def flush_inflight(self) -> int:
        """Insert everything in the in-flight list, then clear it. Returns the rows inserted."""
        entries = self.redis.lrange(self.inflight, 0, -1)
        if not entries:
            return 0
        by_table: dict[str, list[BaseModel]] = defaultdict(list)
        dead: list[DeadLetter] = []
        for entry in entries:
            self._decode(entry, by_table, dead)
        if dead:
            by_table["dead_letters"].extend(dead)
        inserted = 0
        superseded = by_table.pop("superseded", [])
        for table, rows in by_table.items():
            inserted += self._insert_isolating(table, rows)
        if superseded:  # after the batch's inserts: a stale turn's rows that came in the same batch go too
            self._delete_superseded(superseded)
        # Exactly these entries, not "the first len(entries)": the list may have changed while we inserted (moved
        # back by a reclaim, or added to by a writer that took this id meanwhile). An entry already gone was
        # inserted by whoever took it (a replay duplicates nothing).
        self._remove(keys=[self.inflight, WRITE_BYTES], args=[sha1(entry).hexdigest() for entry in entries])
        return inserted

    def _insert_isolating(self, table: str, rows: list[BaseModel]) -> int:
        """Insert the rows; if ClickHouse refuses the batch (not the connection), insert them one by one and
        dead-letter the ones it refuses. Returns the rows inserted."""
        try:
            self._insert(table, rows)
        except OperationalError:
            raise
        except (DatabaseError, ValueError, TypeError) as exc:
            if len(rows) == 1 or table == "dead_letters":
                if table == "dead_letters":
                    log.error("dead letters refused by the store; dropped", error=str(exc), rows=len(rows))
                    return 0
                self._insert("dead_letters", [_dead(rows[0].model_dump_json(), f"{table} row refused by "
                                                    f"ClickHouse: {exc}", "refused_row")])
                return 0
            return sum(self._insert_isolating(table, [row]) for row in rows)
        self.written[table] += len(rows)
        return len(rows)

    def _decode(self, entry: bytes, by_table: dict[str, list[BaseModel]], dead: list[DeadLetter]) -> None:
        try:
            message = json.loads(entry)
            model = TABLES[message["table"]]
            rows = message["rows"]
        except (ValueError, KeyError, TypeError) as exc:
            dead.append(_dead(entry, f"unreadable write entry: {exc!r}", "bad_write_entry"))
            return
        for row in rows:
            try:
                by_table[message["table"]].append(model.model_validate(row))
            except ValidationError as exc:
                dead.append(_dead(json.dumps(row), f"{message['table']} row invalid: {exc}", "invalid_row"))

    def _delete_superseded(self, turns: list[BaseModel]) -> None:
        """Delete the rows of turns a later assembly replaced, and rebuild the rollup buckets they were counted in
        (``vigil.worker.store.supersede``)."""
        try:
            with self.lock:
                delete_superseded(self.store, [(t.project, t.trace_id, t.span_id) for t in turns])
        except OperationalError:
            raise  # the store is unreachable: the batch stays in flight and is retried
        except (DatabaseError, ValueError, TypeError) as exc:  # never a batch stuck behind a delete that cannot run
            log.error("superseded turns could not be deleted; they stay in the store", turns=len(turns),
                      error=str(exc)[:1000])
            return
        self.written["superseded"] += len(turns)
        for turn in turns:  # every removal of stored rows, with its reason and the span that caused it
            log.info("superseded turn's rows and scores deleted", reason="late root", project=turn.project,
                     trace_id=turn.trace_id, span_id=turn.span_id, by_span_id=turn.by_span_id,
                     caused_by=turn.caused_by)

    def _insert(self, table: str, rows: list[BaseModel]) -> None:
        model = TABLES[table]
        columns = list(model.model_fields)
        with self.lock:
            context = self._contexts.get(table)
            if context is None:
                context = self._contexts[table] = self.store.create_insert_context(table, column_names=columns)
            context.data = [[getattr(row, column) for column in columns] for row in rows]
            self.store.insert(context=context)

    # -- the loop --------------------------------------------------------------------------------------------
    def run_once(self) -> int:
        self.beat()
        self._collect()
        return self.flush_inflight()

    def claim(self) -> None:
        """Take this writer id; wait while a live writer holds it (a crashed one's heartbeat runs out)."""
        while not (self.redis.set(self.owner, self._token, nx=True, px=int(self.heartbeat_s * 1000))
                   or self.redis.get(self.owner) == self._token.encode()):
            log.warning("writer id in use by a live writer; waiting", writer_id=self.writer_id,
                        holder=self.redis.get(self.owner))
            if self._stop.wait(self.heartbeat_s / 3):
                return

    def beat(self) -> None:
        """Renew the heartbeat (only while this writer holds it), and now and then take back what writers without
        one left in flight. Raises ``WriterIdLost`` when another live writer holds this id."""
        held = self._beat(keys=[self.owner], args=[self._token, int(self.heartbeat_s * 1000)])
        if held == 0:
            raise WriterIdLost(f"writer id {self.writer_id!r} is held by another live writer "
                               f"({(self.redis.get(self.owner) or b'?').decode(errors='replace')})")
        if held == 2:
            log.warning("writer heartbeat had run out; id taken again", writer_id=self.writer_id)
        if time.monotonic() >= self._next_reclaim:
            self._next_reclaim = time.monotonic() + self.heartbeat_s / 3
            self.reclaim_orphans()
            self.check_epoch()

    def reclaim_orphans(self) -> int:
        """Move the entries of in-flight lists whose writer has no heartbeat back to the head of the queue (and set the
        write queue's byte count right when the queue and every in-flight list are empty)."""
        moved = 0
        lists = list(self.redis.scan_iter(match=inflight_key("*")))
        for key in lists:
            orphan = key.decode().removeprefix(inflight_key(""))
            if orphan == self.writer_id:
                continue
            # Checked and moved in one step: a writer renewing its heartbeat meanwhile keeps its list.
            count = self._reclaim(keys=[owner_key(orphan), key, WRITE_QUEUE])
            if count > 0:
                moved += count
                log.warning("reclaimed an orphaned in-flight list", writer_id=orphan, entries=count)
        if (drift := self._reconcile(keys=[WRITE_BYTES, WRITE_QUEUE, self.inflight, *lists])) > 0:
            log.warning("write queue byte count reset: the queue is empty", counted=drift)
        return moved

    def check_epoch(self) -> BrokerEpoch | None:
        """Start a broker epoch when the broker has none, and record it with the one before it: a broker that came
        back empty lost its queued work, counted from then on (``vigil.worker.pipeline.broker_epoch``)."""
        epoch = broker_epoch.begin(self.redis)
        if epoch is None:
            return None
        try:
            with self.lock:
                last = self.store.query(
                    "SELECT epoch, run_id FROM broker_epochs FINAL ORDER BY started_at DESC LIMIT 1").result_rows
            row = broker_epoch.epoch_row(epoch, tuple(last[0]) if last else None)
            self._insert("broker_epochs", [row])
        except Exception:
            broker_epoch.abandon(self.redis, epoch)  # not recorded: the next check starts it again
            raise
        if row.previous:
            log.error("BROKER CAME BACK EMPTY: queued work was lost (Redis restarted without persistence, or "
                      "flushed); turns sampled before the reset that never got an outcome are counted lost",
                      reset_at=row.reset_at.isoformat(), epoch=row.epoch, previous=row.previous)
        return row

    def release(self) -> bool:
        """Give up this writer id, if this writer still holds it."""
        return bool(self._release(keys=[self.owner], args=[self._token]))

    def run(self) -> None:
        self.claim()
        log.info("writer started", inflight=self.inflight)
        while not self._stop.is_set():
            try:
                self.run_once()
            except WriterIdLost as exc:
                # Two writers with one id (a copy started with the same --writer-id, or this process stalled past
                # its heartbeat and a replacement took over): the other one writes; this one waits as a standby.
                log.error("WRITER ID TAKEN BY ANOTHER LIVE WRITER: this writer stops writing and waits to take it "
                          "back; give each writer its own --writer-id", writer_id=self.writer_id, error=str(exc))
                self.claim()
            except redis.ConnectionError as exc:  # the broker watch says so, once per interval
                log.debug("writer cannot reach redis; retrying", error=str(exc))
                self._stop.wait(1.0)
            except Exception as exc:  # an insert failed: keep the batch in flight and try again
                log.exception("writer insert failed; batch kept in flight", error=str(exc))
                self._stop.wait(1.0)
        try:
            if self._beat(keys=[self.owner], args=[self._token, int(self.heartbeat_s * 1000)]):
                self.flush_inflight()
                self.release()
        except Exception:  # the batch stays in flight; the next writer with this id, or a reclaim, inserts it
            log.exception("final flush failed; batch kept in flight")
        log.info("writer stopped", written=dict(self.written))

    def start(self) -> Writer:
        self._thread = threading.Thread(target=self.run, name="vigil-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        if self.reads is not None:
            self.reads.stop()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def _dead(payload: bytes | str, reason: str, error_type: str) -> DeadLetter:
    text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
    return DeadLetter(dead_id=sha256(text.encode("utf-8", "replace")).hexdigest()[:32],
                      received_at=datetime.now(UTC), queue=WRITE_QUEUE, reason=reason[:4000],
                      error_type=error_type, payload=text[:100_000])


_current: Writer | None = None


def current_writer() -> Writer | None:
    """This process's writer, if it runs one (then it also holds the store open)."""
    return _current


def open_writer(redis_url: str, dsn: str, writer_id: str) -> Writer:
    """This process's writer: open and migrate the store now, so a worker whose store is unreachable fails at start,
    not silently. On chDB it also serves reads of the store to other local processes (``vigil report``)."""
    from vigil.worker.serving.keys import KeyRing
    from vigil.worker.settings import get_settings
    from vigil.worker.store import connect, migrate
    from vigil.worker.store.clickhouse import chdb_dir
    from vigil.worker.store.read_server import ReadServer

    global _current
    settings = get_settings()
    store = connect(dsn)
    migrate(store)
    _current = Writer(broker(redis_url).redis(), store, writer_id=writer_id,
                      batch_rows=settings.write_batch_rows, batch_age_s=settings.write_batch_age_s)
    if (directory := chdb_dir(dsn)) is not None:
        _current.reads = ReadServer(connect(dsn), directory, writer_client=store, writer_lock=_current.lock,
                                    read_keys=KeyRing.reading(_config()), connect=lambda: connect(dsn)).start()
    return _current


def _config():
    """The config whose projects' read keys the read endpoint takes; None without one."""
    from vigil.worker.settings import ConfigNotSet, monitor_config

    try:
        return monitor_config()
    except ConfigNotSet:
        return None
