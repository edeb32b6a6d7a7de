"""What one huge message costs a worker's memory, with and without the per-message budget (VIGIL_MAX_MESSAGE_BYTES).

A real ``vigil worker`` process on a private Redis; one message of about ``--mb`` megabytes (one turn whose output is
that big, published as the SDK publishes, by a sender that ignores the budget), then a small good turn. The worker's
peak resident memory (``VmHWM`` in ``/proc/<pid>/status``, exact: the kernel's high-water mark) before and after
is compared between a worker with the default budget (8 MiB: the message is dead-lettered unread) and one whose
budget is above the message (it is decoded, as every message was before the budget). Both runs in one invocation,
so the ratio compares like with like.

    .venv/bin/python bench/message_budget.py [--mb 101] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vigil.producers._sender import CelerySender  # noqa: E402
from vigil.schemas.broker import DEFAULT_MESSAGE_BYTES  # noqa: E402
from vigil.worker.demo.embedded_redis import EmbeddedRedis  # noqa: E402
from vigil.worker.store import connect  # noqa: E402

from tests.pipeline import WorkerProcess, make_turn, ship, wait_drained  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pipeline.yaml"


def high_water_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def run(mode: str, budget: int, mb: int, home: Path) -> dict[str, Any]:
    with EmbeddedRedis() as server:
        worker = WorkerProcess(server.url, home / mode.split()[0], CONFIG, VIGIL_MAX_MESSAGE_BYTES=str(budget)).start()
        try:
            ship(server.url, [make_turn(0)])  # warm: imports, connections, the writer, one score written
            wait_drained(server.url, worker, timeout=300)
            before_peak, before_rss = high_water_mb(worker.process.pid), resident_mb(worker.process.pid)
            huge = {**make_turn(1), "output": "x" * (mb * 10**6 * 3 // 4)}  # base64 makes it ~mb MB on the wire
            CelerySender(server.url, max_message_bytes=2**40).send([huge])
            size = len(redis.Redis.from_url(server.url).lindex("vigil.ingest", 0) or b"")
            ship(server.url, [make_turn(2)])
            wait_drained(server.url, worker, timeout=600)
            after_peak, after_rss = high_water_mb(worker.process.pid), resident_mb(worker.process.pid)
        finally:
            status = worker.stop()
        reasons = [r[0] for r in connect(worker.dsn).query("SELECT reason FROM dead_letters").result_rows]
    return {"mode": mode, "budget": budget, "message_bytes": size, "exit": status,
            "peak_before_mb": round(before_peak, 1), "peak_after_mb": round(after_peak, 1),
            "peak_growth_mb": round(after_peak - before_peak, 1), "rss_after_mb": round(after_rss, 1),
            "rss_before_mb": round(before_rss, 1), "dead_letter": (reasons or [""])[0][:90]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=101, help="size of the huge message, in MB")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp:
        rows = [run("budget 8 MiB (default)", DEFAULT_MESSAGE_BYTES, args.mb, Path(tmp)),
                run("above the message (decoded, as before)", 4 * args.mb * 10**6, args.mb, Path(tmp))]
    ratio = rows[1]["peak_growth_mb"] / max(rows[0]["peak_growth_mb"], 1.0)
    if args.json:
        print(json.dumps({"rows": rows, "growth_ratio": round(ratio, 2)}))
        return
    table = Table(title=f"one {rows[0]['message_bytes'] / 1e6:.0f} MB message through a real worker: peak RSS (VmHWM)")
    for column in ("worker", "peak before MB", "peak after MB", "peak growth MB", "RSS after MB", "exit",
                   "dead letter"):
        table.add_column(column, justify="left" if column in ("worker", "dead letter") else "right")
    for row in rows:
        table.add_row(row["mode"], str(row["peak_before_mb"]), str(row["peak_after_mb"]), str(row["peak_growth_mb"]),
                      str(row["rss_after_mb"]), str(row["exit"]), row["dead_letter"])
    console = Console(width=160)
    console.print(table)
    console.print(f"peak growth without the budget / with it: {ratio:.1f}x")


if __name__ == "__main__":
    main()
