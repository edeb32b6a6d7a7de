"""What ``Monitor.feedback()`` costs the caller's thread, beside ``capture()`` and one OpenTelemetry span start+end.

``feedback`` checks its arguments on the caller's thread (a pydantic model, so a bad argument is counted there and
then), where ``capture`` leaves all conversion to the shipper. The three are timed in the same loop, call by call in
rotating order, paced to ``--rate`` calls a second each, with Redis up and with Redis down (spooling).

    .venv/bin/python bench/feedback.py [--calls 20000] [--rate 3000] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from opentelemetry import trace
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _latency import main, percentiles, timed  # noqa: E402
from vigil.producers import Monitor  # noqa: E402

TURN: dict[str, Any] = {
    "input": "My invoice shows two charges for the same order. Why was I charged twice?",
    "output": "The second line is a temporary authorization hold, not a charge. " * 6,
    "contexts": ["Authorization holds are released by the bank within 3-5 business days."],
    "model": "gpt-4o-mini",
}


def measure(monitor: Monitor, tracer: trace.Tracer, calls: int, rate: float) -> dict[str, list[int]]:
    """Nanoseconds per call of each operation, the order rotating every call."""
    return timed({
        "span": lambda i: tracer.start_span("chat gpt-4o-mini").end(),
        "capture": lambda i: monitor.capture(**TURN, trace_id=f"trace-{i}"),
        "feedback": lambda i: monitor.feedback(f"trace-{i}", "thumbs", i % 3 != 0, comment="wrong refund window"),
    }, calls, rate)


def run_mode(name: str, url: str, tracer: trace.Tracer, calls: int, rate: float, spool_dir: Path) -> dict[str, Any]:
    monitor = Monitor(url, agent="bench", spool_path=spool_dir / f"{name}.jsonl", max_queue=200_000)
    measure(monitor, tracer, min(2_000, calls), rate)  # warm-up
    monitor.flush(timeout=30)
    result = {op: percentiles(ns) for op, ns in measure(monitor, tracer, calls, rate).items()}
    monitor.flush(timeout=60)
    counters = monitor.counters()
    monitor.shutdown(timeout=30)
    return {"operations": result, "counters": counters.model_dump(mode="json")}


def table(report: dict[str, Any]) -> Table:
    out = Table(title=f"feedback() and capture() vs one OTel span — {report['calls']} calls each, "
                      f"{report['rate']:.0f}/s")
    for column in ("broker", "operation", "p50 µs", "p99 µs", "p50 / span", "p99 / span"):
        out.add_column(column, justify="left" if column in ("broker", "operation") else "right", no_wrap=True)
    labels = {"span": "OTel span (BatchSpanProcessor)", "capture": "vigil Monitor.capture()",
              "feedback": "vigil Monitor.feedback()"}
    for mode, result in report["modes"].items():
        span = result["operations"]["span"]
        for op, label in labels.items():
            figures = result["operations"][op]
            out.add_row(mode, label, f"{figures['p50_us']:.2f}", f"{figures['p99_us']:.2f}",
                        f"{figures['p50_us'] / span['p50_us']:.2f}", f"{figures['p99_us'] / span['p99_us']:.2f}",
                        end_section=op == "feedback")
    return out


if __name__ == "__main__":
    main(__doc__, run_mode, table, rate=3_000, rate_help="calls per second of each operation")
