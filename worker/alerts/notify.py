"""Telling people: a structlog line and an OpenTelemetry span event for every alert event (always), and a
Slack-compatible webhook POST (``{"text": ...}``) through a ``Notifier``. A failed POST is logged, never raised:
one unreachable webhook must not stop the other alerts.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import structlog
from opentelemetry import trace
from vigil.worker.alerts.model import AlertEvent

__all__ = ["Notifier", "WebhookNotifier", "emit_event", "log_event"]

Notifier = Callable[[AlertEvent], None]

log = structlog.get_logger("vigil.alerts")


def log_event(event: AlertEvent) -> None:
    fields = event.model_dump(mode="json", exclude={"message"})
    method = log.warning if event.state == "firing" else log.info
    method(f"alert {event.action}", alert_message=event.message, **fields)


def _attributes(event: AlertEvent) -> dict[str, Any]:
    data = event.model_dump(mode="json")
    return {f"vigil.alert.{k}": v for k, v in data.items() if v is not None and v != ""}


def emit_event(event: AlertEvent, tracer: trace.Tracer | None = None) -> None:
    """A short ``vigil.alert`` span carrying the event ``vigil.alert.<action>`` (exported by whatever OTLP is set)."""
    tracer = tracer or trace.get_tracer("vigil.alerts")
    attributes = _attributes(event)
    with tracer.start_as_current_span("vigil.alert", attributes=attributes) as span:
        span.add_event(f"vigil.alert.{event.action}", attributes=attributes)


class WebhookNotifier:
    """POST ``{"text": ...}`` to the rule's ``webhook_url``, else ``VIGIL_ALERT_WEBHOOK_URL``; no URL, no POST."""

    def __init__(self, default_url: str | None = None, *, timeout_s: float = 5.0) -> None:
        self.default_url = default_url if default_url is not None else os.environ.get("VIGIL_ALERT_WEBHOOK_URL")
        self.timeout_s = timeout_s

    def __call__(self, event: AlertEvent) -> None:
        url = event.webhook_url or self.default_url
        if not url:
            return
        body = json.dumps({"text": event.text()}).encode("utf-8")
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                status = response.status
        except (urllib.error.URLError, OSError) as exc:
            log.error("alert webhook failed", alert_id=event.alert_id, rule=event.rule, error=str(exc))
            return
        log.info("alert webhook sent", alert_id=event.alert_id, rule=event.rule, status=status)
