"""Compatibility with a real OpenAI-compatible server: llama-cpp-python's, serving SmolLM2-135M-Instruct.

The model is far too small to judge, so these tests assert plumbing only: the structured-output mode the client
finds and remembers, replies that validate against their schemas, results whose status, score range, steps,
prompts and usage are well formed. Never a verdict. Run with ``make test-llm`` (``pytest -m llm``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from vigil.schemas import (
    ContextDoc,
    JudgeConfig,
    Message,
    MonitorConfig,
    ScoreResult,
    ScoreStatus,
    Turn,
)
from vigil.worker.judge import JudgeRequest, LLMJudge, build_judge
from vigil.worker.judge.client import Mode, remembered_mode
from vigil.worker.scorers import build_scorer

pytestmark = pytest.mark.llm

QUESTION = "What is the capital of France, and which river runs through it?"
OUTPUT = "The capital of France is Paris. The Seine runs through the city."
REFERENCE = "Paris is the capital of France; the Seine flows through it."
DOCS = {
    "paris.txt": "Paris is the capital and largest city of France. The Seine flows through the city centre.",
    "lyon.txt": "Lyon is a city in France at the confluence of the Rhone and the Saone.",
    "bananas.txt": "Bananas are long, curved fruits that grow in clusters on large herbaceous plants.",
}


def _turn(**overrides: Any) -> Turn:
    fields: dict[str, Any] = dict(
        trace_id="llm-compat-1", agent="geo-bot", system="Answer geography questions briefly and politely.",
        input=[Message(role="user", content=QUESTION)], output=OUTPUT,
        contexts=[ContextDoc(id="paris", text=DOCS["paris.txt"]), ContextDoc(id="bananas", text=DOCS["bananas.txt"])],
        reference=REFERENCE,
    )
    return Turn(**(fields | overrides))


@pytest.fixture(autouse=True)
def _no_redis(monkeypatch):
    """The transport uses Redis for rate limits and pauses when REDIS_URL is set; these tests need neither."""
    monkeypatch.delenv("REDIS_URL", raising=False)


@pytest.fixture
def judge_config(llama_server) -> JudgeConfig:
    # One request at a time is what the server does anyway. A timed-out request is not retried: the server would
    # still be busy with it, and a failed result with error type "timeout" is an acceptable outcome here.
    return JudgeConfig(name="smollm2", kind="openai", base_url=llama_server.base_url, model=llama_server.model,
                       temperature=0.0, timeout_s=240, max_retry_age_s=5, max_concurrency=1, max_tokens=300)


@pytest.fixture
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


class Relevance(BaseModel):
    verdict: Literal["yes", "no", "unsure"]
    reason: str


def _request(step: str = "compat.probe") -> JudgeRequest[Relevance]:
    return JudgeRequest(
        step=step,
        instructions="You judge whether a statement answers a question.",
        prompt=f"Question: {QUESTION}\nStatement: Paris is the capital of France.\nDoes the statement answer it?",
        output_type=Relevance,
    )


async def test_judge_discovers_and_remembers_a_structured_output_mode(judge_config):
    assert remembered_mode(judge_config.base_url, judge_config.model) is None  # a new port: a new endpoint

    judge = build_judge(judge_config)
    assert isinstance(judge, LLMJudge)
    try:
        first = await judge.ask(_request())
    finally:
        await judge.aclose()
    statuses = [c.status for c in first.calls]
    # llama-cpp-python's server refuses json_schema (HTTP 500, response_format.type must be text or json_object)
    # and takes json_object with the schema, which it turns into a grammar: so the reply fits the schema.
    assert statuses[0] == f"mode_rejected:{Mode.JSON_SCHEMA}", statuses
    assert statuses[1] == "ok", statuses
    assert remembered_mode(judge_config.base_url, judge_config.model) is Mode.JSON_OBJECT
    assert isinstance(first.output, Relevance), (first.error, first.raw)
    assert Relevance.model_validate(json.loads(first.raw)) == first.output
    ok = first.calls[1]
    assert ok.prompt_tokens > 0 and ok.completion_tokens > 0 and ok.latency_ms > 0
    assert ok.model == judge_config.model and ok.step == "compat.probe"

    # A second judge on the same endpoint starts in the remembered mode: no refused request first.
    again = build_judge(judge_config)
    try:
        second = await again.ask(_request("compat.probe.again"))
    finally:
        await again.aclose()
    assert second.calls and all(not c.status.startswith("mode_rejected") for c in second.calls), second.calls
    assert second.calls[0].status == "ok"
    assert isinstance(second.output, Relevance), (second.error, second.raw)
    assert remembered_mode(judge_config.base_url, judge_config.model) is Mode.JSON_OBJECT


def _assert_well_formed(result: ScoreResult, *, scorer: str, model: str, turn: Turn) -> None:
    """Plumbing, schema and range: never the verdict."""
    assert isinstance(result, ScoreResult)
    assert ScoreResult.model_validate_json(result.model_dump_json()) == result  # it round-trips through its schema
    assert result.scorer == scorer and result.scorer_version and result.run_id
    assert result.status in set(ScoreStatus)
    if result.status is ScoreStatus.SCORED:
        assert result.score is not None and 0.0 <= result.score <= result.scale, result.score
        assert result.error_type is None
    elif result.status is ScoreStatus.UNSCORED:
        assert result.score is None and result.reason, result  # a reason, never a 0
    else:
        assert result.error_type and result.reason, result
    assert result.judge_model == model

    # The real server was reached and answered, and every call is accounted for.
    answered = [c for c in result.calls if c.status in ("ok", "parse_error")]
    assert answered, [c.status for c in result.calls]
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 and c.latency_ms > 0 for c in answered), answered
    assert all(c.model == model for c in result.calls)
    usage = result.usage
    assert usage.calls == len(result.calls) and usage.prompt_tokens > 0

    # Steps are recorded with the prompts sent, and the trace's text reached the prompts.
    prompted = [s for s in result.steps if s.prompt]
    assert prompted, result.steps
    assert any(QUESTION in s.prompt or turn.output in s.prompt for s in prompted), [s.prompt for s in prompted]
    assert all(s.result is not None for s in result.steps)


SCORER_CASES = {
    "answer_relevancy": {},
    "answer_relevancy.fused": {"steps": "fused"},
    "context_relevance": {},
    "prompt_alignment": {"evaluation_mode": "both"},
    "prompt_alignment.fused": {"evaluation_mode": "both", "steps": "fused"},
    "rag_correctness.e2": {"contexts": "e2"},
    "rag_correctness.e3": {"retriever": "DOCS"},
    "multi_turn": {"turns": 2, "retriever": "DOCS", "agent": "SERVER"},
}


@pytest.mark.parametrize("case", list(SCORER_CASES))
async def test_scorer_end_to_end_against_the_real_server(case, judge_config, llama_server, docs):
    scorer_name = case.split(".")[0]
    params = dict(SCORER_CASES[case])
    if params.get("retriever") == "DOCS":
        params["retriever"] = {"kind": "bm25", "path": str(docs), "top_k": 2}
    if params.get("agent") == "SERVER":  # the agent under test: the same small model, answering as a chatbot
        params["agent"] = {"base_url": llama_server.base_url, "model": llama_server.model, "timeout_s": 240}
    monitor = MonitorConfig(name=f"llm-{case}", scorer=scorer_name, params=params, judge=judge_config.name)
    scorer = build_scorer(monitor)
    judge = build_judge(judge_config)
    turn = _turn()
    try:
        result = await scorer.score(turn, judge)
    finally:
        await judge.aclose()

    usage = result.usage
    print(f"{case}: {result.status} score={result.score} error={result.error_type} calls={usage.calls} "
          f"tokens={usage.prompt_tokens}+{usage.completion_tokens} steps={[s.name for s in result.steps]}")
    _assert_well_formed(result, scorer=scorer_name, model=judge_config.model, turn=turn)
    # json_object was found by the first test or is found here; either way no step ran in an unknown mode.
    assert remembered_mode(judge_config.base_url, judge_config.model) is Mode.JSON_OBJECT

    if scorer_name == "rag_correctness" and result.status is ScoreStatus.SCORED:
        raw = result.details["result"]
        assert raw in (1, 2, 3, 4, 5) and result.score == pytest.approx(raw / 5 * result.scale)
    if scorer_name == "multi_turn":
        sigma = result.details.get("sigma", [])
        assert len(sigma) <= 2 and all(0 <= s <= 5 for s in sigma), sigma
        assert result.step("turn1.ask") is not None  # the trace's own answer is turn 1
        if result.status is ScoreStatus.SCORED:
            for key in ("wscore", "lscore", "mscore"):
                assert key in result.details, result.details.keys()


def test_vigil_score_cli_against_the_real_server(judge_config, tmp_path):
    """``vigil score`` end to end: a trace file in, one result as JSON out, the judge a real server."""
    trace = tmp_path / "trace.json"
    trace.write_text(_turn().model_dump_json(), encoding="utf-8")
    vigil = Path(sys.executable).with_name("vigil")
    proc = subprocess.run(
        [str(vigil), "score", "--scorer", "context_relevance", "--trace", str(trace),
         "--judge-base-url", judge_config.base_url, "--model", judge_config.model, "--reason", "template"],
        capture_output=True, text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "REDIS_URL"},
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: the score failed (a timeout), still one JSON result
    result = ScoreResult.model_validate_json(proc.stdout)
    assert result.scorer == "context_relevance"
    assert result.status in set(ScoreStatus)
    if result.status is ScoreStatus.SCORED:
        assert 0.0 <= result.score <= result.scale
    assert result.calls and result.steps

