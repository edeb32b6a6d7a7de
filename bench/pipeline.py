"""The pipeline's own cost and speed, with a judge that takes no time.

Three measurements, all in one run so the ratios compare like with like on a noisy machine:

1. **CPU per score, per scorer** (in process): each demo monitor's scorer over the demo turns through the real
   judge client (``LLMJudge`` -> ``Transport`` -> the ``openai`` client -> HTTP) to the scripted local server
   answering as the offline baseline judge (``bench/economy.py``'s ``ScriptedAnswers``). CPU is this thread's
   (``time.thread_time``): the server runs in its own thread and is not counted, and the baseline judge's work
   computing each scripted answer is measured and subtracted, so what remains is vigil's own work per score
   (prompts, fencing, schemas, the HTTP client, parsing, formulas, the result model). Outcomes that made no judge
   call (an empty output, no context or no reference to judge against) are counted and timed apart, never mixed
   into the scored path's figure. Goal: <= 1 ms per judged score.
2. **Throughput, end to end**: SDK hook -> Redis -> a real ``vigil worker`` process (thread pool, baseline judge)
   -> the batching writer -> chDB; scores per second until every sampled pair is written, and the worker's CPU
   per score (``/proc``). The baseline in the same run: Celery round trips of an empty ingest batch through the same
   worker (the queue machinery alone), so ``ratio`` says what scoring costs on top of Celery itself.
3. **Freshness** at half of the measured capacity: turns captured at a steady pace; ``inserted_at - trace_time``
   per score (capture -> row readable in ClickHouse), p50 / p95.

    .venv/bin/python bench/pipeline.py [--copies 4] [--seconds 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis
import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from producers import Monitor  # noqa: E402
from schemas import VigilConfig  # noqa: E402
from tests.pipeline import WorkerProcess  # noqa: E402
from worker.demo import demo_config, demo_turns  # noqa: E402
from worker.demo.embedded_redis import EmbeddedRedis  # noqa: E402
from worker.pipeline.backlog import wait_drained as drain  # noqa: E402
from worker.scorers import build_scorer  # noqa: E402
from worker.store import connect  # noqa: E402


def cpu_per_score(config: VigilConfig, turns: list[dict]) -> list[dict[str, Any]]:
    from economy import Ledger, ScriptedAnswers

    from schemas import Turn
    from tests.judge_server import ScriptedJudge

    parsed = [Turn.model_validate(t) for t in turns]
    rows = []
    with ScriptedJudge() as server:
        judge = ScriptedAnswers(server, Ledger())

        async def run_all(scorer) -> list[tuple[Any, float, float]]:
            """Each result with vigil's CPU for it and the stand-in's (to subtract)."""
            timed = []
            for turn in parsed:
                answer_cpu, started = judge.answer_cpu, time.thread_time()
                result = await scorer.score(turn, judge)
                timed.append((result, time.thread_time() - started, judge.answer_cpu - answer_cpu))
            return timed

        async def measure() -> None:
            for monitor in config.monitors:
                scorer = build_scorer(monitor)
                await run_all(scorer)  # warm caches (retriever index, schemas, connections) before timing
                timed = await run_all(scorer)
                judged = [(r, cpu - answer) for r, cpu, answer in timed if r.calls]
                no_call = [(r, cpu) for r, cpu, _ in timed if not r.calls]
                calls = sum(len(r.calls) for r, _ in judged)
                rows.append({
                    "scorer": monitor.scorer, "scores": len(timed),
                    "judged": len(judged), "judged_scored": sum(r.status == "scored" for r, _ in judged),
                    "judge_calls_per_judged": calls / len(judged) if judged else None,
                    "cpu_ms_per_judged": sum(c for _, c in judged) / len(judged) * 1e3 if judged else None,
                    "cpu_ms_per_call": sum(c for _, c in judged) / calls * 1e3 if calls else None,
                    "no_call": len(no_call),
                    "no_call_statuses": sorted({str(r.status) for r, _ in no_call}),
                    "cpu_ms_per_no_call": sum(c for _, c in no_call) / len(no_call) * 1e3 if no_call else None,
                })
            await judge.aclose()

        asyncio.run(measure())
    return rows


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_worker(redis_url: str, home: Path, config: Path) -> WorkerProcess:
    """A real `vigil worker` (with its writer), ready: it has run one empty ingest batch."""
    worker = WorkerProcess(redis_url, home, config, VIGIL_LOG_LEVEL="WARNING").start()
    send_empty_batches(redis_url, 1)
    wait_drained(redis.Redis.from_url(redis_url))
    return worker


def wait_drained(client: redis.Redis) -> None:
    drain(client, timeout=900, interval=0.02, settle=2)  # a fine poll: it bounds the measured times


def send_empty_batches(redis_url: str, count: int) -> None:
    from schemas.broker import INGEST_QUEUE, INGEST_TASK
    from worker.pipeline.app import app, configure

    configure(redis_url)
    with app.producer_or_acquire() as producer:
        for _ in range(count):
            app.send_task(INGEST_TASK, args=[[]], queue=INGEST_QUEUE, producer=producer)


def fresh_copies(turns: list[dict], copies: int) -> list[dict]:
    out = []
    for _ in range(copies):
        for turn in turns:
            out.append({**turn, "trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16]})
    return out


def throughput(redis_url: str, home: Path, config: Path, turns: list[dict]) -> dict[str, Any]:
    client = redis.Redis.from_url(redis_url)
    worker = start_worker(redis_url, home, config)
    try:
        # Baseline: Celery round trips of empty ingest batches through the same worker.
        empties = 2000
        started = time.perf_counter()
        send_empty_batches(redis_url, empties)
        wait_drained(client)
        celery_rate = empties / (time.perf_counter() - started)

        cpu_before = cpu_seconds(worker.process.pid)
        monitor = Monitor(redis_url=redis_url, max_queue=len(turns) + 1, spool_path=home / "spool.jsonl")
        started = time.perf_counter()
        for turn in turns:
            monitor.capture(**turn)
        monitor.flush(120)
        wait_drained(client)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(worker.process.pid) - cpu_before
        monitor.shutdown(10)
    finally:
        worker.stop()
    scores = connect(worker.dsn).query("SELECT count() FROM scores FINAL").result_rows[0][0]
    return {"turns": len(turns), "scores": scores, "seconds": elapsed, "scores_per_s": scores / elapsed,
            "worker_cpu_ms_per_score": cpu / scores * 1e3, "celery_noop_tasks_per_s": celery_rate}


def freshness(redis_url: str, home: Path, config: Path, turns: list[dict], rate: float) -> dict[str, Any]:
    client = redis.Redis.from_url(redis_url)
    worker = start_worker(redis_url, home, config)
    try:
        monitor = Monitor(redis_url=redis_url, max_queue=len(turns) + 1, spool_path=home / "spool.jsonl",
                          flush_interval=0.05)
        started = time.perf_counter()
        for i, turn in enumerate(turns):
            behind = started + i / rate - time.perf_counter()
            if behind > 0:
                time.sleep(behind)
            monitor.capture(**{k: v for k, v in turn.items() if k not in ("started_at", "ended_at")})
        monitor.flush(120)
        wait_drained(client)
        monitor.shutdown(10)
    finally:
        worker.stop()
    (p50, p95, n), = connect(worker.dsn).query(
        "SELECT quantileExact(0.5)(lag), quantileExact(0.95)(lag), count() FROM "
        "(SELECT dateDiff('millisecond', trace_time, inserted_at) / 1000 AS lag FROM scores FINAL)").result_rows
    return {"rate_turns_per_s": rate, "scores": n, "freshness_p50_s": p50, "freshness_p95_s": p95}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=4, help="copies of the 264 demo turns for the throughput run")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the freshness run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    console = Console(stderr=args.json, width=150)

    work = Path(tempfile.mkdtemp(prefix="vigil-bench-"))
    config_path, _ = demo_config(work)
    config = VigilConfig.model_validate(yaml.safe_load(config_path.read_text()))
    turns = demo_turns()

    console.print("1/3 CPU per score, in process ...")
    scorers = cpu_per_score(config, turns)
    with EmbeddedRedis() as server:
        console.print("2/3 throughput, end to end ...")
        flow = throughput(server.url, work / "throughput", config_path, fresh_copies(turns, args.copies))
        rate = flow["scores_per_s"] / 2 * flow["turns"] / flow["scores"]  # half capacity, in turns per second
        console.print(f"3/3 freshness at {rate:.0f} turns/s ...")
        count = max(1, int(rate * args.seconds))
        fresh = freshness(server.url, work / "freshness", config_path,
                          fresh_copies(turns, count // len(turns) + 1)[:count], rate)

    result = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
              "scorers": scorers, "throughput": flow, "freshness": fresh}
    if args.json:
        print(json.dumps(result))
        return
    table = Table(title="vigil's CPU per score through the real judge client and HTTP (scripted judge in another "
                        "thread; its answers' CPU subtracted); outcomes without a judge call apart")
    for column in ("scorer", "judged", "calls / judged", "CPU ms / judged score", "CPU ms / call", "goal <= 1 ms",
                   "no judge call", "CPU ms / no-call outcome"):
        table.add_column(column)
    for row in scorers:
        judged = row["cpu_ms_per_judged"]
        table.add_row(row["scorer"], f"{row['judged']} of {row['scores']}",
                      "—" if judged is None else f"{row['judge_calls_per_judged']:.2f}",
                      "—" if judged is None else f"{judged:.2f}",
                      "—" if judged is None else f"{row['cpu_ms_per_call']:.2f}",
                      "—" if judged is None else "met" if judged <= 1 else "MISSED",
                      f"{row['no_call']} ({', '.join(row['no_call_statuses'])})" if row["no_call"] else "0",
                      "—" if row["cpu_ms_per_no_call"] is None else f"{row['cpu_ms_per_no_call']:.3f}")
    console.print(table)
    table = Table(title="End to end: SDK -> Redis -> vigil worker -> chDB (baseline judge)")
    for column in ("turns", "scores", "seconds", "scores/s", "worker CPU ms/score", "Celery no-op tasks/s",
                   "scores/s ÷ no-op tasks/s"):
        table.add_column(column)
    table.add_row(str(flow["turns"]), str(flow["scores"]), f"{flow['seconds']:.1f}", f"{flow['scores_per_s']:.0f}",
                  f"{flow['worker_cpu_ms_per_score']:.2f}", f"{flow['celery_noop_tasks_per_s']:.0f}",
                  f"{flow['scores_per_s'] / flow['celery_noop_tasks_per_s']:.2f}")
    console.print(table)
    table = Table(title="Freshness at half capacity: capture -> row readable in ClickHouse")
    for column in ("turns/s", "scores", "p50 s", "p95 s"):
        table.add_column(column)
    table.add_row(f"{fresh['rate_turns_per_s']:.0f}", str(fresh["scores"]), f"{fresh['freshness_p50_s']:.2f}",
                  f"{fresh['freshness_p95_s']:.2f}")
    console.print(table)
    console.print(f"[dim]{result['machine']}; `.venv/bin/python bench/pipeline.py --copies {args.copies} "
                  f"--seconds {args.seconds:g}`[/]")


if __name__ == "__main__":
    main()
