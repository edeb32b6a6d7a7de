"""What the detector's per-minute coverage query reads from ``pipeline_events``, sorted the old way (project,
monitor, stage, trace, span) and by time first (migration 0012), over the same rows in the same chDB store: rows and
granules the primary key leaves to read (``EXPLAIN ESTIMATE``) and wall time, with the ratio.

    python bench/detector_scan.py [--events 2000000] [--days 30] [--rounds 7]
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

from vigil.worker.store import connect, migrate
from vigil.worker.store.queries import DETECTOR_QUERIES, bind, render

NOW = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)
OLD = "pipeline_events_by_turn"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = connect(f"chdb://{Path(tmp) / 'chdb'}")
        migrate(store)
        store.command(f"CREATE TABLE {OLD} AS pipeline_events ENGINE = ReplacingMergeTree(event_time) "
                      "PARTITION BY toYYYYMM(event_time) ORDER BY (project, monitor, stage, trace_id, span_id)")
        step_ms = args.days * 86_400_000 // args.events
        for table in ("pipeline_events", OLD):  # 3 projects x 4 monitors, five stages; the newest event at NOW
            store.command(f"""
INSERT INTO {table} SELECT
    fromUnixTimestamp64Milli({int(NOW.timestamp() * 1000)} - number * {step_ms}) AS event_time,
    concat('project-', toString(number % 3)), concat('agent-', toString(number % 5)),
    ['', 'relevancy', 'alignment', 'context', 'correctness'][1 + number % 5],
    ['received', 'sampled', 'scored', 'sampled', 'scored'][1 + number % 5],
    hex(sipHash64(intDiv(number, 5))), ''
FROM numbers({args.events})""")
            store.command(f"OPTIMIZE TABLE {table} FINAL")
        sql = render(bind(DETECTOR_QUERIES["coverage"].sql, window_minutes=60), start=NOW, end=NOW)
        rows = []
        for label, table in (("by turn (before 0012)", OLD), ("by time first (0012)", "pipeline_events")):
            query = sql.replace("FROM pipeline_events", f"FROM {table}")
            [(_, _, parts, to_read, marks)] = store.query("EXPLAIN ESTIMATE " + query).result_rows
            total = store.query(f"SELECT count(), sum(marks) FROM system.parts WHERE active AND table = '{table}'"
                                ).result_rows[0]
            store.query(query)  # warm
            times = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                result = store.query(query).result_rows
                times.append(time.perf_counter() - t0)
            rows.append((label, to_read, total[0], marks, total[1], statistics.median(times) * 1000, sorted(result)))
        assert rows[0][6] == rows[1][6], "the two tables answered differently"
        print(f"coverage query, last 60 min of {args.events:,} events over {args.days} days "
              f"(median of {args.rounds})\n")
        print("| sorting | rows to read | granules to read / all | ms | result rows (the same) |")
        print("|---|---|---|---|---|")
        for label, to_read, _, marks, all_marks, ms, n in rows:
            print(f"| {label} | {to_read:,} | {marks} / {all_marks} | {ms:.1f} | {len(n)} |")
        print(f"\nratio (by turn / by time): rows {rows[0][1] / rows[1][1]:.0f}x, time {rows[0][5] / rows[1][5]:.1f}x")
        store.close()


if __name__ == "__main__":
    main()
