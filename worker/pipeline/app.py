"""The Celery app: Redis broker, JSON only, acks late, redelivery on a lost worker."""

from __future__ import annotations

from celery import Celery
from vigil.schemas.broker import (
    ALERTS_QUEUE,
    INGEST_QUEUE,
    INGEST_TASK,
    SCORE_QUEUE,
    SPANS_TASK,
    broker,
)
from vigil.worker.settings import get_settings

__all__ = ["ALERTS_QUEUE", "INGEST_QUEUE", "SCORE_QUEUE", "app", "configure"]


app = Celery("vigil", include=["vigil.worker.pipeline.tasks", "vigil.worker.pipeline.beat", "vigil.worker.pipeline.poison",
                               "vigil.worker.assembly.tasks"])


def configure(broker_url: str | None = None) -> Celery:
    settings = get_settings()
    url = broker(broker_url or settings.redis_url or "redis://127.0.0.1:6379/0")
    app.conf.update(
        broker_url=url.url,
        broker_transport=url.transport,  # Redis with a journal: kill -9 between pop and unacked loses nothing
        broker_use_ssl=url.ssl,  # the forced transport would otherwise speak plaintext to rediss://
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,
        # At-least-once: a task is acked after it ran; a killed worker's tasks are redelivered.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One prefetched task per thread: a prefetched task waits in this process and must not outlive the
        # visibility timeout there, or the sweep redelivers it while it is still held.
        worker_prefetch_multiplier=1,
        # Deliveries a dead worker never acked go back on their queue after visibility_timeout; the sweep that
        # finds them runs every restore_interval seconds in every live worker.
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            "unacked_restore_interval": settings.restore_interval_s,
            "unacked_restore_throttle": 1,
            "unacked_restore_limit": 1000,
            # A larger message is dead-lettered before it is decoded (decoding multiplies its size in memory)
            "max_message_bytes": settings.max_message_bytes,
            **url.options,  # Sentinel: the master's name
        },
        broker_connection_retry_on_startup=True,
        task_routes={INGEST_TASK: {"queue": INGEST_QUEUE}, "vigil.score": {"queue": SCORE_QUEUE},
                     SPANS_TASK: {"queue": INGEST_QUEUE}, "vigil.assemble_traces": {"queue": INGEST_QUEUE},
                     "vigil.close_sessions": {"queue": INGEST_QUEUE},
                     "vigil.check_alerts": {"queue": ALERTS_QUEUE}},
        task_default_queue=SCORE_QUEUE,
        # Celery's consumer, but a message it cannot turn into a task is dead-lettered, not fatal (celery#1113)
        worker_consumer="vigil.worker.pipeline.poison:Consumer",
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    return app


configure()
