"""Reason economy: judge calls and tokens per Answer Relevancy score, ``reason: llm`` against ``reason: template``.

    .venv/bin/python bench/economy.py            # a rich table; --json prints one JSON object

Scores ``--turns`` demo turns (``worker/demo_data/turns.jsonl``, every k-th so both agents are in) twice with a
real local judge (SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server, see ``bench/_common.py``),
once per reason mode, with the reply cache off so the second pass pays for every call. The verdicts (status,
score, yes/unsure/no counts) are compared turn by turn. Goal: template uses <= 0.6 of llm's tokens, at equal
verdicts. Requests the server refused before vigil settled on a structured-output mode are not counted as calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from _common import ROOT, local_llm
from rich.console import Console
from rich.table import Table

from schemas import JudgeConfig, Turn
from worker.judge.client import LLMJudge
from worker.judge.transport import Transport
from worker.scorers.answer_relevancy import AnswerRelevancy

__all__ = ["main"]

MODES = ("llm", "template")


def demo_turns(count: int) -> list[Turn]:
    lines = (ROOT / "worker" / "demo_data" / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    turns = [t for t in (Turn.model_validate_json(line) for line in lines) if t.question.strip() and t.output.strip()]
    step = max(1, len(turns) // count)
    return turns[::step][:count]


def _verdict(result) -> tuple:
    return (result.status, result.score, *(result.details.get(k) for k in ("statements", "yes", "unsure", "no")))


async def score_all(base_url: str, model: str, turns: list[Turn]) -> dict[str, list]:
    config = JudgeConfig(name="economy", base_url=base_url, model=model, timeout_s=300, max_retry_age_s=900)
    judge = LLMJudge(config, Transport(config))
    results: dict[str, list] = {mode: [] for mode in MODES}
    for turn in turns:
        for mode in MODES:
            results[mode].append(await AnswerRelevancy(reason_mode=mode).score(turn, judge))
    await judge.aclose()
    return results


def summarise(results: dict[str, list]) -> dict:
    rows = {}
    for mode, scored in results.items():
        calls = [c for r in scored for c in r.calls if not c.status.startswith("mode_rejected") and not c.cached]
        tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
        rows[mode] = {
            "scores": len(scored),
            "scored": sum(1 for r in scored if r.status == "scored"),
            "judge_calls": len(calls),
            "calls_per_score": round(len(calls) / len(scored), 2),
            "prompt_tokens": sum(c.prompt_tokens for c in calls),
            "completion_tokens": sum(c.completion_tokens for c in calls),
            "tokens_per_score": round(tokens / len(scored), 1),
        }
    equal = sum(1 for a, b in zip(results["llm"], results["template"], strict=True) if _verdict(a) == _verdict(b))
    total = {m: rows[m]["prompt_tokens"] + rows[m]["completion_tokens"] for m in MODES}
    ratio = total["template"] / total["llm"] if total["llm"] else None
    return {"modes": rows, "token_ratio": None if ratio is None else round(ratio, 3),
            "equal_verdicts": equal, "turns": len(results["llm"]),
            "goal_met": ratio is not None and ratio <= 0.6 and equal == len(results["llm"])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)

    started = time.monotonic()
    turns = demo_turns(args.turns)
    with local_llm() as (base_url, model):
        results = asyncio.run(score_all(base_url, model, turns))
    report = {"benchmark": "economy", "scorer": "answer_relevancy", "judge": model,
              **summarise(results), "wall_s": round(time.monotonic() - started, 1)}
    if args.json:
        print(json.dumps(report))
        return
    table = Table(title=f"Answer Relevancy on {report['turns']} demo turns, judge {model}: "
                        f"template/llm tokens = {report['token_ratio']}, equal verdicts "
                        f"{report['equal_verdicts']}/{report['turns']}")
    for column in ("reason", "scored", "judge calls", "calls/score", "prompt tok", "completion tok", "tokens/score"):
        table.add_column(column, justify="left" if column == "reason" else "right")
    for mode, r in report["modes"].items():
        table.add_row(mode, f"{r['scored']}/{r['scores']}", str(r["judge_calls"]), f"{r['calls_per_score']:.2f}",
                      str(r["prompt_tokens"]), str(r["completion_tokens"]), f"{r['tokens_per_score']:.1f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
