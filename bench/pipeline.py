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

from vigil.producers import Monitor  # noqa: E402
from vigil.schemas import VigilConfig  # noqa: E402
from vigil.worker.demo import demo_config, demo_turns  # noqa: E402
from vigil.worker.demo.embedded_redis import EmbeddedRedis  # noqa: E402
from vigil.worker.pipeline.backlog import wait_drained as drain  # noqa: E402
from vigil.worker.scorers import build_scorer  # noqa: E402
from vigil.worker.store import connect  # noqa: E402

from tests.pipeline import WorkerProcess  # noqa: E402


def cpu_per_score(config: VigilConfig, turns: list[dict]) -> list[dict[str, Any]]:
    from economy import Ledger, ScriptedAnswers
    from vigil.schemas import Turn

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
                # the config's own scorers need their definitions (code before them takes the monitor alone)
                scorer = build_scorer(monitor, config) if getattr(config, "scorers", None) else build_scorer(monitor)
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
    from vigil.schemas.broker import INGEST_QUEUE, INGEST_TASK
    from vigil.worker.pipeline.app import app, configure

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


# ---- the 100x case: many turns through one worker, memory per turn (``--turns``) -----------------------------

SCALE_BATCH = 256  # turns per ingest message, the SDK's batch size


def _judge_script(body: dict) -> Any:
    from tests.judge_server import Reply

    step = body["response_format"]["json_schema"]["name"]
    return Reply.json({"statements": ["Returns are accepted within 30 days."]} if step.endswith("preprocess")
                      else {"results": [{"result": "yes", "reason": "answers the question"}]})


def _scale_config(path: Path, base_url: str, rate: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "judges": [{"name": "llm", "kind": "openai", "base_url": base_url, "model": "scripted",
                    "api_key_env": "VIGIL_BENCH_JUDGE_KEY", "rpm": 10_000_000}],
        "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm", "reason": "template",
                      "sampling_rate": rate}]}))
    return path


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def _send_turns(redis_url: str, turns: list[dict]) -> None:
    from vigil.schemas.broker import INGEST_QUEUE, INGEST_TASK
    from vigil.worker.pipeline.app import app, configure

    configure(redis_url)
    with app.producer_or_acquire() as producer:
        for start in range(0, len(turns), SCALE_BATCH):
            app.send_task(INGEST_TASK, args=[turns[start:start + SCALE_BATCH]], queue=INGEST_QUEUE,
                          producer=producer)


class _WorkerAt(WorkerProcess):
    """`vigil worker` run from another checkout (its directory first on the path: ``python -m`` puts it there)."""

    def __init__(self, src: str, *args: Any, **env: str) -> None:
        super().__init__(*args, **env, PYTHONPATH=src)
        self.src = src

    def start(self, *args: str, module: str = "worker") -> WorkerProcess:
        import subprocess

        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", module, "worker", *args], env=self.env,
                                            cwd=self.src, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        return self


def _worker(redis_url: str, home: Path, config: Path, src: str | None, *args: str, **env: str) -> WorkerProcess:
    extra = {"VIGIL_BENCH_JUDGE_KEY": "k", "VIGIL_SCORE_QUEUE_MAX": "0", "VIGIL_LOG_LEVEL": "WARNING", **env}
    if src:
        return _WorkerAt(src, redis_url, home, config, **extra).start(*args)
    return WorkerProcess(redis_url, home, config, **extra).start(*args)


def _wait(condition, worker: WorkerProcess, what: str, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if worker.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what}: {worker.output()[-3000:]}")
        time.sleep(0.05)


def scale_run(redis_url: str, home: Path, turns: list[dict], rate: float, paused_turns: int,
              src: str | None) -> dict[str, Any]:
    """One code version (``src``: a checkout to run the worker from; None: this one) over ``turns``. Memory is
    measured at the margin: after half the turns and after all of them, divided by the difference in what waits,
    so a worker's warm-up (imports, thread stacks, the judge client) does not pass for a per-turn cost; Redis is
    ``used_memory`` at the peak over the flushed server's with the worker ready, divided by what waits.

    1. waiting: an ingest-only worker fans the turns out; the score tasks wait. Redis bytes per waiting score task;
       the ingest worker's peak RSS (VmHWM) and its growth per turn ingested.
    2. scoring: a full worker scores them all (the scripted judge answers at once): scores/s and peak RSS.
    3. paused: the judge paused by hand, ``paused_turns`` more turns (all sampled) arrive at a full worker; once
       every one waits, the tasks the worker holds (delivered, unacked: where countdown tasks wait), its RSS growth
       and Redis bytes per waiting turn."""
    from vigil.worker.judge.pause import PAUSED_KEY
    from vigil.worker.pipeline.backlog import backlog

    from tests.judge_server import ScriptedJudge

    client = redis.Redis.from_url(redis_url)
    out: dict[str, Any] = {"code": "before" if src else "after", "turns": len(turns)}
    half = len(turns) // 2

    def fanned_out() -> bool:
        now = backlog(client)
        return not any(v for k, v in now.items() if k not in ("vigil.score", "journaled")) \
            and now["journaled"] == now["vigil.score"]

    with ScriptedJudge(_judge_script) as server:
        config = _scale_config(home / "vigil.yaml", server.base_url, rate)
        client.flushall()
        worker = _ready(_worker(redis_url, home / "fill", config, src, "-Q", "vigil.ingest", "-c", "8"), client)
        try:
            idle = _used(client)
            started = time.perf_counter()
            _send_turns(redis_url, turns[:half])
            _wait(fanned_out, worker, "fan-out")
            first = (client.llen("vigil.score"), _used(client), _proc_kb(worker.process.pid, "VmHWM"))
            _send_turns(redis_url, turns[half:])
            _wait(fanned_out, worker, "fan-out")
            out["ingest_turns_per_s"] = len(turns) / (time.perf_counter() - started)
            second = (client.llen("vigil.score"), _used(client), _proc_kb(worker.process.pid, "VmHWM"))
            waiting = out["waiting"] = second[0]
            out["redis_bytes_per_waiting"] = (second[1] - idle) / max(1, waiting)
            out["redis_mb_waiting"] = second[1] / 2**20
            out["ingest_rss_growth_kb_per_turn"] = (second[2] - first[2]) / (len(turns) - half)
            out["ingest_peak_rss_mb"] = second[2] / 1024
        finally:
            worker.stop()
        worker = _worker(redis_url, home / "score", config, src, "-c", "100")
        try:
            _wait(lambda: client.llen("vigil.score") < waiting, worker, "scoring start")
            started = time.perf_counter()
            wait_drained(client)
            out["scores_per_s"] = waiting / (time.perf_counter() - started)
            out["score_peak_rss_mb"] = _proc_kb(worker.process.pid, "VmHWM") / 1024
        finally:
            worker.stop()
        client.flushall()
        client.hset(PAUSED_KEY, "llm", json.dumps({"judge": "llm", "reason": "bench: paused by hand",
                                                   "since": time.time(), "fingerprint": ""}))
        # every turn sampled here, so the paused judge's work is thousands of tasks, not a few dozen
        worker = start_worker_with(redis_url, home / "paused", _scale_config(home / "all.yaml", server.base_url, 1.0),
                                   src)
        try:
            idle = _used(client)
            more = fresh_copies(turns, paused_turns // len(turns) + 1)[:paused_turns]
            marks = []
            for part in (more[:len(more) // 2], more[len(more) // 2:]):
                _send_turns(redis_url, part)
                seen: list[int] = []

                def all_waiting(seen=seen) -> bool:  # nothing queued, and the waiting count steady for 3 s
                    now = backlog(client)
                    seen.append(now.get("parked", 0) + now["unacked"])
                    return (now["vigil.ingest"] == 0 and now["vigil.score"] == 0 and len(seen) > 60
                            and seen[-1] > 0 and len(set(seen[-60:])) == 1)

                _wait(all_waiting, worker, "paused work")
                marks.append((seen[-1], _used(client), _proc_kb(worker.process.pid, "VmRSS")))
            held = client.hlen("unacked")  # delivered to the worker and held there (countdown tasks wait so)
            (n1, _, rss1), (n2, used2, rss2) = marks
            out["paused_waiting"] = n2
            out["paused_held_by_worker"] = held
            out["paused_rss_growth_kb_per_turn"] = (rss2 - rss1) / max(1, n2 - n1)
            out["paused_redis_bytes_per_turn"] = (used2 - idle) / max(1, n2)
        finally:
            worker.stop()
            client.flushall()
    return out


def start_worker_with(redis_url: str, home: Path, config: Path, src: str | None) -> WorkerProcess:
    return _ready(_worker(redis_url, home, config, src, "-c", "100", VIGIL_PAUSED_RETRY="30"),
                  redis.Redis.from_url(redis_url))


def _ready(worker: WorkerProcess, client: redis.Redis) -> WorkerProcess:
    """The worker once it has run one empty ingest batch."""
    send_empty_batches(worker.env["REDIS_URL"], 1)
    _wait(lambda: client.llen("vigil.ingest") == 0 and client.hlen("unacked") == 0, worker, "start")
    time.sleep(1)
    return worker


def _sampled(trace_id: str, rate: float) -> bool:
    from vigil.worker.pipeline.sampling import sampled

    return sampled(trace_id, rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=4, help="copies of the 264 demo turns for the throughput run")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the freshness run")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--turns", type=int, default=0,
                        help="the 100x case instead: this many turns through one worker, memory per turn")
    parser.add_argument("--rate", type=float, default=0.25, help="with --turns: the monitor's sampling rate")
    parser.add_argument("--paused-turns", type=int, default=5000, help="with --turns: turns sent to a paused judge")
    parser.add_argument("--before-src", default=None,
                        help="with --turns: a checkout of earlier vigil code to run the same case with (a ratio)")
    args = parser.parse_args()
    console = Console(stderr=args.json, width=150)
    if args.turns:
        return scale_main(args, console)

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



def scale_main(args: argparse.Namespace, console: Console) -> None:
    work = Path(tempfile.mkdtemp(prefix="vigil-bench-scale-"))
    turns = fresh_copies(demo_turns(), args.turns // len(demo_turns()) + 1)[:args.turns]
    runs = []
    with EmbeddedRedis() as server:
        for src in ([args.before_src] if args.before_src else []) + [None]:
            console.print(f"{'before' if src else 'after'}: {args.turns} turns ...")
            runs.append(scale_run(server.url, work / ("before" if src else "after"), turns, args.rate,
                                  args.paused_turns, src))
    if args.json:
        print(json.dumps({"machine": f"{platform.machine()} {os.cpu_count()} cores", "runs": runs}))
        return
    table = Table(title=f"{args.turns} turns through one worker (scripted judge answering at once; monitor rate "
                        f"{args.rate:g}); then {args.paused_turns} turns, all sampled, to a paused judge")
    rows = [("score tasks waiting", "waiting", "{:.0f}"),
            ("Redis bytes / waiting score task", "redis_bytes_per_waiting", "{:,.0f}"),
            ("ingest turns/s (fan-out only)", "ingest_turns_per_s", "{:.0f}"),
            ("Redis used_memory MB with them waiting", "redis_mb_waiting", "{:.1f}"),
            ("ingest worker peak RSS MB", "ingest_peak_rss_mb", "{:.0f}"),
            ("ingest worker peak RSS growth KB / turn", "ingest_rss_growth_kb_per_turn", "{:.2f}"),
            ("scores/s (100 threads)", "scores_per_s", "{:.0f}"),
            ("scoring worker peak RSS MB", "score_peak_rss_mb", "{:.0f}"),
            ("paused: turns waiting", "paused_waiting", "{:.0f}"),
            ("paused: tasks held by the worker (unacked)", "paused_held_by_worker", "{:.0f}"),
            ("paused: worker RSS growth KB / waiting turn", "paused_rss_growth_kb_per_turn", "{:.2f}"),
            ("paused: Redis bytes / waiting turn", "paused_redis_bytes_per_turn", "{:,.0f}")]
    table.add_column("measure")
    for run in runs:
        table.add_column(run["code"])
    if len(runs) == 2:
        table.add_column("after / before")
    for label, key, fmt in rows:
        values = [run.get(key) for run in runs]
        cells = [fmt.format(v) if v is not None else "—" for v in values]
        if len(runs) == 2:
            cells.append(f"{values[1] / values[0]:.2f}" if values[0] else "—")
        table.add_row(label, *cells)
    console.print(table)
    console.print(f"[dim]{platform.machine()} {os.cpu_count()} cores; `.venv/bin/python bench/pipeline.py --turns "
                  f"{args.turns} --rate {args.rate:g} --paused-turns {args.paused_turns}"
                  + (" --before-src DIR" if args.before_src else "") + "`[/]")


if __name__ == "__main__":
    main()
