"""The periodic regression check: ``vigil beat`` (``vigil.worker.cli.worker``) schedules it, the writer process runs it.

The check reads and writes ClickHouse, so it runs where the store is open: the task goes to the ``vigil.alerts``
queue, which only ``vigil worker --writer`` consumes (on chDB that is the one process allowed to open the
directory). Run exactly one ``vigil beat`` per deployment.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import structlog
from vigil.worker.pipeline.app import ALERTS_QUEUE, INGEST_QUEUE, app
from vigil.worker.settings import get_settings, monitor_config

__all__ = ["check_alerts_task", "schedule"]

log = structlog.get_logger("vigil.beat")


@app.task(name="vigil.check_alerts", ignore_result=True)
def check_alerts_task() -> int:
    from vigil.worker.alerts import check_alerts
    from vigil.worker.pipeline.runtime import runtime
    from vigil.worker.sinks.writer import current_writer

    writer = current_writer()
    if writer is None:
        log.warning("alert check received by a process without a writer; skipped")
        return 0
    rt = runtime()
    with writer.lock:
        events = check_alerts(writer.store, monitor_config(), now=datetime.now(UTC),
                              paused_judges=lambda: _paused(rt.redis))
    return len(events)


def _paused(client) -> dict[str, str]:
    """Paused judges by name, read synchronously from the hash ``vigil.worker.judge.pause`` keeps."""
    from vigil.worker.judge.pause import PAUSED_KEY, Pause

    return {(name.decode() if isinstance(name, bytes) else name): Pause(**json.loads(raw)).reason
            for name, raw in client.hgetall(PAUSED_KEY).items()}


def schedule() -> dict:
    from vigil.worker.intake.settings import intake_settings

    interval = get_settings().alerts_interval_s
    sweep = max(intake_settings().settle_s, 5.0)  # a backstop: each span batch schedules its own sweep
    return {"vigil-check-alerts": {"task": "vigil.check_alerts", "schedule": float(interval),
                                   "options": {"queue": ALERTS_QUEUE, "expires": float(interval)}},
            "vigil-assemble-traces": {"task": "vigil.assemble_traces", "schedule": sweep,
                                      "options": {"queue": INGEST_QUEUE, "expires": sweep}},
            "vigil-close-sessions": {"task": "vigil.close_sessions", "schedule": 60.0,
                                     "options": {"queue": INGEST_QUEUE, "expires": 60.0}}}
