"""How a batch leaves the process: one Celery task message, ``vigil.ingest(batch)`` on queue ``vigil.ingest``.

Celery's message protocol 2 with the JSON serializer, written with kombu alone (the SDK needs Celery's message
format, not Celery: no worker, no CLI in the agent's environment), published to the anonymous exchange so the
Redis transport does one round trip per batch: a MULTI/EXEC holding the ``LPUSH`` and its journal entry
(``vigil.schemas.broker``; the first publish of a process also declares the queue). kombu connects on the shipper
thread at the first send, never on the agent's.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from vigil.schemas.broker import (
    DEFAULT_MESSAGE_BYTES,
    INGEST_QUEUE,
    INGEST_TASK,
    SHIPPED_HEADERS,
    MessageTooLarge,
    broker,
)

if TYPE_CHECKING:
    from kombu import Connection, Producer

__all__ = ["INGEST_QUEUE", "INGEST_TASK", "CelerySender", "Sender", "task_message"]


def task_message(task: str, args: list[Any], *, argsrepr: str) -> tuple[tuple, dict[str, Any], str]:
    """(body, headers, task id) of a Celery protocol-2 task message with no callbacks, as ``send_task`` makes it."""
    task_id = str(uuid.uuid4())
    headers = {
        "lang": "py", "task": task, "id": task_id, "shadow": None, "eta": None, "expires": None, "group": None,
        "group_index": None, "retries": 0, "timelimit": [None, None], "root_id": task_id, "parent_id": None,
        "argsrepr": argsrepr, "kwargsrepr": "{}", "origin": f"vigil-sdk-{os.getpid()}@{socket.gethostname()}",
        "ignore_result": True, "replaced_task_nesting": 0, "stamped_headers": None, "stamps": {},
    }
    body = (args, {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None})
    return body, headers, task_id


class Sender(Protocol):
    """Sends one batch of wire turns or raises; called only from the shipper thread."""

    def send(self, batch: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class CelerySender:
    """Publishes ``vigil.ingest`` task messages in Celery's format over its own kombu connection, no retries.

    It owns its broker connection and producer rather than borrowing kombu's process-wide pools, so closing it
    touches nothing else in the process; after a failed send the connection is rebuilt, and a forked child
    builds its own rather than share the parent's sockets.
    """

    def __init__(self, redis_url: str, *, socket_timeout: float = 5.0, connect_timeout: float = 2.0,
                 max_message_bytes: int = DEFAULT_MESSAGE_BYTES) -> None:
        self.redis_url = redis_url
        self._broker = broker(redis_url)  # TLS, Sentinel (a bad URL fails here, on the caller's thread)
        self._options = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
            "max_retries": 0,  # the shipper owns retries (backoff and spool); kombu must fail fast
            "max_message_bytes": max_message_bytes,  # a batch workers would refuse unread raises MessageTooLarge
            **self._broker.options,
        }
        self._producer: Producer | None = None
        self._declared = False
        self._pid = 0
        # Delivery accounting (SHIPPED_HEADERS): a retried batch carries the same numbers until one send succeeds.
        self._producer_id, self._batches, self._shipped = "", 0, 0

    def send(self, batch: list[dict[str, Any]]) -> None:
        producer = self._connected()
        body, headers, task_id = task_message(INGEST_TASK, [batch], argsrepr=f"[<{len(batch)} turns>]")
        numbers = (self._producer_id, self._batches + 1, self._shipped + len(batch))
        headers.update(zip(SHIPPED_HEADERS, numbers, strict=True))
        try:
            producer.publish(
                body, exchange="", routing_key=INGEST_QUEUE, serializer="json", headers=headers,
                correlation_id=task_id, delivery_mode=2, retry=False,
                declare=[] if self._declared else [_ingest_queue()],
            )
            self._declared = True
        except MessageTooLarge:
            raise  # nothing was pushed and the connection is fine: the caller sends smaller batches
        except BaseException:
            self.close()
            raise
        self._batches, self._shipped = numbers[1], numbers[2]

    def close(self) -> None:
        if self._producer is not None and self._pid == os.getpid():
            self._producer.connection.release()
        self._producer = None

    def _connected(self) -> Producer:
        if self._producer is None or self._pid != os.getpid():
            from kombu import Connection, Producer

            connection: Connection = Connection(
                self._broker.url,
                transport=self._broker.transport,  # journaled: a delivery lost to a killed worker is delivered again
                transport_options=self._options,
                ssl=self._broker.ssl or False,
            )
            if self._pid != os.getpid():  # a new process (or a forked child): a producer of its own
                self._producer_id, self._batches, self._shipped = uuid.uuid4().hex, 0, 0
            self._producer, self._pid, self._declared = Producer(connection, auto_declare=False), os.getpid(), False
        return self._producer


def _ingest_queue() -> Any:
    from kombu import Exchange, Queue

    return Queue(INGEST_QUEUE, Exchange(INGEST_QUEUE, type="direct"), routing_key=INGEST_QUEUE)
