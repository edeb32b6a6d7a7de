"""Judge calls and tokens per trace for each scorer, on the demo set, through the real judge stack.

    .venv/bin/python bench/judge_cost.py            # a rich table; --json prints one JSON object

Every monitor of the demo config runs on the demo turns its filters select, with its own params and reason mode,
through ``LLMJudge`` -> ``Transport`` -> HTTP to the scripted local server answering as the offline baseline judge
would (``bench/economy.py``'s ``ScriptedAnswers``). Tokens are the rendered prompt's and reply's characters / 4, so
the figures measure vigil's prompts, not a model's verbosity: a real model's replies (reasons above all) are longer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from economy import ScriptedAnswers  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from schemas import Turn, load_config  # noqa: E402
from tests.judge_server import ScriptedJudge  # noqa: E402
from worker.demo import demo_config, demo_turns  # noqa: E402
from worker.pipeline.filters import matches  # noqa: E402
from worker.scorers import build_scorer  # noqa: E402


async def measure() -> list[dict]:
    config = load_config(demo_config(Path(tempfile.mkdtemp(prefix="vigil-cost-")))[0])
    turns = [Turn.model_validate(t) for t in demo_turns()]
    rows = []
    with ScriptedJudge() as server:
        judge = ScriptedAnswers(server)
        for monitor in config.monitors:
            scorer = build_scorer(monitor)
            results = [await scorer.score(turn, judge) for turn in turns if matches(turn, monitor.filters)]
            calls = [c for r in results for c in r.calls if not c.cached and not c.status.startswith("mode_")]
            n = len(results)
            rows.append({
                "monitor": monitor.name, "reason": monitor.reason, "traces": n,
                "scored": sum(r.status == "scored" for r in results),
                "calls_per_trace": len(calls) / n,
                "prompt_tokens_per_trace": sum(c.prompt_tokens for c in calls) / n,
                "completion_tokens_per_trace": sum(c.completion_tokens for c in calls) / n,
            })
        await judge.llm.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(measure())
    if args.json:
        print(json.dumps({"benchmark": "judge_cost", "monitors": rows}))
        return
    table = Table(title="Judge calls and tokens per trace on the demo set (scripted judge, tokens = chars/4)")
    for column in ("monitor", "reason", "traces", "scored", "calls/trace", "prompt tok/trace", "completion tok/trace"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["monitor"], r["reason"], str(r["traces"]), str(r["scored"]), f"{r['calls_per_trace']:.2f}",
                      f"{r['prompt_tokens_per_trace']:.0f}", f"{r['completion_tokens_per_trace']:.0f}")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
