"""The CPU a ``vigil`` command costs from start to exit, by the code at ``--before`` and by this checkout's, in one run.

The suite starts hundreds of short ``vigil`` processes and is CPU-bound on 2 cores, so what a command imports
before it does anything is paid again by each. Each command below runs as a process of its own,
``python -m vigil.worker ARGS``, alternately by the code at ``--before`` (a git revision: its ``schemas``,
``worker`` and ``producers`` extracted from git and imported as vigil first on the path) and by this checkout's;
the table shows the least user+sys CPU seconds of ``--runs`` runs each (after one run each to write bytecode) and
after / before. Both sides run on the same files, made here: a migrated empty chDB store, a config with an LLM
judge (never called), a retriever over the demo's knowledge base and a regression rule, one turn, a day of scores
and a small labelled set. Each side's exit codes are shown: a command that failed on one side only is no figure.

    .venv/bin/python bench/startup.py [--before 27ebaeb] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _revision import tree_at
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
KNOWLEDGE = ROOT / "worker" / "demo" / "data" / "docs" / "kb.jsonl"

# label -> arguments after `vigil`; {name} is a file made by `_files`
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "config check": ["config", "check", "{config}"],
    "score (offline judge)": ["score", "--scorer", "answer_relevancy", "--trace", "{turn}"],
    "alerts check": ["alerts", "check", "--config", "{config}"],
    "alerts backtest": ["alerts", "backtest", "--config", "{config}", "--scores", "{scores}", "--json"],
    "report": ["report"],
    "eval (offline judge)": ["eval", "--dataset", "{labelled}", "--scorer", "answer_relevancy", "--json"],
}


def _files(into: Path) -> dict[str, str]:
    config = {"judges": [{"name": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "m"}],
              "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm"},
                           {"name": "rag", "scorer": "rag_correctness", "judge": "llm",
                            "params": {"retriever": {"path": str(KNOWLEDGE)}}}],
              "alerts": [{"name": "drop", "kind": "regression"}]}
    turn = {"trace_id": "t1", "agent": "bench", "input": [{"role": "user", "content": "How long is the refund window?"}],
            "output": "30 days from delivery."}
    scores = [{"ts": 1_790_000_000 + 60 * i, "monitor": "relevancy", "score": 0.8 if i % 3 else 0.4,
               "trace_id": f"s{i}"} for i in range(1_440)]
    labelled = [{"id": f"item-{i}", "human": i % 2, "group": f"g{i % 4}",
                 "turn": {"input": [{"role": "user", "content": f"Question {i} about refunds?"}],
                          "output": f"Refunds take {i} days."}} for i in range(20)]
    paths = {"config": into / "vigil.yaml", "turn": into / "turn.json", "scores": into / "scores.jsonl",
             "labelled": into / "labelled.jsonl"}
    paths["config"].write_text(yaml.safe_dump(config))
    paths["turn"].write_text(json.dumps(turn))
    paths["scores"].write_text("\n".join(json.dumps(s) for s in scores))
    paths["labelled"].write_text("\n".join(json.dumps(item) for item in labelled))
    return {name: str(path) for name, path in paths.items()}


def _cpu(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    """User+sys CPU seconds of one ``python -m vigil.worker ARGS`` process, and its exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "vigil.worker", *args], env=env, cwd=cwd, capture_output=True,
                          check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.returncode


def run(before: str, runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="vigil-bench-startup-") as tmp:
        tmp_path = Path(tmp)
        files = _files(tmp_path)
        # bytecode written by the first run and read by the others, as under `make test`
        unset = ("CLICKHOUSE_DSN", "VIGIL_CONFIG", "REDIS_URL", "PYTHONDONTWRITEBYTECODE")
        base = {k: v for k, v in os.environ.items() if k not in unset}
        base.update(VIGIL_HOME=str(tmp_path / "home"), COLUMNS="120")
        sides = {"before": {**base, "PYTHONPATH": str(tree_at(before, tmp_path / "old"))},
                 "after": {**base, "PYTHONPATH": str(ROOT)}}
        subprocess.run([sys.executable, "-m", "vigil.worker", "migrate"], env=sides["after"], check=True,
                       capture_output=True)
        results = {}
        for label, command in COMMANDS.items():
            args = [a.format(**files) for a in command]
            cpu: dict[str, list[float]] = {side: [] for side in sides}
            codes: dict[str, set[int]] = {side: set() for side in sides}
            for round_ in range(runs + 1):  # the first round writes bytecode, and is not counted
                for side, env in sides.items():
                    seconds, code = _cpu(args, env, tmp_path)
                    codes[side].add(code)
                    if round_:
                        cpu[side].append(seconds)
            results[label] = {side: {"cpu_s": min(cpu[side]), "exit": sorted(codes[side])} for side in sides}
            results[label]["ratio"] = results[label]["after"]["cpu_s"] / results[label]["before"]["cpu_s"]
    return {"before": before, "runs": runs, "commands": results,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="27ebaeb", help="the git revision to compare with")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.before, args.runs)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    table = Table(title=f"CPU seconds of one `vigil` process, start to exit, before ({args.before}) and after (this "
                        f"checkout): least of {args.runs} runs each ({report['machine']})")
    for column in ("command", "before", "after", "after / before", "exits"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for label, row in report["commands"].items():
        table.add_row(label, f"{row['before']['cpu_s']:.2f}", f"{row['after']['cpu_s']:.2f}", f"{row['ratio']:.2f}",
                      f"{row['before']['exit']} {row['after']['exit']}")
    Console().print(table)


if __name__ == "__main__":
    main()
