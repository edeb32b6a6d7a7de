"""Reason economy: judge calls and tokens per Answer Relevancy score, ``reason: llm`` against ``reason: template``.

    .venv/bin/python bench/economy.py            # a rich table; --json prints one JSON object

Scores ``--turns`` demo turns (``worker/demo/data/turns.jsonl``, every k-th so every agent is in) once per reason
mode through the real judge stack (``LLMJudge`` -> ``Transport`` -> HTTP), with the reply cache off so each pass
pays for every call. The verdicts (status, score, statement and yes/unsure/no counts) are compared turn by turn.
Goal: template uses <= 0.6 of llm's tokens at equal verdicts.

The judge at the other end is the scripted local server answering what the offline baseline judge computes for
each request, and reporting usage as characters / 4 of the real rendered prompt and reply. The bundled local model
(SmolLM2-135M-Instruct) was tried first: it returns no statements for any demo turn, so every score is unscored at
the first step and the reason step it is meant to compare never runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from schemas import JudgeConfig, Turn  # noqa: E402
from tests.judge_server import Reply, ScriptedJudge  # noqa: E402
from worker.judge.base import JudgeReply, JudgeRequest  # noqa: E402
from worker.judge.baseline import BaselineJudge  # noqa: E402
from worker.judge.client import LLMJudge  # noqa: E402
from worker.judge.transport import Transport  # noqa: E402
from worker.scorers.answer_relevancy import AnswerRelevancy  # noqa: E402

__all__ = ["main"]

MODES = ("llm", "template")


def demo_turns(count: int) -> list[Turn]:
    lines = (ROOT / "worker" / "demo" / "data" / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    turns = [t for t in (Turn.model_validate_json(line) for line in lines) if t.question.strip() and t.output.strip()]
    step = max(1, len(turns) // count)
    return turns[::step][:count]


def _verdict(result) -> tuple:
    return (result.status, result.score, *(result.details.get(k) for k in ("statements", "yes", "unsure", "no")))


class ScriptedAnswers:
    """An ``LLMJudge`` on the scripted server, which answers each request with the baseline judge's output."""

    def __init__(self, server: ScriptedJudge) -> None:
        config = JudgeConfig(name="economy", base_url=server.base_url, model="scripted-baseline", timeout_s=60)
        self.llm = LLMJudge(config, Transport(config))
        self.name, self.model = config.name, config.model
        self.server, self.baseline = server, BaselineJudge()
        server.script = self._reply
        self._answer = ""

    def _reply(self, body: dict[str, Any]) -> Reply:
        prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        return Reply(self._answer, prompt_tokens=prompt // 4, completion_tokens=len(self._answer) // 4)

    async def ask(self, request: JudgeRequest) -> JudgeReply:
        self._answer = (await self.baseline.ask(request)).raw
        return await self.llm.ask(request)


async def score_all(turns: list[Turn]) -> dict[str, list]:
    results: dict[str, list] = {mode: [] for mode in MODES}
    with ScriptedJudge() as server:
        judge = ScriptedAnswers(server)
        for turn in turns:
            for mode in MODES:
                results[mode].append(await AnswerRelevancy(reason_mode=mode).score(turn, judge))
        await judge.llm.aclose()
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
    results = asyncio.run(score_all(demo_turns(args.turns)))
    model = "scripted server answering as the baseline judge, tokens = chars/4"
    report = {"benchmark": "economy", "scorer": "answer_relevancy", "judge": model,
              **summarise(results), "wall_s": round(time.monotonic() - started, 1)}
    if args.json:
        print(json.dumps(report))
        return
    table = Table(title=f"Answer Relevancy on {report['turns']} demo turns ({model}): template/llm tokens = "
                        f"{report['token_ratio']}, equal verdicts {report['equal_verdicts']}/{report['turns']}")
    for column in ("reason", "scored", "judge calls", "calls/score", "prompt tok", "completion tok", "tokens/score"):
        table.add_column(column, justify="left" if column == "reason" else "right")
    for mode, r in report["modes"].items():
        table.add_row(mode, f"{r['scored']}/{r['scores']}", str(r["judge_calls"]), f"{r['calls_per_score']:.2f}",
                      str(r["prompt_tokens"]), str(r["completion_tokens"]), f"{r['tokens_per_score']:.1f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
