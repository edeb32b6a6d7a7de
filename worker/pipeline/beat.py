"""The periodic regression check: every writer process runs it every ``VIGIL_ALERTS_INTERVAL`` seconds, once per
interval across the deployment; ``vigil beat`` (``vigil.worker.cli.worker``) also schedules it.

The check reads and writes ClickHouse, so it runs where the store is open: in a ``vigil worker --writer`` process
(on chDB the one process allowed to open the directory), on its own thread (``AlertTicker``), and for the task the
beat sends to the ``vigil.alerts`` queue, which only writers consume. Whoever comes first in an interval claims it
in Redis (``claim_check``: ``SET NX`` with a TTL just under the interval), so any number of writers, with or without
a beat, run one check per interval; the detector is idempotent besides (it reads ``alerts`` before it notifies).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from datetime import UTC, datetime

import structlog
from vigil.worker.pipeline.app import ALERTS_QUEUE, INGEST_QUEUE, app
from vigil.worker.settings import get_settings, monitor_config

__all__ = ["CHECK_CLAIM_KEY", "AlertTicker", "check_alerts_task", "claim_check", "schedule"]

log = structlog.get_logger("vigil.beat")

CHECK_CLAIM_KEY = "vigil.alerts.claimed"


def claim_check(client, interval_s: float) -> bool:
    """True for the one caller that may run this interval's check: the key is set only when absent and expires just
    before the next interval (90% of it), so a writer ticking every ``interval_s`` seconds never loses its turn to
    its own timer's jitter, and at most one check in ~0.9 intervals runs."""
    ttl_ms = max(1, int(interval_s * 900))
    return bool(client.set(CHECK_CLAIM_KEY, f"{socket.gethostname()}-{os.getpid()}", nx=True, px=ttl_ms))


def run_claimed_check() -> int:
    """The check, in a writer process, if this interval is still unclaimed: the number of alert events. Then the
    anchor sets that are due (``vigil.worker.alerts.anchors``), each claimed on its own schedule."""
    from vigil.worker.alerts import check_alerts
    from vigil.worker.alerts.anchors import run_due
    from vigil.worker.pipeline.runtime import runtime
    from vigil.worker.sinks.writer import current_writer

    writer = current_writer()
    if writer is None:
        log.warning("alert check received by a process without a writer; skipped")
        return 0
    rt = runtime()
    if not claim_check(rt.redis, get_settings().alerts_interval_s):
        return 0
    config = monitor_config()  # read once a tick: the check and the anchor sets run the same rules
    with writer.lock:
        events = check_alerts(writer.store, config, now=datetime.now(UTC), paused_judges=lambda: _paused(rt.redis))
    run_due(rt, lambda rows: _insert_anchor_rows(writer, rows), config)  # judged outside the lock
    return len(events)


def _insert_anchor_rows(writer, rows: list[list]) -> None:
    from vigil.worker.alerts.anchors import ANCHOR_COLUMNS

    with writer.lock:
        writer.store.insert("anchor_scores", rows, column_names=list(ANCHOR_COLUMNS))


@app.task(name="vigil.check_alerts", ignore_result=True)
def check_alerts_task() -> int:
    return run_claimed_check()


class AlertTicker:
    """A writer's own schedule: every ``interval_s`` seconds, the check if no one else ran it this interval. A failed
    check is logged and the next interval tries again; the thread stops with the worker."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vigil-alert-ticker", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                run_claimed_check()
            except Exception as exc:  # a store or broker hiccup: the next interval tries again
                log.exception("alert check failed; next interval retries", error=str(exc)[:200])

    def start(self) -> AlertTicker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


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
