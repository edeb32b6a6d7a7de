"""What ``Monitor.capture()`` costs the agent's thread, against one OpenTelemetry span start+end.

Both are timed in the same process and the same loop, call by call (alternating which goes first), with Redis up
and with Redis down (the shipper backing off and spooling to disk). The span goes through a ``BatchSpanProcessor``
whose exporter discards; vigil's turn is a realistic one (question, answer, three retrieved documents, usage) and
is captured inside an active span, as in an instrumented agent. Calls are paced to ``--rate`` turns a second.

    .venv/bin/python bench/hook.py [--calls 20000] [--rate 5000] [--json]
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
    "input": "My invoice shows two charges for the same order. Why was I charged twice, and when will it be fixed?",
    "output": "The second line is a temporary authorization hold, not a charge. " * 6,
    "contexts": [
        "Authorization holds are released by the bank within 3-5 business days.",
        "Orders paid by card show a pending hold until shipment.",
        "Refunds are issued to the original payment method within 10 days.",
    ],
    "model": "gpt-4o-mini",
    "usage": {"prompt_tokens": 412, "completion_tokens": 96},
    "session_id": "session-42",
    "tags": ["billing"],
}


def measure(monitor: Monitor, tracer: trace.Tracer, calls: int, rate: float) -> dict[str, list[int]]:
    """Nanoseconds per call for each operation, interleaved call by call."""
    return timed({"span": lambda i: tracer.start_span("chat gpt-4o-mini").end(),
                  "capture": lambda i: monitor.capture(**TURN)}, calls, rate)


def run_mode(name: str, url: str, tracer: trace.Tracer, calls: int, rate: float, spool_dir: Path) -> dict[str, Any]:
    monitor = Monitor(url, agent="bench", spool_path=spool_dir / f"{name}.jsonl", max_queue=100_000)
    measure(monitor, tracer, min(2_000, calls), rate)  # warm-up: imports, connection, declare
    monitor.flush(timeout=30)
    samples = measure(monitor, tracer, calls, rate)
    monitor.flush(timeout=60)
    span, capture = percentiles(samples["span"]), percentiles(samples["capture"])
    counters = monitor.counters()
    monitor.shutdown(timeout=30)
    return {
        "span": span,
        "capture": capture,
        "ratio_p50": round(capture["p50_us"] / span["p50_us"], 3),
        "ratio_p99": round(capture["p99_us"] / span["p99_us"], 3),
        "counters": counters.model_dump(mode="json"),
    }


def table(report: dict[str, Any]) -> Table:
    out = Table(title=f"capture() vs one OTel span start+end — {report['calls']} calls each, {report['rate']:.0f}/s")
    for column in ("broker", "operation", "p50 µs", "p99 µs", "p50 / span", "p99 / span", "shipped", "spooled", "dropped"):
        out.add_column(column, justify="left" if column in ("broker", "operation") else "right", no_wrap=True)
    for mode, result in report["modes"].items():
        counters = result["counters"]
        dropped = sum(counters["dropped"].values())
        out.add_row(mode, "OTel span (BatchSpanProcessor)", f"{result['span']['p50_us']:.2f}",
                    f"{result['span']['p99_us']:.2f}", "1.00", "1.00", "", "", "")
        out.add_row(mode, "vigil Monitor.capture()", f"{result['capture']['p50_us']:.2f}",
                    f"{result['capture']['p99_us']:.2f}", f"{result['ratio_p50']:.2f}", f"{result['ratio_p99']:.2f}",
                    str(counters["shipped"]), str(counters["spooled"]), str(dropped), end_section=True)
    return out


if __name__ == "__main__":
    main(__doc__, run_mode, table, rate=5_000, rate_help="turns (and spans) per second")
