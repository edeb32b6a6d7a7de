"""The SDK hook: ``Monitor.capture`` hands a finished turn to vigil without blocking or raising.

The agent's thread does constant work: a small tuple appended to a bounded deque under a lock held for a few
operations, and a wake-up of the shipper when a batch is full. The deque is bounded twice: ``max_queue`` turns and
``max_queue_bytes`` (each turn's size estimated from its text, ``vigil.producers._size``); a turn over either is dropped,
counted by reason (``queue_full``, ``queue_bytes``) and logged, never waited for. A daemon shipper thread turns
captured payloads into wire dicts, sends them in batches (one Redis round trip each), and while the broker is down backs off with
jitter and spools to a bounded local file, draining it in order when the broker returns. Nothing is lost silently:
every turn ends up shipped, in the spool, or counted as dropped with a reason (and logged). A turn the worker would
refuse is refused here instead: the shipper checks each one against ``schemas.Turn`` and drops what fails as
``invalid``, naming the field, rather than let it be dead-lettered downstream where the agent never hears of it.

The spool belongs to one broker and one user: by default it lives in ``$VIGIL_HOME/spool`` (or the user's cache
directory) under a name keyed by a hash of the broker URL without its password, so turns spooled for one broker
are never drained into another. Its path is logged the first time the monitor uses it.

``feedback`` (a user's thumbs or rating on a turn) takes the same path: it is checked on the agent's thread (a bad
argument is counted as dropped, with the field named in the log), queued, and shipped in the same batches as turns.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import platformdirs
from opentelemetry import trace as otel_trace
from opentelemetry.metrics import MeterProvider
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from vigil.schemas.backoff import backoff
from vigil.schemas.broker import (
    DEFAULT_MESSAGE_BYTES,
    MIN_MESSAGE_BYTES,
    MessageTooLarge,
)
from vigil.schemas.feedback import Feedback, problems
from vigil.schemas.trace import UNLABELLED, Turn

from ._http import HTTPSender
from ._log import get_logger
from ._metrics import observe
from ._scope import TurnScope, traced
from ._sender import CelerySender, Sender
from ._size import DEFERRED_BYTES, estimate
from ._spool import Spool
from ._wire import Unserializable, to_wire

__all__ = ["DropReason", "Monitor", "MonitorCounters", "MonitorSettings"]

_log = get_logger()


class MonitorSettings(BaseSettings):
    """Monitor configuration; each field can come from the environment (``VIGIL_<FIELD>``, and ``REDIS_URL``).
    With ``intake_url`` (``VIGIL_INTAKE_URL``) turns go to ``vigil intake`` over HTTP, and Redis is not used."""

    model_config = SettingsConfigDict(env_prefix="VIGIL_", extra="forbid", populate_by_name=True)

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0", validation_alias=AliasChoices("redis_url", "REDIS_URL")
    )
    intake_url: str | None = Field(default=None, description="ship to `vigil intake` over HTTP instead of Redis")
    intake_token: str | None = Field(default=None, description="bearer token for the intake, if it asks for one")
    project: str = "default"
    agent: str = "agent"
    environment: str = UNLABELLED  # VIGIL_ENVIRONMENT; unset: "unlabelled", never taken for production
    release: str | None = Field(default=None, description="VIGIL_RELEASE: the agent's version, metadata['release'] "
                                                          "of every turn that does not say its own")
    max_queue: int = Field(default=10_000, ge=1)
    max_queue_bytes: int = Field(default=64 * 2**20, ge=1, description="estimated bytes of the turns held in memory")
    batch_size: int = Field(default=256, ge=1)
    flush_interval: float = Field(default=1.0, gt=0, description="seconds a partial batch may wait")
    home: Path | None = Field(default=None, description="VIGIL_HOME: the spool lives in <home>/spool")
    spool_path: Path | None = Field(
        default=None, description="default: <home or the user cache dir>/spool/<project>-<agent>-<broker hash>.jsonl"
    )
    spool_max_bytes: int = Field(default=64 * 2**20, ge=0)
    backoff_initial: float = Field(default=0.5, gt=0)
    backoff_max: float = Field(default=30.0, gt=0)
    socket_timeout: float = Field(default=5.0, gt=0, description="per Redis command, on the shipper thread")
    max_message_bytes: int = Field(default=DEFAULT_MESSAGE_BYTES, ge=MIN_MESSAGE_BYTES,
                                   description="the workers' message budget: a larger batch is sent in parts")

    def resolved_spool_path(self) -> Path:
        if self.spool_path is not None:
            return self.spool_path
        root = self.home if self.home is not None else platformdirs.user_cache_path("vigil")
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{self.project}-{self.agent}")
        return root / "spool" / f"{name}-{broker_key(self.redis_url)}.jsonl"


def broker_key(url: str) -> str:
    """A short hash naming one broker: the URL without its password, so the key never carries the secret and
    two spellings that differ only by the password are the same broker."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{parts.username + '@' if parts.username else ''}{host}{':' + str(parts.port) if parts.port else ''}"
    return hashlib.sha256(urlunsplit(parts._replace(netloc=netloc)).encode()).hexdigest()[:16]


class DropReason(StrEnum):
    QUEUE_FULL = "queue_full"  # the in-memory queue was at max_queue
    QUEUE_BYTES = "queue_bytes"  # the turn would have taken the in-memory queue past max_queue_bytes
    SPOOL_FULL = "spool_full"  # the broker was down and the spool was at spool_max_bytes
    SPOOL_ERROR = "spool_error"  # the spool could not be written, or a spooled line could not be read back
    UNSERIALIZABLE = "unserializable"  # a value that is not JSON data, or an output with no text (names the field)
    TOO_LARGE = "too_large"  # one turn alone over the message budget (max_message_bytes, or the intake's 413)
    INVALID = "invalid"  # not a turn by schemas.Turn (a required field missing, a wrong type): the worker would refuse it
    NO_OUTPUT = "no_output"  # a turn scope or traced function ended without an output and without an error
    BAD_ARGUMENT = "bad_argument"  # capture() called with something that is not a turn, or feedback() with bad values
    CLOSED = "closed"  # captured after shutdown()


class MonitorCounters(BaseModel):
    """A snapshot of the monitor's counters. Turns offered = captured + those dropped on the agent's thread
    (queue_full, queue_bytes, bad_argument, closed); captured turns end shipped, pending (queued or spooled) or dropped later.
    Feedback items count as items in every counter; ``feedback`` says how many of the captured were feedback."""

    model_config = ConfigDict(frozen=True)

    captured: int
    shipped: int
    spooled: int
    dropped: dict[DropReason, int]
    drop_details: dict[DropReason, str] = Field(default_factory=dict, description="the latest detail per reason")
    queued: int
    queued_bytes: int = Field(default=0, description="estimated bytes of the queued turns (at most max_queue_bytes)")
    spool_pending: int
    spool_bytes: int
    send_failures: int
    broker_down: bool
    feedback: int = 0

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


_Item = tuple[Any, float, "otel_trace.SpanContext | None", int]  # payload, when, active span, estimated bytes


class Monitor:
    """Captures agent turns and ships them to vigil's ingest queue from a background thread.

    ``capture`` never blocks and never raises; ``flush(timeout)`` and ``shutdown(timeout)`` wait at most their
    deadline. Shutdown runs at interpreter exit. A forked child gets a fresh queue, spool file and shipper thread.
    The counters are also OpenTelemetry metrics (``vigil.sdk.*``), through the global MeterProvider unless
    ``meter_provider`` is given. ``sender`` replaces the Celery sender (tests wrap the real one).
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        sender: Sender | None = None,
        meter_provider: MeterProvider | None = None,
        **settings: Any,
    ) -> None:
        if redis_url is not None:
            settings["redis_url"] = redis_url
        self.settings = MonitorSettings(**settings)
        s = self.settings
        if sender is None and s.intake_url:
            sender = HTTPSender(s.intake_url, token=s.intake_token, timeout=s.socket_timeout)
        self._sender = sender or CelerySender(s.redis_url, socket_timeout=s.socket_timeout,
                                                       max_message_bytes=s.max_message_bytes)
        self._backoff = {"initial": s.backoff_initial, "maximum": s.backoff_max}
        self._defaults = {"project": s.project, "agent": s.agent, "environment": s.environment}
        self._release = s.release
        self._max_queue, self._max_queue_bytes, self._batch_size = s.max_queue, s.max_queue_bytes, s.batch_size
        self._closed = False
        self._start(Spool(s.resolved_spool_path(), s.spool_max_bytes))
        after_fork, shutdown = weakref.WeakMethod(self._after_fork), weakref.WeakMethod(self.shutdown)
        os.register_at_fork(after_in_child=lambda: (method := after_fork()) and method())
        atexit.register(lambda: (method := shutdown()) and method())
        observe(self, meter_provider)

    # -- the agent's thread ---------------------------------------------------------------------------------

    def capture(self, turn: Mapping[str, Any] | BaseModel | None = None, /, **fields: Any) -> bool:
        """Hand one finished turn to vigil: a mapping or ``schemas.Turn``, and/or keyword fields.

        Missing trace_id/span_id come from the active OpenTelemetry span (or a new trace id), missing
        project/agent/environment from the settings, started_at from now. The turn is converted later on the
        shipper thread, so a dict passed in must not be mutated afterwards. Returns whether the turn was queued;
        never raises and never waits.
        """
        try:
            if turn is None or type(turn) is dict or isinstance(turn, Mapping):
                payload: Any = fields if turn is None else {**turn, **fields} if fields else turn
                span = None if "trace_id" in payload else otel_trace.get_current_span().get_span_context()
            elif isinstance(turn, BaseModel) and not fields:
                payload, span = turn, None
            else:
                self._drop_now(DropReason.BAD_ARGUMENT, f"capture() takes a mapping or a Turn, not {type(turn).__name__}")
                return False
            return self._enqueue((payload, time.time(), span, estimate(payload)))
        except Exception as exc:  # noqa: BLE001 - the agent's thread must never see our errors
            self._drop_now(DropReason.BAD_ARGUMENT, repr(exc))
            return False

    def feedback(self, trace_id: str, name: str, value: float | bool, comment: str | None = None,
                 source: str = "user", *, author: str = "", scale: float = 1.0,
                 created_at: datetime | None = None) -> bool:
        """Record human feedback on the turn ``trace_id``: ``value`` on ``0..scale`` (thumbs: True/False; five
        stars: ``scale=5``), negative below half the scale. ``source`` is ``user`` or ``reviewer``; ``author``
        tells several people's feedback apart (the same author's feedback of the same name replaces the earlier,
        the newest ``created_at``, default now, winning).

        Same path as ``capture``: returns whether it was queued; never raises and never waits. Bad arguments are
        counted as dropped (``bad_argument``) and logged with the field they concern.
        """
        try:
            item = Feedback(project=self._defaults["project"], trace_id=trace_id, name=name, value=value,
                            comment=comment, source=source,
                            author=author, scale=scale, created_at=created_at or datetime.now(UTC))
        except ValidationError as exc:
            self._drop_now(DropReason.BAD_ARGUMENT, f"feedback() {problems(exc)}")
            return False
        except Exception as exc:  # noqa: BLE001 - the agent's thread must never see our errors
            self._drop_now(DropReason.BAD_ARGUMENT, f"feedback() {exc!r}")
            return False
        if not self._enqueue((item, time.time(), None, 512)):
            return False
        with self._lock:
            self._feedback += 1
        return True

    def capture_deferred(self, build: Callable[[], Mapping[str, Any]]) -> bool:
        """Queue a turn whose dict ``build()`` makes later, on the shipper thread (for producers whose
        conversion is not constant work, like the span processor). ``build`` may return a list of turns (counted
        as captured once built). A failing ``build`` counts as unserializable."""
        try:
            return self._enqueue((build, time.time(), None, DEFERRED_BYTES))
        except Exception as exc:  # noqa: BLE001
            self._drop_now(DropReason.BAD_ARGUMENT, repr(exc))
            return False

    def turn(self, **fields: Any) -> TurnScope:
        """A context manager around one agent turn: ``with monitor.turn(input=q) as t: ...; t.set(output=a)``."""
        return TurnScope(self, fields)

    def trace(self, *, input_arg: str | None = None, **fields: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorate an agent function (sync or async): one turn per call; see ``vigil.producers._scope.traced``."""
        return lambda fn: traced(self, fn, input_arg=input_arg, fields=fields)

    def _enqueue(self, item: _Item) -> bool:
        with self._lock:
            if self._closed:
                reason = DropReason.CLOSED
            elif len(self._queue) >= self._max_queue:
                reason = DropReason.QUEUE_FULL
            elif self._queued_bytes + item[3] > self._max_queue_bytes:
                reason = DropReason.QUEUE_BYTES
            else:
                self._queue.append(item)
                self._queued_bytes += item[3]
                self._captured += 1
                depth = len(self._queue)
                reason = None
        if reason is not None:
            self._drop_now(reason, f"~{item[3]} bytes; {self._queued_bytes} of max_queue_bytes {self._max_queue_bytes} "
                           f"held" if reason is DropReason.QUEUE_BYTES else "")
            return False
        if depth % self._batch_size == 0:
            self._wake.set()
        return True

    def _drop_now(self, reason: DropReason, detail: str, count: int = 1) -> None:
        """Count a drop; log it at the 1st, 2nd, 4th, 8th ... occurrence of its reason, so a storm stays cheap."""
        try:
            with self._lock:
                before = self._dropped[reason]
                self._dropped[reason] = total = before + count
                self._drop_details[reason] = detail[:500]
            if total.bit_length() > before.bit_length():
                _log.warning("vigil.turn_dropped", reason=str(reason), detail=detail[:500], dropped_so_far=total)
        except Exception:  # noqa: BLE001, S110 - logging must not raise into the agent either
            pass

    # -- anyone's thread ------------------------------------------------------------------------------------

    def counters(self) -> MonitorCounters:
        with self._lock:
            dropped = dict(self._dropped)
            details = dict(self._drop_details)
            captured, feedback = self._captured, self._feedback
        return MonitorCounters(
            captured=captured,
            shipped=self._shipped,
            spooled=self._spooled,
            dropped=dropped,
            drop_details=details,
            queued=len(self._queue),
            queued_bytes=self._queued_bytes,
            spool_pending=self._spool.pending,
            spool_bytes=self._spool.size,
            send_failures=self._send_failures,
            broker_down=self._attempt > 0,
            feedback=feedback,
        )

    def flush(self, timeout: float = 10.0) -> bool:
        """Ship (or, broker down, spool) every turn captured so far, trying the broker now even mid-backoff.

        Waits at most ``timeout`` seconds; returns whether everything captured so far has reached the broker.
        """
        if self._thread.is_alive():
            done = threading.Event()
            with self._lock:
                self._flushes.append(done)
            self._wake.set()
            done.wait(timeout)
        return not self._queue and not self._spool.pending

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Refuse new turns, make a last attempt at the broker, spool what it will not take, stop the shipper.

        Waits at most ``timeout`` seconds; returns whether everything reached the broker. Idempotent.
        """
        with self._lock:
            self._closed = True
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self._thread.is_alive():
            _log.error("vigil.shutdown_deadline", timeout=timeout, queued=len(self._queue))
            return False
        return not self._queue and not self._spool.pending

    # -- process state ---------------------------------------------------------------------------------------

    def _start(self, spool: Spool) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_Item] = deque()
        self._queued_bytes = 0
        self._wake = threading.Event()
        self._flushes: list[threading.Event] = []
        self._stopping = False
        self._captured = self._shipped = self._spooled = self._send_failures = self._feedback = 0
        self._dropped: Counter[DropReason] = Counter()
        self._drop_details: dict[DropReason, str] = {}
        self._spool_announced = False
        self._attempt, self._retry_at = 0, 0.0
        self._spool = spool
        self._thread = threading.Thread(target=self._run, name="vigil-shipper", daemon=True)
        if not self._closed:
            self._thread.start()

    def _after_fork(self) -> None:
        self._spool.abandon()
        parent = self.settings.resolved_spool_path()
        self._start(Spool(parent.with_name(f"{parent.name}.{os.getpid()}"), self.settings.spool_max_bytes))

    # -- the shipper thread ----------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._spool.recover()
        except OSError as exc:
            _log.error("vigil.spool_unavailable", path=str(self._spool.path), error=repr(exc))
        if self._spool.pending:
            self._announce_spool("recovered")
        while True:
            timed_out = not self._wake.wait(self._next_wait())
            self._wake.clear()
            with self._lock:
                flushes, self._flushes = self._flushes, []
            final = self._stopping
            try:
                self._pump(everything=timed_out or bool(flushes) or final, attempt_now=bool(flushes) or final)
            except Exception as exc:  # noqa: BLE001 - the shipper outlives its own bugs
                _log.exception("vigil.shipper_error", error=repr(exc))
            for done in flushes:
                done.set()
            if final:
                self._sender.close()
                self._spool.close()
                return

    def _next_wait(self) -> float:
        """The flush interval, or less when a retry of spooled turns falls due sooner."""
        interval = self.settings.flush_interval
        if self._attempt and self._spool.pending:
            return max(0.0, min(interval, self._retry_at - time.monotonic()))
        return interval

    def _pump(self, *, everything: bool, attempt_now: bool) -> None:
        """Drain the spool, then the turns queued now (only whole batches unless ``everything``), in order."""
        count = len(self._queue)
        if not everything:
            count -= count % self._batch_size
        online = attempt_now or time.monotonic() >= self._retry_at
        if online and self._spool.pending:
            online = self._drain_spool()
        while count > 0:
            items = [self._queue.popleft() for _ in range(min(count, self._batch_size))]
            with self._lock:
                self._queued_bytes -= sum(item[3] for item in items)
            count -= len(items)
            batch = self._wire(items)
            if online and not self._spool.pending and batch:
                batch = self._ship(batch)
                online = not batch
                if online:
                    continue
            self._to_spool(batch)

    def _wire(self, items: list[_Item]) -> list[dict[str, Any]]:
        batch = []
        for payload, at, span, _ in items:
            try:
                if isinstance(payload, Feedback):  # checked on the agent's thread already
                    batch.append(payload.wire())
                    continue
                if callable(payload) and not isinstance(payload, (Mapping, BaseModel)):
                    payload = payload()
                if isinstance(payload, list):  # a deferred builder made any number of turns (a whole trace)
                    with self._lock:
                        self._captured += len(payload) - 1
                turns = [to_wire(p, at, span, self._defaults, release=self._release) for p in (payload if isinstance(payload, list)
                                                                         else [payload])]
            except Exception as exc:  # noqa: BLE001 - a builder may raise anything
                reason = str(exc) if isinstance(exc, Unserializable) else f"building the turn failed: {exc!r}"
                self._drop_now(DropReason.UNSERIALIZABLE, reason)
                continue
            for turn in turns:
                try:
                    Turn.model_validate(turn)
                except Exception as exc:  # noqa: BLE001 - a validator's own bug costs this turn, not the batch
                    detail = _describe(exc) if isinstance(exc, ValidationError) else f"turn: {exc!r}"
                    self._drop_now(DropReason.INVALID, detail)
                    continue
                batch.append(turn)
        return batch

    def _ship(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send ``batch``, in halves while it is over the message budget; returns the turns not sent (an outage)."""
        try:
            return [] if self._send(batch) else batch
        except MessageTooLarge as exc:
            if len(batch) == 1:
                self._drop_now(DropReason.TOO_LARGE, str(exc))
                return []
            half = len(batch) // 2
            rest = self._ship(batch[:half])
            return rest + batch[half:] if rest else self._ship(batch[half:])

    def _send(self, batch: list[dict[str, Any]]) -> bool:
        """Send ``batch`` whole; False on an outage (backing off), ``MessageTooLarge`` when it is over budget."""
        try:
            self._sender.send(batch)
        except MessageTooLarge:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is an outage to ride out
            self._send_failures += 1
            self._attempt += 1
            delay = backoff(self._attempt, **self._backoff)
            self._retry_at = time.monotonic() + delay
            _log.warning("vigil.broker_unavailable", attempt=self._attempt, retry_in=round(delay, 3), error=repr(exc))
            return False
        if self._attempt:
            _log.info("vigil.broker_available", after_attempts=self._attempt, spool_pending=self._spool.pending)
        self._attempt, self._retry_at = 0, 0.0
        self._shipped += len(batch)
        return True

    def _drain_spool(self) -> bool:
        while self._spool.pending:
            turns, offset, unreadable = self._spool.peek(self._batch_size)
            if not turns and not unreadable:  # the file lost lines under us (deleted or truncated by hand)
                unreadable = self._spool.pending
            if unreadable:
                self._drop_now(DropReason.SPOOL_ERROR, f"{unreadable} unreadable spool lines", unreadable)
            if turns and self._ship(turns):
                return False  # what was sent of this peek goes again with the rest: duplicates, never losses
            self._spool.commit(offset, len(turns) + unreadable)
        return True

    def _announce_spool(self, why: str) -> None:
        """Say once where this monitor's spool is, so an operator can find (or clear) what waits there."""
        if not self._spool_announced:
            self._spool_announced = True
            _log.warning("vigil.spool_in_use", why=why, path=str(self._spool.path), pending=self._spool.pending)

    def _to_spool(self, batch: list[dict[str, Any]]) -> None:
        try:
            written = self._spool.append(batch)
        except (OSError, ValueError) as exc:
            self._drop_now(DropReason.SPOOL_ERROR, repr(exc), len(batch))
            return
        self._spooled += written
        if written:
            self._announce_spool("spooling")
        if written < len(batch):
            self._drop_now(DropReason.SPOOL_FULL, f"spool at {self._spool.size} bytes", len(batch) - written)



def _describe(error: ValidationError) -> str:
    """One line naming each field a turn failed on, as the worker's dead letter would."""
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or 'turn'}: {problem['msg']}" for problem in error.errors()[:5]
    )
