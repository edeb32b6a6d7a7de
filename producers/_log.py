"""The SDK's logger: structlog rendering JSON lines into stdlib logging ``vigil.producers``.

A library inside agent processes does not configure logging globally; the host's handlers and levels apply.
"""

from __future__ import annotations

import logging

import structlog

__all__ = ["get_logger"]


def get_logger() -> structlog.stdlib.BoundLogger:
    return structlog.wrap_logger(
        logging.getLogger("vigil.producers"),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
