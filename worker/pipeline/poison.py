"""Poison messages: whatever arrives on vigil's queues, the worker dead-letters what it cannot run and goes on.

Anyone holding the Redis URL can push anything. Three layers keep one bad message from stopping the fleet:

- the transport (``vigil.schemas.broker``) delivers an item that is not a kombu envelope as a ``vigil.undeliverable``
  task, which ``undeliverable`` below dead-letters;
- ``Consumer`` checks a task message's body before Celery builds a request from it (Celery unpacks it as
  ``[args, kwargs, embed]`` in its consumer loop, where an exception is "unrecoverable": celery/celery#1113),
  binds the arguments to the task's signature, and turns anything else its strategy raises into a dead letter;
- the signals dead-letter what Celery itself rejects (unknown task, content type not accepted, bad ETA) and any
  exception that escapes a task.

Each becomes a ``dead_letters`` row naming the queue and the reason; the message is then acked (removed from the
journal), so a restart does not meet it again.

The same consumer rides out a broker that refuses writes because it is full (``maxmemory`` with ``noeviction``):
the transport counts that error a connection error (``vigil.schemas.broker.JournaledTransport``), so Celery reconnects instead of
stopping the worker; here each refusal is logged loudly (``REDIS IS OUT OF MEMORY``) and the next attempt waits,
doubling up to 30 s, so a full broker is not hammered. Messages stay in Redis (journaled) until the worker can
take them.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import structlog
from celery import signals
from celery.worker import state as worker_state
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.exceptions import DecodeError
from redis.exceptions import OutOfMemoryError
from vigil.schemas.backoff import backoff
from vigil.schemas.broker import UNDELIVERABLE_TASK
from vigil.worker.pipeline.app import app
from vigil.worker.pipeline.runtime import runtime
from vigil.worker.pipeline.tasks import dead_letter
from vigil.worker.redact import redact
from vigil.worker.sinks.write_queue import push
from vine import promise

__all__ = ["Consumer", "body_problem", "undeliverable"]

log = structlog.get_logger("vigil.poison")


def _record(queue: str, payload: Any, reason: str, error_type: str) -> None:
    push(runtime().redis, [("dead_letters", [dead_letter(queue, payload, redact(reason), error_type)])])


def _raw(message: Any) -> str:
    body = getattr(message, "body", b"")
    return body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)


def _queue(message: Any) -> str:
    info = getattr(message, "delivery_info", None) or {}
    return str(info.get("routing_key") or "celery")


def body_problem(task: Any, payload: Any) -> str | None:
    """Why this decoded protocol-2 body cannot run ``task``, or None: it must be ``[args, kwargs, embed]`` and the
    arguments must bind to the task's signature."""
    if not isinstance(payload, list | tuple) or len(payload) != 3:
        kind = f"a list of {len(payload)}" if isinstance(payload, list | tuple) else type(payload).__name__
        return f"body must be [args, kwargs, embed], got {kind}"
    args, kwargs, embed = payload
    if not isinstance(args, list | tuple):
        return f"body: args must be a list, got {type(args).__name__}"
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        return f"body: kwargs must be an object, got {type(kwargs).__name__}"
    if not isinstance(embed, dict | None):
        return f"body: embed must be an object, got {type(embed).__name__}"
    try:
        inspect.signature(task.run).bind(*args, **kwargs)
    except TypeError as exc:
        return f"arguments: {exc}"
    return None


class Consumer(CeleryConsumer):
    """Celery's consumer, with every message it cannot turn into a request dead-lettered and acked, and a full
    broker waited out."""

    _MAX_WAIT_S = 30.0
    _full_streak = 0  # consecutive refusals of a full broker, reset by the next message received

    def on_connection_error_before_connected(self, exc):
        self._wait_if_full(exc)
        super().on_connection_error_before_connected(exc)

    def on_connection_error_after_connected(self, exc):
        self._wait_if_full(exc)
        super().on_connection_error_after_connected(exc)

    def _wait_if_full(self, exc: BaseException) -> None:
        if not isinstance(exc, OutOfMemoryError):
            return
        self._full_streak += 1
        wait = backoff(self._full_streak, initial=2.0, maximum=self._MAX_WAIT_S, rand=None)  # 2, 4, ... 30 s
        log.error("REDIS IS OUT OF MEMORY: the broker refuses writes (maxmemory reached with noeviction); this "
                  "worker keeps its place and retries. Free memory or raise maxmemory on the broker",
                  error=str(exc), attempt=self._full_streak, retry_in_s=wait)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not _stopping():
            time.sleep(0.2)  # a shutdown is still answered at once

    def create_task_handler(self, promise=promise):
        handler = super().create_task_handler(promise)

        def on_task_received(message):
            self._full_streak = 0
            try:
                headers = message.headers
                task = self.app.tasks.get(headers.get("task")) if isinstance(headers, dict) else None
                if task is not None and task.name.startswith("vigil."):
                    try:
                        payload = message.payload  # decoded once: Celery reuses the cache
                    except DecodeError as exc:
                        return self.on_decode_error(message, exc)
                    problem = body_problem(task, payload)
                    if problem is not None:
                        return self._dead_letter(message, problem, "malformed_message")
                return handler(message)
            except self.connection_errors:
                raise
            except Exception as exc:  # noqa: BLE001 (anything else would stop the consumer: the message is the problem)
                return self._dead_letter(message, f"{type(exc).__name__}: {exc}", "undeliverable_message")

        return on_task_received

    def on_decode_error(self, message, exc):
        self._dead_letter(message, f"body does not decode: {exc}", "decode_error")

    def _dead_letter(self, message, reason: str, error_type: str) -> None:
        _record(_queue(message), _raw(message), reason, error_type)
        if not message.acknowledged:
            message.reject(requeue=False)  # removes it from the journal too


def _stopping() -> bool:
    """Whether a shutdown was asked for (Celery's flags hold an exit code, 0 included, once set)."""
    return any(flag is not None and flag is not False for flag in (worker_state.should_stop,
                                                                   worker_state.should_terminate))


@app.task(name=UNDELIVERABLE_TASK)
def undeliverable(text: str, queue: str, reason: str) -> None:
    """What the transport could not deliver as a message (see ``vigil.schemas.broker.envelope``)."""
    _record(str(queue), str(text), str(reason), "undeliverable_message")


@signals.task_unknown.connect
def _unknown_task(sender=None, name=None, id=None, message=None, exc=None, **_: Any) -> None:
    _record(_queue(message), _raw(message), f"task: unknown task {name!r}", "unknown_task")


@signals.task_rejected.connect
def _rejected(sender=None, message=None, exc=None, **_: Any) -> None:
    _record(_queue(message), _raw(message), f"message rejected: {exc!r}", "rejected_message")


@signals.task_failure.connect
def _failed(sender=None, task_id=None, exception=None, args=None, kwargs=None, **_: Any) -> None:
    """A vigil task that raised (a bug, or input no check caught): its message is acked, so keep what it carried."""
    name = getattr(sender, "name", "")
    if not name.startswith("vigil."):
        return
    queue = (getattr(getattr(sender, "request", None), "delivery_info", None) or {}).get("routing_key") or name
    try:
        _record(queue, {"task": name, "args": args, "kwargs": kwargs},
                f"task {name} raised {type(exception).__name__}: {exception}", "task_failed")
    except Exception:
        log.exception("could not dead-letter a failed task", task=name, task_id=task_id)
