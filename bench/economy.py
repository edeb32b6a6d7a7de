"""Judge economy: Answer Relevancy calls and tokens per score, vigil's modes beside deepeval's, in the same run.

    .venv/bin/python bench/economy.py            # a rich table; --json prints one JSON object
    make bench-peers                             # once: deepeval in its own virtualenv, .bench-venv/

Scores ``--turns`` demo turns (``worker/demo/data/turns.jsonl``, every k-th so every agent is in) once per vigil
mode through the real judge stack (``AnswerRelevancy`` -> ``LLMJudge`` -> ``JudgeTransport`` -> HTTP), then runs
deepeval's ``AnswerRelevancyMetric`` (with and without its reason) on the same turns in a subprocess with the peer
virtualenv's python (``bench/deepeval_peer.py``), against the same scripted OpenAI-compatible server in the same
run. Nothing is cached: each pass pays for every call.

**How the scripted server answers.** Both systems get the same judgement, the offline baseline judge's heuristics
(``worker/judge/baseline.py``): statements are the output's sentences, a statement's verdict is yes / unsure / no
by its content-word overlap with the question. For vigil's requests the server returns what ``BaselineJudge``
computes for the request being sent (its JSON, schema-valid for every vigil step). For deepeval's requests it reads
deepeval's prompt: the text after ``Text:`` (statements step), the ``Input:`` and the ``Statements:`` list
(verdicts step: yes / borderline / no, with a reason only for no and borderline, as deepeval's prompt asks), the
score and the irrelevant statements' reasons (reason step: one sentence). So the two systems' verdicts agree
statement for statement, and what differs is what each sends and asks back.

**How tokens are counted**, the same for both: characters / 4 of each request the server receives, i.e. the text
of its messages plus its ``response_format`` (a JSON schema is read by the model too), and of each reply's content.
Cached tokens are the prefix a request (its response-format schema, then its messages) shares with one of the 64
requests before it from the same system (its characters / 4): what a provider's automatic prefix cache could
serve. OpenAI's starts at 1,024 tokens, so on prompts shorter than that it serves nothing; the figure shows how
much of each prompt is a reusable static prefix.

``equal_verdicts`` is true for a mode when its status, score, statement count and yes / unsure / no counts equal
the seed-faithful ``llm`` mode's on every turn. Goal (issue 12): the cheapest mode with equal verdicts at <= 0.6 of
deepeval's tokens per score with its reason (its three calls).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The vigil code measured: this tree, or another one (bench/judge_cost.py --before measures an earlier commit).
CODE = Path(os.environ.get("VIGIL_BENCH_CODE") or ROOT)
sys.path.insert(0, str(CODE))

from rich.console import Console
from rich.table import Table
from vigil.schemas import JudgeConfig, Turn
from vigil.worker.judge.base import JudgeReply, JudgeRequest
from vigil.worker.judge.baseline import BaselineJudge, relevance_step, sentences
from vigil.worker.judge.client import LLMJudge
from vigil.worker.judge.transport import JudgeTransport

from tests.judge_server import Reply, ScriptedJudge

__all__ = ["Exchange", "Ledger", "ScriptedAnswers", "main", "prompt_text", "request_chars"]

PEER_PYTHON = ROOT / ".bench-venv" / "bin" / "python"
PEER_SCRIPT = ROOT / "bench" / "deepeval_peer.py"
CACHE_WINDOW = 64  # earlier requests a prefix may be shared with
# name -> AnswerRelevancy params (reason_mode included); "llm" is the seeds' three steps
MODES: dict[str, dict[str, Any]] = {
    "llm": {"reason_mode": "llm"},
    "template": {"reason_mode": "template"},
    "fused_llm": {"reason_mode": "llm", "steps": "fused"},
    "fused_template": {"reason_mode": "template", "steps": "fused"},
}


def demo_turns(count: int) -> list[Turn]:
    lines = (ROOT / "worker" / "demo" / "data" / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    turns = [t for t in (Turn.model_validate_json(line) for line in lines) if t.question.strip() and t.output.strip()]
    step = max(1, len(turns) // count)
    return turns[::step][:count]


# ---- what the server received, counted the same way for every system -------------------------------------------

def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts (deepeval sends these)
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(_message_text(m) for m in body.get("messages", []))


def request_chars(body: dict[str, Any]) -> int:
    """The request's messages plus its response_format, as characters."""
    fmt = body.get("response_format")
    return len(prompt_text(body)) + (len(json.dumps(fmt, ensure_ascii=False, separators=(",", ":"))) if fmt else 0)


def _shared_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest m with a[:m] == b[:m], by slices (C speed)
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class Exchange:
    system: str  # which system (or vigil mode / monitor) sent it
    step: str
    prompt_chars: int
    completion_chars: int
    cached_chars: int
    parts: dict[str, int] = field(default_factory=dict)  # prompt_chars by part (see ``prompt_parts``)


_RULES_START = "The material to evaluate is enclosed between <<<DATA_"


def prompt_parts(body: dict[str, Any]) -> dict[str, int]:
    """A request's characters by part: the system message (task and criteria, static), the response format (the
    JSON schema), the fence rules, and the rest of the user messages (the fenced trace text and figures)."""
    messages = body.get("messages", [])
    system = sum(len(_message_text(m)) for m in messages if m.get("role") == "system")
    user = [_message_text(m) for m in messages if m.get("role") != "system"]
    rules = 0
    if user and user[0].startswith(_RULES_START):
        rules = user[0].find("\n\n") if "\n\n" in user[0] else len(user[0])
    fmt = body.get("response_format")
    return {"system": system, "schema": len(json.dumps(fmt, ensure_ascii=False, separators=(",", ":"))) if fmt else 0,
            "fence rules": rules, "data": max(0, request_chars(body) - system - rules
                                               - (len(json.dumps(fmt, ensure_ascii=False, separators=(",", ":")))
                                                  if fmt else 0))}


@dataclass
class Ledger:
    """Every request the scripted server answered, with the reply, tagged with the system that sent it."""

    exchanges: list[Exchange] = field(default_factory=list)
    _recent: dict[str, list[str]] = field(default_factory=dict)

    def record(self, system: str, step: str, body: dict[str, Any], reply: str) -> None:
        fmt = body.get("response_format")  # OpenAI caches a structured-output schema as part of the prefix
        text = (json.dumps(fmt, ensure_ascii=False, separators=(",", ":")) if fmt else "") + prompt_text(body)
        recent = self._recent.setdefault(system, [])
        cached = min(request_chars(body), max((_shared_prefix(text, earlier) for earlier in recent), default=0))
        recent.append(text)
        del recent[:-CACHE_WINDOW]
        self.exchanges.append(Exchange(system, step, request_chars(body), len(reply), cached, prompt_parts(body)))

    def totals(self, system: str) -> dict[str, float]:
        mine = [e for e in self.exchanges if e.system == system]
        return {"calls": len(mine), "parts": {part: sum(e.parts.get(part, 0) for e in mine) / 4
                                              for part in ("system", "schema", "fence rules", "data")},
                "prompt_tokens": sum(e.prompt_chars for e in mine) / 4,
                "completion_tokens": sum(e.completion_chars for e in mine) / 4,
                "cached_tokens": sum(e.cached_chars for e in mine) / 4}


# ---- the scripted server's answers ----------------------------------------------------------------------------

class ScriptedAnswers:
    """A judge on the scripted server: each request goes through the real ``LLMJudge``; the server answers it with
    what ``BaselineJudge`` computes for that request. Requests from other clients (the peer) are answered by
    ``peer`` from their prompt text. Every exchange is recorded in ``ledger`` under ``system``."""

    def __init__(self, server: ScriptedJudge, ledger: Ledger,
                 peer: Callable[[dict[str, Any]], tuple[str, str]] | None = None) -> None:
        config = JudgeConfig(name="economy", base_url=server.base_url, model="scripted-baseline", timeout_s=60)
        self.llm = LLMJudge(config, JudgeTransport(config))
        self.name, self.model = config.name, config.model
        self.baseline, self.ledger, self.peer = BaselineJudge(), ledger, peer
        self.system = "vigil"
        self.answer_cpu = 0.0  # CPU seconds (this thread) spent computing the scripted answers
        self._answer: tuple[str, str] | None = None  # (step, reply) for the vigil request in flight
        server.script = self._reply

    def _reply(self, body: dict[str, Any]) -> Reply:
        if self._answer is not None:
            step, content = self._answer
        elif self.peer is not None:
            step, content = self.peer(body)
        else:
            return Reply.error(500, "no answer for this request")
        self.ledger.record(self.system, step, body, content)
        return Reply(content)

    async def ask(self, request: JudgeRequest) -> JudgeReply:
        started = time.thread_time()
        self._answer = (request.step, (await self.baseline.ask(request)).raw)
        self.answer_cpu += time.thread_time() - started  # the stand-in's work, not vigil's: benchmarks subtract it
        try:
            return await self.llm.ask(request)
        finally:
            self._answer = None

    async def aclose(self) -> None:
        await self.llm.aclose()


_DEEPEVAL_TEXT = re.compile(r"\nText:\n(.*)\n\nJSON:\s*$", re.DOTALL)
_DEEPEVAL_VERDICTS = re.compile(r"\nInput:\n(.*)\n\nStatements:\n(.*)\n\nJSON:\s*$", re.DOTALL)
_DEEPEVAL_REASON = re.compile(r"Answer Relevancy Score:\n(.*?)\n\nReasons why.*?:\n(.*)\n\nInput:\n", re.DOTALL)


def answer_deepeval(body: dict[str, Any]) -> tuple[str, str]:
    """deepeval's AnswerRelevancyMetric prompts answered with the baseline judge's heuristics (the module doc)."""
    text = prompt_text(body)
    if "breakdown and generate a list of statements" in text and (m := _DEEPEVAL_TEXT.search(text)):
        return "statements", json.dumps({"statements": sentences(m.group(1))})
    if "determine whether each statement is relevant" in text and (m := _DEEPEVAL_VERDICTS.search(text)):
        question, statements = m.group(1), ast.literal_eval(m.group(2).strip())
        results = _baseline_verdicts(question, statements)
        verdicts = [{"verdict": "yes"} if r["result"] == "yes" else
                    {"reason": r["reason"], "verdict": "borderline" if r["result"] == "unsure" else "no"}
                    for r in results]
        return "verdicts", json.dumps({"verdicts": verdicts})
    if "provide a CONCISE reason for the score" in text and (m := _DEEPEVAL_REASON.search(text)):
        irrelevant = ast.literal_eval(m.group(2).strip()) if m.group(2).strip().startswith("[") else []
        reason = (f"The score is {m.group(1).strip()} because {len(irrelevant)} statement(s) do not address "
                  f"the input." if irrelevant else f"The score is {m.group(1).strip()}: every statement addresses "
                  "the input.")
        return "reason", json.dumps({"reason": reason})
    return "unknown", json.dumps({"error": "unrecognised prompt"})


def _baseline_verdicts(question: str, statements: list[str]) -> list[dict[str, str]]:
    from vigil.worker.scorers.prompts.answer_relevancy import Verdicts

    request = JudgeRequest(step="answer_relevancy.analyze", instructions="", prompt="", output_type=Verdicts,
                           inputs={"question": question, "statements": statements}, offline=relevance_step)
    coroutine = BaselineJudge().ask(request)  # computes without awaiting anything: run it to its end here, in
    try:  # the server's thread, whose event loop is already running
        coroutine.send(None)
    except StopIteration as done:
        return json.loads(done.value.raw)["results"]
    raise RuntimeError("the baseline judge awaited something")


# ---- the runs -------------------------------------------------------------------------------------------------

def _verdict(result) -> tuple:
    return (result.status, result.score, *(result.details.get(k) for k in ("statements", "yes", "unsure", "no")))


async def _vigil(judge: ScriptedAnswers, turns: list[Turn]) -> dict[str, list]:
    from vigil.worker.scorers.answer_relevancy import AnswerRelevancy

    results: dict[str, list] = {}
    for mode, params in MODES.items():
        judge.system = mode
        scorer = AnswerRelevancy(**params)
        results[mode] = [await scorer.score(turn, judge) for turn in turns]
    return results


def _peer(judge: ScriptedAnswers, server: ScriptedJudge, turns: list[Turn], *, reason: bool) -> list[dict]:
    judge.system = "deepeval" if reason else "deepeval_no_reason"
    lines = "".join(json.dumps({"input": t.question, "actual_output": t.output}) + "\n" for t in turns)
    command = [str(PEER_PYTHON), str(PEER_SCRIPT), "--base-url", server.base_url, *([] if reason else ["--no-reason"])]
    done = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the deepeval peer failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def run(turns: list[Turn], *, with_peer: bool) -> dict[str, Any]:
    ledger = Ledger()
    with ScriptedJudge() as server:
        judge = ScriptedAnswers(server, ledger, peer=answer_deepeval)

        async def vigil() -> dict[str, list]:
            try:
                return await _vigil(judge, turns)
            finally:
                await judge.aclose()

        results = asyncio.run(vigil())
        peer = {}
        if with_peer:
            peer = {True: _peer(judge, server, turns, reason=True), False: _peer(judge, server, turns, reason=False)}
    n = len(turns)
    modes = {}
    for mode, scored in results.items():
        t = ledger.totals(mode)
        modes[mode] = {
            "params": MODES[mode], "calls_per_score": round(t["calls"] / n, 2),
            "prompt_tokens": round(t["prompt_tokens"] / n, 1),
            "completion_tokens": round(t["completion_tokens"] / n, 1),
            "cached_tokens": round(t["cached_tokens"] / n, 1),
            "prompt_parts": {part: round(v / n, 1) for part, v in t["parts"].items()},
            "tokens_per_score": round((t["prompt_tokens"] + t["completion_tokens"]) / n, 1),
            "scored": sum(r.status == "scored" for r in scored),
            "scores": [r.score for r in scored],
            "equal_verdicts": all(_verdict(a) == _verdict(b) for a, b in zip(scored, results["llm"], strict=True)),
        }
    report: dict[str, Any] = {"benchmark": "economy", "scorer": "answer_relevancy", "turns": n, "modes": modes}
    if with_peer:
        rows = {}
        for reason, out in peer.items():
            t = ledger.totals("deepeval" if reason else "deepeval_no_reason")
            rows["with_reason" if reason else "without_reason"] = {
                "calls_per_score": round(t["calls"] / n, 2), "prompt_tokens": round(t["prompt_tokens"] / n, 1),
                "completion_tokens": round(t["completion_tokens"] / n, 1),
                "cached_tokens": round(t["cached_tokens"] / n, 1),
                "tokens_per_score": round((t["prompt_tokens"] + t["completion_tokens"]) / n, 1),
                "scores": [r.get("score") for r in out], "errors": sum("error" in r for r in out),
            }
        version = next((r["version"] for r in peer[True] if "version" in r), "?")
        report["peer"] = {"name": "deepeval AnswerRelevancyMetric", "version": version, **rows["with_reason"],
                          "without_reason": rows["without_reason"]}
        base = report["peer"]["tokens_per_score"]
        for row in modes.values():
            row["vs_peer"] = round(row["tokens_per_score"] / base, 3) if base else None
        cheapest = min((m for m in modes.values() if m["equal_verdicts"]), key=lambda m: m["tokens_per_score"])
        report["goal_met"] = cheapest["vs_peer"] is not None and cheapest["vs_peer"] <= 0.6
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)

    with_peer = PEER_PYTHON.exists()
    if not with_peer:
        print(f"no peer: deepeval is not installed in {PEER_PYTHON.parent.parent.name}/; run `make bench-peers` "
              "to measure vigil against it", file=sys.stderr)
    started = time.monotonic()
    report = run(demo_turns(args.turns), with_peer=with_peer)
    report["wall_s"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps(report))
        return
    peer = report.get("peer")
    title = (f"Answer Relevancy on {report['turns']} demo turns, scripted judge, tokens = chars/4 of the requests"
             + (f"; goal (<= 0.6x deepeval with reason) {'met' if report['goal_met'] else 'MISSED'}" if peer else ""))
    table = Table(title=title)
    for column in ("system", "calls/score", "prompt tok", "completion tok", "cached tok", "tokens/score",
                   "x deepeval", "verdicts = llm"):
        table.add_column(column, justify="left" if column == "system" else "right")
    if peer:
        for name, row in (("deepeval, with reason", peer), ("deepeval, without reason", peer["without_reason"])):
            table.add_row(f"{name} ({peer['version']})", f"{row['calls_per_score']:.2f}", f"{row['prompt_tokens']:.0f}",
                          f"{row['completion_tokens']:.0f}", f"{row['cached_tokens']:.0f}",
                          f"{row['tokens_per_score']:.0f}", f"{row['tokens_per_score'] / peer['tokens_per_score']:.2f}",
                          "—")
    for mode, row in report["modes"].items():
        table.add_row(f"vigil {mode}", f"{row['calls_per_score']:.2f}", f"{row['prompt_tokens']:.0f}",
                      f"{row['completion_tokens']:.0f}", f"{row['cached_tokens']:.0f}",
                      f"{row['tokens_per_score']:.0f}",
                      f"{row['vs_peer']:.2f}" if peer else "—", "yes" if row["equal_verdicts"] else "NO")
    console = Console(width=170)
    console.print(table)
    parts = Table(title="vigil's prompt tokens per score, by part (system = task and criteria; schema = the response "
                        "format; data = the fenced trace text and figures)")
    for column in ("mode", "system", "schema", "fence rules", "data", "completion"):
        parts.add_column(column, justify="left" if column == "mode" else "right")
    for mode, row in report["modes"].items():
        parts.add_row(mode, *(f"{row['prompt_parts'][p]:.0f}" for p in ("system", "schema", "fence rules", "data")),
                      f"{row['completion_tokens']:.0f}")
    console.print(parts)


if __name__ == "__main__":
    main()
