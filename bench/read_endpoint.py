"""What reading through the worker's read endpoint costs: the whole report built from a seeded chDB store in the
process that holds it (direct) and through the ``ReadServer`` it serves on 127.0.0.1 (what ``vigil report`` uses
while ``vigil worker`` runs), in the same run, with the ratio.

    python bench/read_endpoint.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vigil.worker.report.build import build_report
from vigil.worker.store import connect, migrate
from vigil.worker.store.clickhouse import connect_for_reading
from vigil.worker.store.read_server import ReadServer

from tests.quality_seed import seed_everything

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _time(build, rounds: int) -> tuple[float, float]:
    build()  # warm: first-query compilation, page cache
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        build()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), max(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp()) / "chdb"
    store = connect(f"chdb://{directory}")
    migrate(store)
    seed_everything(store, now=NOW)
    rows = store.query("SELECT count() FROM scores").result_rows[0][0]
    server = ReadServer(connect(f"chdb://{directory}"), directory, writer_client=store).start()
    try:
        remote = connect_for_reading(f"chdb://{directory}")
        results = {
            "direct (the holder's own client)": _time(lambda: build_report(store, now=NOW), args.rounds),
            "read endpoint (HTTP on 127.0.0.1)": _time(lambda: build_report(remote, now=NOW), args.rounds),
        }
    finally:
        server.stop()
    base = results["direct (the holder's own client)"][0]
    print(f"build_report over {rows} score rows (every panel's query), median of {args.rounds} rounds")
    print(f"{'path':<36} {'median s':>9} {'max s':>7} {'× direct':>9}")
    for name, (median, worst) in results.items():
        print(f"{name:<36} {median:>9.3f} {worst:>7.3f} {median / base:>9.2f}")


if __name__ == "__main__":
    main()
