"""What the caller's thread pays per call: operations timed call by call in rotating order, paced to a rate, and
their percentiles. Shared by the hook benchmarks (``hook.py``, ``feedback.py``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["DiscardExporter", "percentiles", "timed"]


class DiscardExporter(SpanExporter):
    """An exporter that keeps nothing: the span's cost on the caller's thread, not the export's."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def timed(operations: dict[str, Callable[[int], object]], calls: int, rate: float) -> dict[str, list[int]]:
    """Nanoseconds per call of each operation; call ``i`` runs every operation once, the order rotating by one each
    call so none always runs first; ``calls`` rounds paced to ``rate`` rounds a second."""
    names = list(operations)
    samples: dict[str, list[int]] = {name: [] for name in names}
    clock, pace, start = time.perf_counter_ns, 1 / rate, time.perf_counter()
    for i in range(calls):
        for k in range(len(names)):
            name = names[(i + k) % len(names)]
            t0 = clock()
            operations[name](i)
            samples[name].append(clock() - t0)
        behind = start + (i + 1) * pace - time.perf_counter()
        if behind > 0.001:
            time.sleep(behind)
    return samples


def percentiles(samples: list[int]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_us": round(cuts[49] / 1000, 2), "p99_us": round(cuts[98] / 1000, 2)}
