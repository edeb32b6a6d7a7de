"""structlog JSON lines; tasks bind trace_id, monitor and scorer through contextvars."""

from __future__ import annotations

import logging
import sys
import time

import structlog
from vigil.worker.redact import redact, redact_event, remember_environment

__all__ = ["Every", "configure_logging"]


class Every:
    """True at most once per ``seconds``: for a warning a busy process would otherwise log per task or batch."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self._last = seconds, float("-inf")

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.seconds:
            return False
        self._last = now
        return True


class _Redact(logging.Filter):
    """Standard-library log records (Celery's, kombu's, httpx's) redacted like structlog's events."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def configure_logging(level: str = "INFO") -> None:
    remember_environment()  # the configured secrets' values are redacted whatever their shape
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=level)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _Redact) for f in handler.filters):
            handler.addFilter(_Redact())
    # httpx logs every request's URL at INFO, a judge's user:password@ base URL included
    for name in ("httpx", "httpx2"):  # httpx2: the fork the openai client uses
        logging.getLogger(name).setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_event,  # upstream errors may carry API keys; URLs may carry passwords
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
