"""The existing-OpenTelemetry-spans path: a ``SpanProcessor`` that turns whole traces into turns, in process.

The processor keeps the finished spans of each trace until the trace's local root span ends (a span with no
parent, or a remote one); then the trace is complete in this process and ``schemas.spans.assemble`` (the same code
``vigil intake`` runs) makes its turns: one per agent root, or one per top-level LLM span. ``on_end`` runs on the
thread that ended the span, so it only appends a reference; converting and assembling happen on the monitor's
shipper thread. Traces with no GenAI or OpenInference span are dropped at their root without any work. At most
``max_traces`` traces wait at once (the oldest is given up when a new one would exceed that; a root that never ends,
say) and at most ``max_spans`` spans each.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from producers._log import get_logger
from producers.monitor import Monitor
from schemas.spans import SpanRecord, assemble, is_genai

__all__ = ["GenAISpanProcessor", "span_record", "turns_from_spans"]

_log = get_logger()


class GenAISpanProcessor(SpanProcessor):
    """Add to a ``TracerProvider``: every finished trace's agent turns go to ``monitor``."""

    def __init__(self, monitor: Monitor, *, max_traces: int = 10_000, max_spans: int = 2_000) -> None:
        self.monitor = monitor
        self._max_traces, self._max_spans = max_traces, max_spans
        self._traces: OrderedDict[int, list[ReadableSpan]] = OrderedDict()
        self._genai: set[int] = set()
        self._lock = threading.Lock()
        self.given_up = 0  # traces evicted before their root ended

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.is_valid:
            return
        trace_id = context.trace_id
        local_root = span.parent is None or span.parent.is_remote
        genai = is_genai(span.attributes or {}, (event.name for event in span.events))
        with self._lock:
            spans = self._traces.get(trace_id)
            if spans is None:
                if local_root:
                    if genai:
                        self.monitor.capture_deferred(lambda: turns_from_spans([span]))
                    return
                spans = self._traces[trace_id] = []
                if len(self._traces) > self._max_traces:
                    evicted, _ = self._traces.popitem(last=False)
                    self._genai.discard(evicted)
                    self.given_up += 1
            if len(spans) < self._max_spans:
                spans.append(span)
            if genai:
                self._genai.add(trace_id)
            if not local_root:
                return
            del self._traces[trace_id]
            wanted = trace_id in self._genai
            self._genai.discard(trace_id)
        if wanted:
            self.monitor.capture_deferred(lambda: turns_from_spans(spans))

    def shutdown(self) -> None:
        """The monitor belongs to the application, which shuts it down (it also does so at exit)."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.monitor.flush(timeout_millis / 1000)


def turns_from_spans(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    """The turn dicts (not validated) in one trace's finished spans."""
    return assemble(span_record(span) for span in spans)


def span_record(span: ReadableSpan) -> SpanRecord:
    context = span.get_span_context()
    parent = span.parent
    record: SpanRecord = {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "start": span.start_time or 0,
        "end": span.end_time or 0,
        "attributes": {key: _value(value) for key, value in (span.attributes or {}).items()},
        "events": [{"name": e.name, "time": e.timestamp or 0,
                    "attributes": {k: _value(v) for k, v in (e.attributes or {}).items()}} for e in span.events],
        "resource": {key: _value(value) for key, value in span.resource.attributes.items()},
    }
    return record


def _value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
