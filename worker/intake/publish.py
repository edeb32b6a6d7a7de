"""How the intake writes: Celery task messages on the journaled Redis transport (``vigil.schemas.broker``), one Redis
transaction per request, never retried here: a failure is answered 503 and the sender retries (OTLP exporters do).

Each publishing thread owns its producer and connection; a failed publish drops that connection, so the next
request connects again (to a Redis that may be back).
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from vigil.schemas.broker import INGEST_QUEUE, broker

__all__ = ["BROKER_ERRORS", "REFUSED", "Publisher"]

REFUSED = "vigil.intake.refused"  # a hash: budget -> requests refused for it (429), by every intake

BROKER_ERRORS = (redis.RedisError, OperationalError, ConnectionError, TimeoutError, OSError)


class Publisher:
    def __init__(self, redis_url: str, *, socket_timeout: float = 5.0, max_message_bytes: int | None = None) -> None:
        url = broker(redis_url)
        self.app = Celery("vigil-intake", broker=url.url, set_as_current=False)
        self.app.conf.update(
            broker_transport=url.transport,
            broker_use_ssl=url.ssl,  # the forced transport would otherwise speak plaintext to rediss://
            task_serializer="json",
            accept_content=["json"],
            broker_connection_retry=False,
            broker_connection_retry_on_startup=False,
            # max_message_bytes: a message the workers would refuse unread raises MessageTooLarge here instead
            broker_transport_options={"socket_timeout": socket_timeout, "socket_connect_timeout": socket_timeout,
                                      "max_retries": 0, "max_message_bytes": max_message_bytes, **url.options},
        )
        self._redis = url.redis(socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)
        self._local = threading.local()
        self._producers: list[Any] = []
        self._lock = threading.Lock()

    def send(self, task: str, payload: list[Any], what: str, sender: dict[str, str] | None = None) -> None:
        """Publish ``task(payload, sender=sender)`` on the ingest queue (``sender``: who sent it, for the workers'
        log lines) or raise one of ``BROKER_ERRORS`` (``MessageTooLarge``
        when the message would be over ``max_message_bytes``)."""
        producer = getattr(self._local, "producer", None)
        if producer is None:
            producer = self.app.amqp.Producer(self.app.connection_for_write(), auto_declare=False)
            self._local.producer = producer
            with self._lock:
                self._producers.append(producer)
        try:
            self.app.send_task(task, args=[payload], kwargs={"sender": sender} if sender else {}, queue=INGEST_QUEUE,
                               producer=producer, retry=False,
                               ignore_result=True, argsrepr=f"[<{len(payload)} {what}>]", kwargsrepr="{}")
        except BaseException:
            self._local.producer = None
            self._release(producer)
            raise

    def pending(self) -> tuple[int, int]:
        """Traces whose spans wait in Redis to settle, and the bytes of their span records waiting
        (``vigil.worker.assembly.traces.PENDING``, ``PENDING_BYTES``)."""
        from vigil.worker.assembly.traces import PENDING, PENDING_BYTES

        pipe = self._redis.pipeline(transaction=False)
        pipe.zcard(PENDING)
        pipe.get(PENDING_BYTES)
        opened, held = pipe.execute()
        return int(opened), int(held or 0)

    def count_refusal(self, reason: str) -> None:
        """Count a request refused for a budget in Redis (``REFUSED``, a hash by reason), for every intake at once."""
        self._redis.hincrby(REFUSED, reason, 1)

    def _release(self, producer: Any) -> None:
        with self._lock:
            if producer in self._producers:
                self._producers.remove(producer)
        try:
            producer.connection.release()
        except Exception:  # noqa: BLE001, S110 - a broken connection may fail to close; it is dropped either way
            pass

    def close(self) -> None:
        self._redis.close()
        with self._lock:
            producers, self._producers = self._producers, []
        for producer in producers:
            try:
                producer.connection.release()
            except Exception:  # noqa: BLE001, S110
                pass
