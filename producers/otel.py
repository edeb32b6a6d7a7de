"""The existing-OpenTelemetry-spans path: a ``SpanProcessor`` that turns whole traces into turns, in process.

The processor counts the spans each trace has started and keeps the ones that ended. A trace is complete in this
process when its local root span (no parent, or a remote one) has ended and so has every span it started; then
``vigil.schemas.spans.assemble`` (the same code ``vigil intake`` runs) makes its turns: one per agent root, or one per
top-level LLM span. A child that outlives its root (an async tool call, a stream still being read) is waited for, at
most ``late_grace_s`` after the root ended: then the trace is assembled with what has ended, and kept, so a child
that ends later makes it assembled again, whole, under the same turn ids (the root's trace and span ids): its row and
its scores are replaced, not duplicated (as ``vigil intake`` does for late spans).

``on_start`` and ``on_end`` run on the thread that started or ended the span, so they only count and append
references; converting and assembling happen on the monitor's shipper thread, and one timer thread (started with
the first trace that waits) assembles traces whose grace ran out. Traces with no GenAI or OpenInference span are
dropped at their end without any work. At most ``max_traces`` traces wait at once (the oldest is given up when a new
one would exceed that: a root that never ends, say) and at most ``max_spans`` spans each.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode
from vigil.schemas.spans import SpanRecord, assemble, is_genai

from ._log import get_logger
from .monitor import Monitor

__all__ = ["GenAISpanProcessor", "span_record", "turns_from_spans"]

_log = get_logger()


@dataclass
class _Trace:
    spans: list[ReadableSpan] = field(default_factory=list)
    open: int = 0  # spans started (as seen by on_start) and not ended yet
    root_ended: bool = False
    genai: bool = False
    assembled: bool = False  # assembled once already (its grace ran out): a later span assembles it again
    deadline: float | None = None


class GenAISpanProcessor(SpanProcessor):
    """Add to a ``TracerProvider``: every finished trace's agent turns go to ``monitor``."""

    def __init__(self, monitor: Monitor, *, max_traces: int = 10_000, max_spans: int = 2_000,
                 late_grace_s: float = 5.0) -> None:
        self.monitor = monitor
        self._max_traces, self._max_spans, self._grace = max_traces, max_spans, late_grace_s
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        self._deadlines: list[tuple[float, int]] = []  # (deadline, trace id), a heap; stale entries are skipped
        self._lock = threading.Condition()
        self._timer: threading.Thread | None = None
        self.given_up = 0  # traces evicted before their root ended

    def _trace(self, trace_id: int) -> _Trace:
        """The trace's entry, made if new (under the lock)."""
        trace = self._traces.get(trace_id)
        if trace is None:
            trace = self._traces[trace_id] = _Trace()
            if len(self._traces) > self._max_traces:
                _, evicted = self._traces.popitem(last=False)
                if not evicted.root_ended:
                    self.given_up += 1
        return trace

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        context = span.context
        if context is None or not context.is_valid:
            return
        with self._lock:
            self._trace(context.trace_id).open += 1

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.is_valid:
            return
        trace_id = context.trace_id
        local_root = span.parent is None or span.parent.is_remote
        genai = is_genai(span.attributes or {}, (event.name for event in span.events))
        with self._lock:
            trace = self._trace(trace_id)
            trace.open = max(trace.open - 1, 0)
            if len(trace.spans) < self._max_spans:
                trace.spans.append(span)
            trace.genai = trace.genai or genai
            trace.root_ended = trace.root_ended or local_root
            if not trace.root_ended:
                return
            if trace.open == 0:
                del self._traces[trace_id]
                ready = trace.spans if trace.genai else None
            elif trace.deadline is None and not trace.assembled:
                self._wait(trace_id, trace)
                return
            else:
                return
        if ready is not None:
            self.monitor.capture_deferred(lambda: turns_from_spans(ready))

    def _wait(self, trace_id: int, trace: _Trace) -> None:
        """Assemble ``trace`` when its grace runs out, unless its last span ends first (under the lock)."""
        trace.deadline = time.monotonic() + self._grace
        heapq.heappush(self._deadlines, (trace.deadline, trace_id))
        if self._timer is None or not self._timer.is_alive():
            self._timer = threading.Thread(target=self._run_timer, name="vigil-genai-spans", daemon=True)
            self._timer.start()
        self._lock.notify()

    def _run_timer(self) -> None:
        while True:
            with self._lock:
                while not self._deadlines:
                    self._lock.wait()
                due, trace_id = self._deadlines[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._lock.wait(wait)
                    continue
                heapq.heappop(self._deadlines)
                spans = self._expire(trace_id, due)
            if spans is not None:
                self.monitor.capture_deferred(lambda spans=spans: turns_from_spans(spans))

    def _expire(self, trace_id: int, due: float | None) -> list[ReadableSpan] | None:
        """The spans to assemble now for a trace whose grace ran out (``due`` None: any waiting trace), marking it
        assembled; None when it was assembled or given up meanwhile (under the lock)."""
        trace = self._traces.get(trace_id)
        if trace is None or trace.assembled or trace.deadline is None or (due is not None and trace.deadline != due):
            return None
        trace.assembled, trace.deadline = True, None
        return list(trace.spans) if trace.genai else None

    def shutdown(self) -> None:
        """The monitor belongs to the application, which shuts it down (it also does so at exit)."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Assemble every trace whose root ended (children still open or not), then flush the monitor."""
        with self._lock:
            waiting = [self._expire(trace_id, None) for trace_id in list(self._traces)]
        for spans in waiting:
            if spans is not None:
                self.monitor.capture_deferred(lambda spans=spans: turns_from_spans(spans))
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
        "kind": span.kind.value + 1,  # the SDK counts from INTERNAL = 0, OTLP from UNSPECIFIED = 0
    }
    if parent is not None and parent.is_remote:
        record["parent_remote"] = True
    if span.status.status_code is StatusCode.ERROR:
        record["status"] = {"code": 2, "message": span.status.description or ""}
    elif span.status.status_code is StatusCode.OK and any(e.name == "exception" for e in span.events):
        record["status"] = {"code": 1}  # the exception it recorded did not fail it (``conventions.error``)
    if span.instrumentation_scope is not None:
        record["scope"] = span.instrumentation_scope.name
    return record


def _value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
