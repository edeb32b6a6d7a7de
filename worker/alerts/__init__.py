"""The built-in regression detector: recent vs baseline windows, thresholds, renotify and resolve, webhooks."""

from worker.alerts.check import DEFAULT_RULES, check_alerts
from worker.alerts.model import AlertEvent
from worker.alerts.notify import WebhookNotifier

__all__ = ["DEFAULT_RULES", "AlertEvent", "WebhookNotifier", "check_alerts"]
