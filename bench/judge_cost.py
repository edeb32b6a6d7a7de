"""Judge calls and tokens per trace for every demo monitor, before and after, with the cacheable prefix.

    .venv/bin/python bench/judge_cost.py                 # a rich table; --json prints one JSON object
    .venv/bin/python bench/judge_cost.py --before REF    # "before" = the code at REF (default: BEFORE_REF)

Every monitor of the demo config runs on every demo turn its filters select (no sampling), with its own params and
reason mode, through ``LLMJudge`` -> ``Transport`` -> HTTP to the scripted local server answering as the offline
baseline judge (``bench/economy.py``'s ``ScriptedAnswers``). The cheaper modes the demo config does not use are
measured as extra rows (``steps: fused``, ``reason: template``).

Tokens are counted from what the server received, the same way in both runs (``bench/economy.py``'s ``Ledger``):
characters / 4 of each request's messages and response format, and of each reply. The cached tokens are the prefix
a request (schema, then messages) shares with one of the 64 requests before it from the same monitor: what a
provider's automatic prefix cache could serve (OpenAI's serves nothing below 1,024 tokens of prompt). The figures
measure vigil's prompts, not a model's verbosity: a real model's replies, reasons above all, are longer than the
baseline judge's.

"Before" runs this same harness on the code at ``--before`` (``git archive`` into a temporary directory, measured in
a subprocess with that tree first on the path), on the same turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from economy import CODE, ROOT, Ledger, ScriptedAnswers  # noqa: E402  (puts the measured code on the path)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

BEFORE_REF = "f12032a"  # main when issue 12 ("judge tokens at most 0.6x deepeval's") was taken up
# Extra rows: (monitor, params overrides, reason) for the cheaper modes the demo config leaves off.
VARIANTS = [("answer_relevancy", {"steps": "fused"}, "template"),
            ("answer_relevancy", {}, "template"),
            ("prompt_alignment", {"steps": "fused"}, "template"),
            ("context_relevance", {}, "template")]


def _turns() -> list:
    from vigil.schemas import Turn

    lines = (ROOT / "worker" / "demo" / "data" / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    return [Turn.model_validate_json(line) for line in lines if line.strip()]


async def measure(variants: bool) -> list[dict]:
    from vigil.schemas import load_config
    from vigil.worker.demo import demo_config
    from vigil.worker.pipeline.filters import matches
    from vigil.worker.scorers import build_scorer

    from tests.judge_server import ScriptedJudge

    config = load_config(demo_config(Path(tempfile.mkdtemp(prefix="vigil-cost-")))[0])
    monitors = [(m, m.name) for m in config.monitors]
    if variants:
        for name, params, reason in VARIANTS:
            base = config.monitor(name)
            label = ", ".join([*(f"{k}: {v}" for k, v in params.items()), f"reason: {reason}"])
            monitors.append((base.model_copy(update={"params": base.params | params, "reason": reason}),
                             f"{name} ({label})"))
    turns = _turns()
    rows, ledger = [], Ledger()
    with ScriptedJudge() as server:
        judge = ScriptedAnswers(server, ledger)
        try:
            for monitor, label in monitors:
                judge.system = label
                # the config's own scorers need their definitions (code before them takes the monitor alone)
                scorer = build_scorer(monitor, config) if getattr(config, "scorers", None) else build_scorer(monitor)
                results = [await scorer.score(turn, judge) for turn in turns if matches(turn, monitor.filters)]
                t, n = ledger.totals(label), len(results)
                rows.append({
                    "monitor": label, "reason": monitor.reason, "traces": n,
                    "scored": sum(r.status == "scored" for r in results),
                    "no_call": sum(not r.calls for r in results),
                    "calls_per_trace": round(t["calls"] / n, 2),
                    "prompt_tokens_per_trace": round(t["prompt_tokens"] / n, 1),
                    "completion_tokens_per_trace": round(t["completion_tokens"] / n, 1),
                    "cached_tokens_per_trace": round(t["cached_tokens"] / n, 1),
                    "cached_share": round(t["cached_tokens"] / t["prompt_tokens"], 3) if t["prompt_tokens"] else None,
                })
        finally:
            await judge.aclose()
    return rows


def measure_before(ref: str) -> list[dict]:
    """This harness on the code at ``ref``, in a subprocess with that tree first on the path."""
    with tempfile.TemporaryDirectory(prefix="vigil-before-") as tree:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "schemas", "worker", "tests"],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            raise SystemExit(f"cannot read {ref!r} from git: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        env = os.environ | {"VIGIL_BENCH_CODE": tree, "PYTHONPATH": tree}
        done = subprocess.run([sys.executable, __file__, "--measure-only"], capture_output=True, text=True,
                              env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"measuring {ref} failed: {done.stderr.strip()[-600:]}")
        return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--before", default=BEFORE_REF, help="the commit to compare with (default: %(default)s)")
    parser.add_argument("--no-before", action="store_true", help="measure this tree only")
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)  # the before run's child
    args = parser.parse_args()
    if args.measure_only:
        print(json.dumps(asyncio.run(measure(variants=False))))
        return
    after = asyncio.run(measure(variants=True))
    before = {r["monitor"]: r for r in ([] if args.no_before else measure_before(args.before))}
    for row in after:
        old = before.get(row["monitor"])
        total = row["prompt_tokens_per_trace"] + row["completion_tokens_per_trace"]
        row["tokens_per_trace"] = round(total, 1)
        if old:
            row["before"] = old
            old_total = old["prompt_tokens_per_trace"] + old["completion_tokens_per_trace"]
            row["tokens_ratio"] = round(total / old_total, 3) if old_total else None  # a check: no tokens
    if args.json:
        print(json.dumps({"benchmark": "judge_cost", "code": str(CODE), "before_ref": None if args.no_before
                          else args.before, "monitors": after}))
        return
    table = Table(title="Judge calls and tokens per trace, every demo turn a monitor selects (scripted judge, "
                        f"tokens = chars/4 of the requests); before = {args.before}")
    for column in ("monitor", "traces", "no call", "calls/trace", "prompt tok", "completion tok", "cached tok",
                   "cached share", "tokens/trace", "before: calls", "before: tokens", "before: cached",
                   "after / before"):
        table.add_column(column, justify="left" if column == "monitor" else "right")
    for r in after:
        old = r.get("before")
        table.add_row(
            r["monitor"], str(r["traces"]), str(r["no_call"]), f"{r['calls_per_trace']:.2f}",
            f"{r['prompt_tokens_per_trace']:.0f}", f"{r['completion_tokens_per_trace']:.0f}",
            f"{r['cached_tokens_per_trace']:.0f}", "—" if r["cached_share"] is None else f"{r['cached_share']:.0%}",
            f"{r['tokens_per_trace']:.0f}", f"{old['calls_per_trace']:.2f}" if old else "—",
            f"{old['prompt_tokens_per_trace'] + old['completion_tokens_per_trace']:.0f}" if old else "—",
            f"{old['cached_tokens_per_trace']:.0f} ({old['cached_share']:.0%})" if old else "—",
            f"{r['tokens_ratio']:.2f}" if old else "—")
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
