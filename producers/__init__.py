"""What runs where traces are born: the SDK hook, the OpenTelemetry span processor, replay.

Imports ``schemas`` at most and never ``worker``: this package lives inside agent processes.

    monitor = Monitor(agent="support-bot")          # REDIS_URL from the environment
    monitor.capture(input="How do I reset it?", output=answer, contexts=docs)
    monitor.capture(..., origin=origin_of(request.headers))  # vigil's own follow-ups are never sampled again
"""

from ._scope import TurnScope, current_turn
from ._sender import INGEST_QUEUE, INGEST_TASK, CelerySender, Sender
from .monitor import DropReason, Monitor, MonitorCounters, MonitorSettings
from .origin import origin_of
from .otel import GenAISpanProcessor, turns_from_spans
from .replay import ReplayProgress, ReplayResult, replay

__all__ = [
    "INGEST_QUEUE",
    "INGEST_TASK",
    "CelerySender",
    "DropReason",
    "GenAISpanProcessor",
    "Monitor",
    "MonitorCounters",
    "MonitorSettings",
    "ReplayProgress",
    "ReplayResult",
    "Sender",
    "TurnScope",
    "current_turn",
    "origin_of",
    "replay",
    "turns_from_spans",
]
