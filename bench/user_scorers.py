"""CPU per score of users' own scorers, and of a rubric beside the built-in answer relevancy, in one run.

    .venv/bin/python bench/user_scorers.py            # a table; --json prints one JSON object
    .venv/bin/python bench/user_scorers.py --rounds 9 --judged-turns 150

Every row scores the demo's support-bot turns (150, with their contexts and tool calls) through ``Scorer.score``,
as the worker does: the call context, the run, the result with its steps and reason. The checks' definitions are
the demo config's (``refund_calls``, ``refund_policy``) and the README's (``no_apology``, ``mentions_order``,
``brief``); ``reply_json`` validates the turn's answer wrapped as ``{"answer", "order_id"}`` JSON. The Python row
runs ``tests/user_scorer_functions.py:cites_a_document`` on the scorer's thread pool.

The judged rows send every request to the scripted judge server (``tests/judge_server.py``) in a child process
(``bench/_scripted.py``), so this process's CPU (``time.process_time``) is vigil's alone, the ``openai`` client's
included: the demo's ``cites_sources`` rubric (one call, a boolean and a reason) and ``answer_relevancy`` with its defaults (three calls:
statements, verdicts, reason), through ``LLMJudge`` with no Redis and no reply cache. A row's figure is the median
over rounds of CPU per score; the judged rows also give it per judge call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.user_scorer_functions
sys.path.insert(0, str(ROOT / "bench"))  # _scripted

from _scripted import scripted_judge

CHECKS = [  # (row, definition): the README's and the demo config's
    ("regex", {"name": "no_apology", "kind": "regex", "pattern": "(?i)sorry|apologi[sz]e", "match": "must_not"}),
    ("contains", {"name": "mentions_order", "kind": "contains", "any": ["order number", "tracking"],
                  "none": ["guarantee"]}),
    ("length", {"name": "brief", "kind": "length", "max": 120, "unit": "words"}),
    ("json_schema (output)", {"name": "reply_json", "kind": "json_schema", "schema": {
        "type": "object", "required": ["answer", "order_id"],
        "properties": {"answer": {"type": "string"}, "order_id": {"type": "string", "pattern": "^40-[0-9]{6}$"}}}}),
    ("json_schema (tool calls)", "refund_calls"),
    ("tool_policy", "refund_policy"),
    ("python", {"name": "cites_fn", "kind": "python", "function": "tests.user_scorer_functions:cites_a_document"}),
]
REPLIES = {  # json_schema name -> the scripted judge's reply
    "cites_sources_rubric": {"reason": "It states only what the refunds document says.", "verdict": True},
    "answer_relevancy_preprocess": {"statements": ["It ships today.", "It is free.", "Cats purr."]},
    "answer_relevancy_analyze": {"results": [{"result": "yes", "reason": "It answers the question."},
                                             {"result": "unsure", "reason": "It is related but vague."},
                                             {"result": "no", "reason": "It is about something else."}]},
    "answer_relevancy_reason": {"reason": "Two of three statements address the question."},
}


def _turns() -> list:
    from vigil.schemas import Turn

    lines = (ROOT / "worker" / "demo" / "data" / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    return [Turn.model_validate_json(line) for line in lines if '"support-bot"' in line]


def _demo_config():
    from vigil.schemas import load_config

    return load_config(ROOT / "worker" / "demo" / "data" / "vigil.yaml")


def _checks() -> list[tuple[str, Any]]:
    from pydantic import TypeAdapter
    from vigil.schemas.user_scorers import UserScorerSpec
    from vigil.worker.scorers.user import build_user_scorer

    demo = _demo_config()
    adapter = TypeAdapter(UserScorerSpec)
    built = []
    for row, definition in CHECKS:
        spec = demo.user_scorer(definition) if isinstance(definition, str) else adapter.validate_python(definition)
        built.append((row, build_user_scorer(spec)))
    return built


async def _cpu_per_score(scorer: Any, turns: list, judge: Any, repeat: int) -> float:
    """CPU seconds per score over ``repeat`` passes of ``turns``, one score at a time."""
    started = time.process_time()
    for _ in range(repeat):
        for turn in turns:
            await scorer.score(turn, judge, scorer.context_for(turn, "bench"))
    return (time.process_time() - started) / (repeat * len(turns))


def _as_json(turns: list) -> list:
    return [t.model_copy(update={"output": json.dumps({"answer": t.output, "order_id": "40-123456"})}) for t in turns]


async def measure(rounds: int, judged_turns: int) -> list[dict[str, Any]]:
    from vigil.schemas import JudgeConfig
    from vigil.worker.judge import NO_JUDGE, LLMJudge
    from vigil.worker.scorers import build_scorer

    turns = _turns()
    demo = _demo_config()
    rows: dict[str, list[float]] = {}
    checks = _checks()
    with scripted_judge(REPLIES) as base_url:
        judge = LLMJudge(JudgeConfig(name="bench", base_url=base_url, model="bench-judge", max_concurrency=1024))
        rubric = build_scorer(demo.monitor("cites_sources"), demo)
        relevancy = build_scorer(demo.monitor("answer_relevancy"), demo)
        judged = [(f"llm_judge rubric ({rubric.name})", rubric, 1), ("answer_relevancy (built-in)", relevancy, 3)]
        sample = turns[:judged_turns]
        for _, scorer, _ in judged:  # warm: the endpoint's structured-output mode, connections, schemas
            await scorer.score(sample[0], judge)
        for _ in range(rounds):
            for row, scorer in checks:
                chosen = _as_json(turns) if row.startswith("json_schema (output)") else turns
                rows.setdefault(row, []).append(await _cpu_per_score(scorer, chosen, NO_JUDGE, 10))
            for row, scorer, _ in judged:
                rows.setdefault(row, []).append(await _cpu_per_score(scorer, sample, judge, 1))
        await judge.aclose()
    calls = {row: n for row, _, n in judged}
    return [{"row": row, "cpu_us_per_score": statistics.median(values) * 1e6, "judge_calls": calls.get(row, 0),
             "cpu_us_per_call": statistics.median(values) * 1e6 / calls[row] if row in calls else None}
            for row, values in rows.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--judged-turns", type=int, default=150)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(measure(args.rounds, args.judged_turns))
    if args.json:
        print(json.dumps({"rounds": args.rounds, "rows": results}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"CPU per score, median of {args.rounds} rounds (support-bot demo turns)")
    for column in ("scorer", "CPU per score", "judge calls", "CPU per judge call", "target"):
        table.add_column(column, justify="left" if column == "scorer" else "right")
    for r in results:
        per_call = f"{r['cpu_us_per_call'] / 1000:.2f} ms" if r["cpu_us_per_call"] is not None else ""
        per_score = f"{r['cpu_us_per_score'] / 1000:.2f} ms" if r["judge_calls"] else f"{r['cpu_us_per_score']:.1f} µs"
        target = "≤ 100 µs" if r["row"].split(" ")[0] in ("regex", "json_schema", "tool_policy") else ""
        table.add_row(r["row"], per_score, str(r["judge_calls"]), per_call, target)
    Console().print(table)


if __name__ == "__main__":
    main()
