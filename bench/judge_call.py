"""CPU per judge call: vigil's judge stack beside the bare ``openai`` client sending the same request, in one run.

    .venv/bin/python bench/judge_call.py                  # a table; --json prints one JSON object
    .venv/bin/python bench/judge_call.py --before [REF]   # also the code at REF (default: BEFORE_REF), same run
    .venv/bin/python bench/judge_call.py --profile vigil  # where one row's CPU goes (cProfile on the CPU clock)

Every row makes its calls one at a time to the scripted judge server (``tests/judge_server.py``) in a child process
(``bench/_scripted.py``), so this process's CPU (``time.process_time``) is the client side's alone. The requests are
four steps of the built-in scorers in turn (answer relevancy's preprocess, analyze and reason, RAG correctness's
evaluate), with their real instructions and output models and prompts rendered from demo turns as the scorers
render them, no two alike (a reply cache always misses). The server answers each step with a fixed valid reply.

- ``openai create``: the bare client, ``client.chat.completions.create(model, messages, max_tokens,
  response_format=json_schema, temperature)``, the reply's content validated into the step's output model: the body
  vigil sends in ``json_schema`` mode.
- ``openai post``: the same body through the client's plain ``post`` (no parameter transform),
  ``cast_to=ChatCompletion``.
- ``vigil ask``: ``LLMJudge.ask(JudgeRequest)``, the call every scorer makes (mode ladder, limiter, retries, cost
  accounting, parsing into the output model), with no Redis and no reply cache.
- ``vigil ask, worker settings``: the same with what a worker has: Redis (the pause check on every call, the shared
  rpm/tpm limiter's script) and the in-process reply cache (a miss, then a store, on every call).
- ``vigil answer_relevancy score``: ``AnswerRelevancy().score(turn, judge)`` on distinct demo turns (three calls a
  score), per call: the scorer's own work (prompts, fences, the run, the result) on top of ``vigil ask``.

Each round runs every row (in a rotating order); a row's figure is the median over rounds of CPU ms per call, and
its ratios the medians over rounds of its CPU / the bare client's in the same round. ``--before REF`` measures the
same rows on the code at REF (``git archive``, its folders under ``vigil/`` first on a subprocess's path).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REF = "348ed63"  # main when issue 23's judge-call CPU item was taken up
CODE = Path(os.environ.get("VIGIL_BENCH_CODE") or ROOT)  # the vigil code measured (another tree: --before)
if CODE != ROOT:
    sys.path.insert(0, str(CODE))  # its ``vigil`` namespace (folders mapped as vigil.*), ahead of the editable one
sys.path.insert(0, str(ROOT))  # tests.judge_server, from this tree
sys.path.insert(0, str(ROOT / "bench"))  # _scripted

REPLIES = {  # json_schema name (the step) -> the scripted judge's reply, valid for the step's output model
    "rag_correctness_evaluate": {"evaluation": "Feedback: it gives the reference's facts. [RESULT] 4"},
    "answer_relevancy_preprocess": {"statements": ["It ships today.", "It is free.", "Cats purr."]},
    "answer_relevancy_analyze": {"results": [{"result": "yes", "reason": "It answers the question."},
                                             {"result": "unsure", "reason": "It is related but vague."},
                                             {"result": "no", "reason": "It is about something else."}]},
    "answer_relevancy_reason": {"reason": "Two of three statements address the question."},
}


def _turns(count: int) -> list[Any]:
    """``count`` demo turns with a question and an output, each made distinct (its question and output numbered)."""
    from vigil.schemas import Turn

    data = resources.files("vigil.worker.demo") / "data" / "turns.jsonl"  # the measured code's own demo turns
    turns = [Turn.model_validate_json(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    turns = [t for t in turns if t.question.strip() and t.output.strip()]
    made = []
    for i in range(count):
        data = turns[i % len(turns)].model_dump()
        last_user = max(n for n, m in enumerate(data["input"]) if m["role"] == "user")
        data["input"][last_user]["content"] += f" (#{i})"
        data["output"] += f" (#{i})"
        made.append(Turn.model_validate(data | {"trace_id": f"bench-{i}"}))
    return made


def requests(count: int) -> list[Any]:
    """``count`` judge requests, the four steps in turn: their real instructions and output models, prompts
    rendered from demo turns as the scorers render them."""
    return [_request(i % 4, turn) for i, turn in enumerate(_turns(count))]


def _request(step: int, turn: Any) -> Any:
    from vigil.worker.judge.base import JudgeRequest
    from vigil.worker.scorers.prompts import answer_relevancy as ar
    from vigil.worker.scorers.prompts import rag_correctness as rc
    from vigil.worker.scorers.prompts.common import Reason

    statements = [s.strip() + "." for s in turn.output.split(".") if s.strip()][:3] or [turn.output]
    if step == 0:
        return JudgeRequest(step="answer_relevancy.preprocess", instructions=ar.EXTRACT_SYSTEM,
                            prompt=ar.render_extract(output=turn.output), output_type=ar.Statements)
    if step == 1:
        return JudgeRequest(step="answer_relevancy.analyze", instructions=ar.ANALYZE_SYSTEM,
                            prompt=ar.render_analyze(question=turn.question, statements=statements),
                            output_type=ar.Verdicts)
    if step == 2:
        verdicts = [{"statement": s, "result": "yes", "reason": "It answers."} for s in statements]
        return JudgeRequest(step="answer_relevancy.reason", instructions=ar.REASON_SYSTEM,
                            prompt=ar.render_reason(question=turn.question, verdicts=verdicts, score=1.0, scale=1.0,
                                                    uncertainty_weight=0.3, summary="all yes"),
                            output_type=Reason)
    return JudgeRequest(step="rag_correctness.evaluate", instructions=rc.SYSTEM,
                        prompt=rc.render(question=turn.question, contexts=turn.contexts[:3], response=turn.output,
                                         reference=turn.output),
                        output_type=rc.Evaluation)


@dataclass
class Row:
    """One way of making judge calls: ``call(item)`` makes one or more and returns how many."""

    name: str
    items: Callable[[str], list[Any]]  # the items of one round (its tag makes them distinct where it matters)
    call: Callable[[Any], Awaitable[int]]


async def rows(base_url: str, redis_url: str, count: int) -> list[Row]:
    import openai
    from openai.types.chat import ChatCompletion
    from redis.asyncio import Redis
    from vigil.schemas import JudgeConfig
    from vigil.worker.judge.client import LLMJudge, strict_schema
    from vigil.worker.judge.transport import JudgeTransport
    from vigil.worker.scorers.answer_relevancy import AnswerRelevancy

    bare = openai.AsyncOpenAI(base_url=base_url, api_key="bench", timeout=60, max_retries=0)
    plain = LLMJudge(JudgeConfig(name="bench", base_url=base_url, model="m", timeout_s=60))
    worker_config = JudgeConfig(name="bench-worker", base_url=base_url, model="m", timeout_s=60, rpm=1_000_000,
                                tpm=1_000_000_000, cache_ttl_s=3600)
    worker = LLMJudge(worker_config, JudgeTransport(worker_config, redis=Redis.from_url(redis_url)))
    scorer = AnswerRelevancy()
    made = requests(count)
    turns = _turns(count // 3)  # three calls per score: about as many calls as the other rows make

    def body(request: Any) -> dict[str, Any]:
        return {"model": "m", "temperature": 0.0, "max_tokens": 1024,
                "messages": [{"role": "system", "content": request.instructions},
                             {"role": "user", "content": request.prompt}],
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": request.step.replace(".", "_"), "schema": strict_schema(request.output_type),
                    "strict": True}}}

    async def create(request: Any) -> int:
        completion = await bare.chat.completions.create(**body(request))
        request.output_type.model_validate_json(completion.choices[0].message.content)
        return 1

    async def post(request: Any) -> int:
        completion = await bare.post("/chat/completions", body=body(request), cast_to=ChatCompletion)
        request.output_type.model_validate_json(completion.choices[0].message.content)
        return 1

    async def ask(request: Any) -> int:
        reply = await plain.ask(request)
        assert reply.output is not None, reply.error
        return len(reply.calls)

    async def ask_worker(request: Any) -> int:
        reply = await worker.ask(request)
        assert reply.output is not None and not reply.calls[-1].cached, reply
        return len(reply.calls)

    async def score(turn: Any) -> int:
        result = await scorer.score(turn, plain)
        assert result.status == "scored" and len(result.calls) == 3, result
        return len(result.calls)

    return [Row("openai create", lambda _: made, create), Row("openai post", lambda _: made, post),
            Row("vigil ask", lambda _: made, ask),
            Row("vigil ask, worker settings", lambda tag: [_fresh(r, tag) for r in made], ask_worker),
            Row("vigil answer_relevancy score", lambda _: turns, score)]


async def _measure(base_url: str, redis_url: str, count: int, rounds: int, profile: str | None) -> dict[str, Any]:
    made = await rows(base_url, redis_url, count)
    for row in made:  # connections, schemas, the remembered mode
        for item in row.items("warm")[:20]:
            await row.call(item)
    cpu: dict[str, list[float]] = {row.name: [] for row in made}
    for number in range(rounds):
        for row in made[number % len(made):] + made[:number % len(made)]:
            items, calls = row.items(f"round {number}"), 0
            started = time.process_time()
            for item in items:
                calls += await row.call(item)
            cpu[row.name].append((time.process_time() - started) / calls * 1000)
    out: dict[str, Any] = {"code": str(CODE), "calls": count, "rounds": rounds, "rows": []}
    for row in made:
        mine = cpu[row.name]
        out["rows"].append({
            "row": row.name, "cpu_ms_per_call": round(statistics.median(mine), 3), "cpu_ms_min": round(min(mine), 3),
            "ratio_to_create": round(statistics.median(a / b for a, b in zip(mine, cpu["openai create"])), 3),
            "ratio_to_post": round(statistics.median(a / b for a, b in zip(mine, cpu["openai post"])), 3)})
    if profile:
        out["profile"] = await _profile(made, profile)
    return out


def _fresh(request: Any, tag: str) -> Any:
    """The request with a prompt no earlier round sent (the reply cache misses, as for new turns)."""
    from dataclasses import replace

    return replace(request, prompt=f"{request.prompt}\n[{tag}]")


async def _profile(made: list[Row], wanted: str) -> str:
    row = next((r for r in made if r.name.startswith(wanted)), None)
    if row is None:
        raise SystemExit(f"--profile: no row starts with {wanted!r}; rows: {', '.join(r.name for r in made)}")
    items = row.items("profile")
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for item in items:
        await row.call(item)
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(25)  # where the CPU goes
    stats.sort_stats("cumulative").print_stats(r"vigil|judgecost/(worker|schemas)|openai/(_base_client|resources)|redis/asyncio/client", 40)
    return f"{row.name}:\n{text.getvalue()}"


def measure(count: int, rounds: int, profile: str | None = None) -> dict[str, Any]:
    from _scripted import scripted_judge
    from vigil.worker.demo.embedded_redis import EmbeddedRedis

    with scripted_judge(REPLIES) as base_url, EmbeddedRedis() as redis_server:
        return asyncio.run(_measure(base_url, redis_server.url, count, rounds, profile))


def measure_before(ref: str, count: int, rounds: int) -> dict[str, Any]:
    """This harness on the code at ``ref``: its folders under ``vigil/`` in a temporary tree, first on the path."""
    with tempfile.TemporaryDirectory(prefix="vigil-before-") as tree:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "schemas", "worker", "producers"],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            raise SystemExit(f"cannot read {ref!r} from git: {archive.stderr.decode().strip()}")
        package = Path(tree) / "vigil"
        package.mkdir()
        subprocess.run(["tar", "-x", "-C", str(package)], input=archive.stdout, check=True)
        done = subprocess.run([sys.executable, __file__, "--measure-only", "--calls", str(count), "--rounds",
                               str(rounds)], capture_output=True, text=True, check=False,
                              env=os.environ | {"VIGIL_BENCH_CODE": tree})
        if done.returncode != 0:
            raise SystemExit(f"measuring {ref} failed: {done.stderr.strip()[-800:]}")
        result = json.loads(done.stdout)
        if not result["imported_from"].startswith(tree):
            raise SystemExit(f"measuring {ref} imported vigil from {result['imported_from']}, not the archived tree")
        return result


def _imported_from() -> str:
    import vigil.worker.judge.client

    return str(Path(vigil.worker.judge.client.__file__).resolve())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="requests per row and round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--before", nargs="?", const=BEFORE_REF, default=None, metavar="REF",
                        help=f"also measure the code at REF (default REF: {BEFORE_REF})")
    parser.add_argument("--profile", metavar="ROW", help="print where ROW's CPU goes (a row name's start)")
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)  # the before run's child
    args = parser.parse_args()
    if args.measure_only:
        print(json.dumps(measure(args.calls, args.rounds) | {"imported_from": _imported_from()}))
        return
    after = measure(args.calls, args.rounds, args.profile)
    before = measure_before(args.before, args.calls, args.rounds) if args.before else None
    if args.json:
        print(json.dumps({"benchmark": "judge_call", "after": after, "before_ref": args.before, "before": before}))
        return
    _print(after, before, args.before)
    if args.profile:
        print(after["profile"])


def _print(after: dict[str, Any], before: dict[str, Any] | None, ref: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"CPU per judge call, {after['calls']} calls x {after['rounds']} rounds, one at a time "
                        "(this process only; the scripted server runs in another)")
    columns = ["row", "CPU ms / call", "/ openai create", "/ openai post"]
    if before:
        columns += [f"before ({ref}): CPU ms / call", "before: / openai create", "after / before"]
    for column in columns:
        table.add_column(column, justify="left" if column == "row" else "right")
    old = {r["row"]: r for r in (before or {}).get("rows", [])}
    for r in after["rows"]:
        cells = [r["row"], f"{r['cpu_ms_per_call']:.3f}", f"{r['ratio_to_create']:.2f}", f"{r['ratio_to_post']:.2f}"]
        if before:
            o = old[r["row"]]
            cells += [f"{o['cpu_ms_per_call']:.3f}", f"{o['ratio_to_create']:.2f}",
                      f"{r['ratio_to_create'] / o['ratio_to_create']:.2f}"]
        table.add_row(*cells)
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
