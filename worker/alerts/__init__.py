"""The built-in regression detector: recent vs baseline windows, thresholds, renotify and resolve, webhooks."""

from vigil.worker.alerts.check import DEFAULT_RULES, check_alerts
from vigil.worker.alerts.model import AlertEvent
from vigil.worker.alerts.notify import WebhookNotifier

__all__ = ["DEFAULT_RULES", "AlertEvent", "WebhookNotifier", "check_alerts"]
