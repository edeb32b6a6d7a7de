"""What the caller's thread pays per call: operations timed call by call in rotating order, paced to a rate, and
their percentiles, with the broker up and down. Shared by the hook benchmarks (``hook.py``, ``feedback.py``)."""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vigil.worker.demo.embedded_redis import EmbeddedRedis, free_port  # noqa: E402

__all__ = ["DiscardExporter", "main", "percentiles", "timed"]

# run_mode(name, redis_url, tracer, calls, rate, spool_dir) -> that mode's figures
RunMode = Callable[[str, str, trace.Tracer, int, float, Path], dict[str, Any]]


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


def main(doc: str, run_mode: RunMode, table: Callable[[dict[str, Any]], Table], *, rate: float, rate_help: str) -> None:
    """A hook benchmark's command line: ``run_mode`` with Redis up, then down (the shipper backing off and
    spooling), inside one active span as in an instrumented agent; the spans go through a BatchSpanProcessor whose
    exporter discards. Prints ``table(report)``, or the report as one JSON object with ``--json``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=rate, help=rate_help)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    logging.getLogger("vigil.producers").setLevel(logging.ERROR)  # the outage run logs every retry otherwise

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardExporter()))
    tracer = provider.get_tracer("bench")
    report: dict[str, Any] = {"calls": args.calls, "rate": args.rate, "python": platform.python_version(), "modes": {}}
    with (tempfile.TemporaryDirectory(prefix="vigil-bench-") as spool_dir, EmbeddedRedis() as server,
          tracer.start_as_current_span("agent turn")):
        report["modes"]["redis up"] = run_mode("up", server.url, tracer, args.calls, args.rate, Path(spool_dir))
        down = f"redis://127.0.0.1:{free_port()}/0"
        report["modes"]["redis down"] = run_mode("down", down, tracer, args.calls, args.rate, Path(spool_dir))
    provider.shutdown()
    if args.json:
        print(json.dumps(report))
    else:
        Console(width=130).print(table(report))
