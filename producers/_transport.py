"""How a batch leaves the process: one Celery task message, ``vigil.ingest(batch)`` on queue ``vigil.ingest``.

Celery's message protocol 2 with the JSON serializer, published to the anonymous exchange so the Redis transport
does one round trip per batch: a MULTI/EXEC holding the ``LPUSH`` and its journal entry (``schemas.broker``; the
first publish of a process also declares the queue). Celery is imported
on the shipper thread at the first send, never on the agent's.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from schemas.broker import INGEST_QUEUE, INGEST_TASK, broker_ssl

if TYPE_CHECKING:
    from celery import Celery
    from kombu import Producer

__all__ = ["INGEST_QUEUE", "INGEST_TASK", "CeleryTransport", "Transport"]



class Transport(Protocol):
    """Sends one batch of wire turns or raises; called only from the shipper thread."""

    def send(self, batch: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class CeleryTransport:
    """A minimal Celery app (``vigil-producer``) publishing ``vigil.ingest`` tasks without retries of its own.

    It owns its broker connection and producer rather than borrowing kombu's process-wide pools, so closing it
    touches nothing else in the process; after a failed send the connection is rebuilt, and a forked child
    builds its own rather than share the parent's sockets.
    """

    def __init__(self, redis_url: str, *, socket_timeout: float = 5.0, connect_timeout: float = 2.0) -> None:
        self.redis_url = redis_url
        self._ssl = broker_ssl(redis_url)  # TLS for rediss:// (a bad URL fails here, on the caller's thread)
        self._options = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
            "max_retries": 0,  # the shipper owns retries (backoff and spool); kombu must fail fast
        }
        self._app: Celery | None = None
        self._producer: Producer | None = None
        self._pid = 0

    def send(self, batch: list[dict[str, Any]]) -> None:
        app, producer = self._connected()
        try:
            app.send_task(
                INGEST_TASK,
                args=[batch],
                queue=INGEST_QUEUE,
                producer=producer,
                retry=False,
                ignore_result=True,
                argsrepr=f"[<{len(batch)} turns>]",
                kwargsrepr="{}",
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._producer is not None and self._pid == os.getpid():
            self._producer.connection.release()
        self._app = self._producer = None

    def _connected(self) -> tuple[Celery, Producer]:
        if self._app is None or self._producer is None or self._pid != os.getpid():
            from celery import Celery

            from schemas.broker import TRANSPORT

            app = Celery("vigil-producer", broker=self.redis_url, set_as_current=False)
            app.conf.update(
                broker_transport=TRANSPORT,  # journaled: a delivery lost to a killed worker is delivered again
                task_serializer="json",
                accept_content=["json"],
                broker_connection_retry=False,
                broker_connection_retry_on_startup=False,
                broker_transport_options=self._options,
                broker_use_ssl=self._ssl,
                task_create_missing_queues=True,
            )
            self._app, self._pid = app, os.getpid()
            self._producer = app.amqp.Producer(app.connection_for_write(), auto_declare=False)
        return self._app, self._producer
