"""Cost per byte sent: what a flood of each shape makes a real `vigil intake` + `vigil worker` spend, per MB the sender
sent, before and after the abuse bounds (issue 20), in one run.

Each shape runs against a fresh Redis, intake and worker (the pipeline fixture's config, settle 1 s): the worker's
peak resident memory (``VmHWM`` summed over its process tree) and Redis ``used_memory`` at the end, each minus their
value before the shape, divided by the MB sent; the intake's CPU seconds for the gzip bombs; and Redis ``used_memory``
``--after-s`` (90) seconds after the last request, above its idle value before the shape, and how long the queues
took to drain (issue 26: a 200k-trace flood
must leave Redis within 30 MB of idle 90 s later; ``--traces 200000 --open-traces 10000``, the intake's default cap). "before" runs the same
processes from ``--before-src`` (a checkout of vigil before the bounds; ``git archive f973e23^ | tar -x -C DIR``),
"after" from this checkout, with the default budgets except where the shape is scaled down (the table says which).

    .venv/bin/python bench/abuse.py --before-src DIR [--spans 100000] [--traces 20000] [--open-traces 5000] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psutil
import redis
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vigil.worker.demo.embedded_redis import EmbeddedRedis  # noqa: E402
from vigil.worker.sinks.write_queue import WRITE_BYTES  # noqa: E402

from tests.pipeline import IntakeProcess, WorkerProcess  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pipeline.yaml"
TOKEN = "bench-abuse-token-0123456789"
MB = 10**6


def _shim(src: str, work: Path) -> str:
    """A directory whose ``vigil/`` maps to the folders of the checkout ``src`` (what setup.py does when installed)."""
    root = work / "before-shim"
    (root / "vigil").mkdir(parents=True, exist_ok=True)
    for name in ("schemas", "worker", "producers"):
        link = root / "vigil" / name
        if not link.exists():
            link.symlink_to(Path(src).resolve() / name)
    return str(root)


def _peak_mb(pid: int) -> float:
    total = 0
    for proc in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total / 1024


def _post(url: str, body: bytes, content_type: str, **headers: str) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0  # the connection was closed on a refused body


def _spans_body(spans: list[dict]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "flood-bot"}}]}, "scopeSpans": [{"spans": spans}]}]}).encode()


def _span(trace_id: str, parent: str | None = None) -> dict:
    return {"traceId": trace_id, "spanId": uuid.uuid4().hex[:16], **({"parentSpanId": parent} if parent else {}),
            "name": "chat m", "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]}


def one_trace(intake: IntakeProcess, spans: int) -> float:
    """``spans`` spans into one trace id, 2,000 per request; returns MB sent."""
    trace_id, sent = uuid.uuid4().hex, 0
    for start in range(0, spans, 2000):
        body = _spans_body([_span(trace_id) for _ in range(min(2000, spans - start))])
        sent += len(body)
        _post(f"{intake.url}/v1/traces", body, "application/json", Authorization=f"Bearer {TOKEN}")
    return sent / MB


def many_traces(intake: IntakeProcess, traces: int) -> float:
    """``traces`` one-span traces, 500 per request."""
    sent = 0
    for start in range(0, traces, 500):
        body = _spans_body([_span(uuid.uuid4().hex) for _ in range(min(500, traces - start))])
        sent += len(body)
        _post(f"{intake.url}/v1/traces", body, "application/json", Authorization=f"Bearer {TOKEN}")
    return sent / MB


def junk_turns(intake: IntakeProcess, items: int) -> float:
    body = json.dumps([{}] * items).encode()
    _post(f"{intake.url}/v1/turns", body, "application/json", Authorization=f"Bearer {TOKEN}")
    return len(body) / MB


def bombs(intake: IntakeProcess, count: int) -> float:
    """``count`` gzip bombs (256 MB inflated each) without the token, 4 at a time."""
    bomb = gzip.compress(bytes(256 * 2**20))

    def send() -> None:
        for _ in range(count // 4):
            with socket.create_connection(("127.0.0.1", intake.port), timeout=120) as sock:
                head = (f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                        f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n\r\n").encode()
                try:
                    sock.sendall(head + bomb)
                    sock.recv(65536)
                except OSError:
                    pass

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return count * len(bomb) / MB


def _settled(client: redis.Redis, timeout: float = 600) -> None:
    """Until the queues are empty, nothing is unacked and every row is written (the flood was taken in, assembled and
    stored, or refused)."""
    deadline, quiet = time.monotonic() + timeout, 0
    while time.monotonic() < deadline and quiet < 5:
        busy = client.llen("vigil.ingest") + client.llen("vigil.score") + client.hlen("unacked") + \
            int(client.get(WRITE_BYTES) or 0)
        pending = client.zrangebyscore("vigil.intake.pending", "-inf", time.time() - 1, start=0, num=1)
        quiet = quiet + 1 if not busy and not pending else 0
        time.sleep(0.5)


def run_shape(shape: str, size: int, src: str | None, work: Path, *, open_traces: int,
              after_s: float) -> dict[str, Any]:
    env = {"VIGIL_INTAKE_TOKEN": TOKEN, "VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_MAX_OPEN_TRACES": str(open_traces)}
    if src:
        env["PYTHONPATH"] = src
    home = work / f"{shape}-{'before' if src else 'after'}"
    with EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url)
        intake = IntakeProcess(server.url, home, **env).start()
        worker = WorkerProcess(server.url, home / "vigil", CONFIG, **env).start()
        try:
            time.sleep(3)  # the worker's imports and store
            _settled(client)
            peak0, used0, cpu0 = _peak_mb(worker.process.pid), client.info("memory")["used_memory"], \
                sum(psutil.Process(intake.process.pid).cpu_times()[:2])
            sent = {"one_trace": one_trace, "many_traces": many_traces, "junk_turns": junk_turns,
                    "bombs": bombs}[shape](intake, size)
            sent_at = time.monotonic()
            time.sleep(after_s)
            later = client.info("memory")["used_memory"]
            _settled(client, timeout=3600)
            drained_s = time.monotonic() - sent_at
            out = {"shape": shape, "run": "before" if src else "after", "size": size, "sent_mb": sent,
                   "worker_mb": _peak_mb(worker.process.pid) - peak0,
                   "redis_mb": (client.info("memory")["used_memory"] - used0) / MB,
                   "redis_later_mb": (later - used0) / MB, "drained_s": drained_s,
                   "intake_cpu_s": sum(psutil.Process(intake.process.pid).cpu_times()[:2]) - cpu0,
                   "alive": worker.process.poll() is None}
        finally:
            intake.stop()
            worker.stop()
    return out


SHAPES = (("one_trace", "spans into one trace id", "spans"), ("many_traces", "one-span traces", "traces"),
          ("junk_turns", "junk items in one /v1/turns", "turns"), ("bombs", "gzip bombs without the token", "bombs"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-src", help="a checkout of vigil before the bounds (without it: the after runs alone)")
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--bombs", type=int, default=8)
    parser.add_argument("--open-traces", type=int, default=5000,
                        help="VIGIL_INTAKE_MAX_OPEN_TRACES of both runs (the intake's default is 10000)")
    parser.add_argument("--after-s", type=float, default=90,
                        help="Redis is measured again this long after the last request")
    parser.add_argument("--shapes", default=",".join(shape for shape, _, _ in SHAPES),
                        help="which flood shapes to run, comma-separated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    console = Console(stderr=args.json, width=160)
    work = Path(tempfile.mkdtemp(prefix="vigil-bench-abuse-"))
    before = _shim(args.before_src, work) if args.before_src else None
    runs = []
    for shape, _, size_arg in SHAPES:
        if shape not in args.shapes.split(","):
            continue
        for src in ((before, None) if before else (None,)):
            console.print(f"{shape} {'before' if src else 'after'} ...")
            runs.append(run_shape(shape, getattr(args, size_arg), src, work, open_traces=args.open_traces,
                                  after_s=args.after_s))
    if args.json:
        print(json.dumps({"machine": f"{platform.machine()} {os.cpu_count()} cores", "runs": runs}))
        return
    table = Table(title="cost per MB sent: a real intake + worker, before and after the abuse bounds")
    for column in ("shape", "run", "MB sent", "worker MB / MB sent", "Redis MB / MB sent", "intake CPU s / MB sent",
                   f"Redis MB above idle {args.after_s:g} s later", "s to drain", "Redis MB above idle, drained", "worker alive"):
        table.add_column(column, justify="left" if column in ("shape", "run") else "right")
    names = {shape: f"{{size:,}} {what}" for shape, what, _ in SHAPES}
    for run in runs:
        per = max(run["sent_mb"], 1e-9)
        table.add_row(names[run["shape"]].format(size=run["size"]), run["run"], f"{run['sent_mb']:.2f}",
                      f"{run['worker_mb'] / per:.1f}", f"{run['redis_mb'] / per:.2f}",
                      f"{run['intake_cpu_s'] / per:.3f}", f"{run['redis_later_mb']:+.1f}",
                      f"{run['drained_s']:.0f}", f"{run['redis_mb']:+.1f}",
                      "yes" if run["alive"] else "NO")
    console.print(table)
    console.print(f"[dim]{platform.machine()} {os.cpu_count()} cores; VIGIL_INTAKE_MAX_OPEN_TRACES={args.open_traces}, "
                  f"other budgets default; Redis used_memory above its idle value {args.after_s:g} s after the last request; "
                  f"the seconds from the last request until the queues drained and every row was written; `.venv/bin/python bench/abuse.py "
                  f"--before-src DIR --spans {args.spans} --traces {args.traces} --turns {args.turns} --bombs "
                  f"{args.bombs} --open-traces {args.open_traces} --after-s {args.after_s:g}`[/]")


if __name__ == "__main__":
    main()
