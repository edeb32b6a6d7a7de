"""The trajectory judge against a reply-only judge, on labelled agent runs, in one run of `vigil eval` each.

    .venv/bin/python bench/trajectory.py          # the table; --json prints the figures as one object

The labelled set is ``bench/data/trajectories.jsonl`` (80 runs of five tool-using agents, written from rules by
``bench/trajectory_set.py``: per scenario one good run and three bad ones, one per failure: acting against a tool's
output, claiming an action no tool performed, skipping a required lookup). Every row runs the real command,
``vigil eval --dataset bench/data/trajectories.jsonl --scorer NAME --json`` (a private ``VIGIL_HOME``, no Redis),
with the judge the row names:

- ``answer_relevancy``, offline: the reply-only baseline (question and answer, the bundled baseline judge);
- ``trajectory``, offline: the pre-check, then the baseline judge's verdict on the rendered run;
- ``trajectory``, scripted: the pre-check, then the scripted judge server (``tests/judge_server.py`` in a child
  process), which answers every run "every claim supported, tools fit, task done": a judge that never finds fault,
  so the row is what the pre-check catches alone, through the real judge client (one call per run it passes).

A run is judged bad at ``score / scale < 0.5``. Per row: accuracy and Cohen's kappa against the labels (from
``vigil eval``), the share of bad runs caught per failure, the share of good runs flagged, judge calls per run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _scripted import scripted_judge

DATASET = ROOT / "bench" / "data" / "trajectories.jsonl"
CASES = ("acts_against", "promises", "skips_lookup")
NEVER_FAULTS = {"trajectory_judge": {"claims": [{"claim": "the answer", "verdict": "supported", "step": 1}],
                                     "tools_fit": True, "task_done": True, "step": None,
                                     "reason": "Every claim is backed by the steps."}}


def _eval(scorer: str, home: Path, judge_url: str | None = None) -> dict[str, Any]:
    args = [sys.executable, "-m", "vigil.worker", "eval", "--dataset", str(DATASET), "--scorer", scorer, "--json"]
    if judge_url:
        args += ["--judge-base-url", judge_url, "--model", "scripted"]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CLICKHOUSE_DSN", "VIGIL_JUDGE_BASE_URL")}
    env.update(VIGIL_HOME=str(home), OPENAI_API_KEY="bench")
    run = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)
    if run.returncode != 0:
        raise SystemExit(f"`{' '.join(args[2:])}` failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout)


def _row(name: str, judge: str, result: dict[str, Any]) -> dict[str, Any]:
    cases = {json.loads(line)["id"]: json.loads(line)["turn"]["metadata"]["case"]
             for line in DATASET.read_text(encoding="utf-8").splitlines()}
    caught: dict[str, list[bool]] = defaultdict(list)
    for item in result["items"]:
        bad = item["score"] is None or item["score"] / (item["scale"] or 1) < 0.5
        caught[cases[item["id"]]].append(bad)
    agreement = result["agreement"]
    return {"scorer": name, "judge": judge, "n": agreement["n"],
            "accuracy": agreement["binary_accuracy"]["value"], "kappa": agreement["cohen_kappa"]["value"],
            **{case: sum(caught[case]) / len(caught[case]) for case in CASES},
            "good_flagged": sum(caught["good"]) / len(caught["good"]),
            "calls_per_run": result["cost"]["judge_calls"] / agreement["n"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        rows.append(_row("answer_relevancy (reply only)", "offline", _eval("answer_relevancy", home)))
        rows.append(_row("trajectory", "offline", _eval("trajectory", home)))
        with scripted_judge(NEVER_FAULTS) as url:
            rows.append(_row("trajectory", "scripted, never faults", _eval("trajectory", home, url)))
    if args.json:
        print(json.dumps({"dataset": str(DATASET.relative_to(ROOT)), "rows": rows}, indent=1))
        return
    print(f"{DATASET.relative_to(ROOT)}: {rows[0]['n']} runs; bad at score/scale < 0.5; caught = share of that "
          "failure's runs judged bad")
    head = ("scorer", "judge", "accuracy", "kappa", "acts against", "promises", "skips lookup", "good flagged",
            "calls/run")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for r in rows:
        print(" | ".join([r["scorer"], r["judge"], f"{r['accuracy']:.3f}", f"{r['kappa']:.3f}",
                          *(f"{r[c]:.2f}" for c in CASES), f"{r['good_flagged']:.2f}", f"{r['calls_per_run']:.2f}"]))


if __name__ == "__main__":
    main()
