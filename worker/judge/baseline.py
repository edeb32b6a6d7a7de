"""The offline baseline judge: no LLM, deterministic, fast, and labelled ``baseline`` in every row it produces.

It answers a ``JudgeRequest`` by computing the step's output from ``request.inputs`` with word-overlap heuristics
(the paper's word-recall baseline family): statements by sentence segmentation, relevance by content-word overlap
with the question, context relevance by overlap with the question and the response, prompt alignment by overlap
and length, the RAG rubric by word recall against the reference. Steps dispatch through a table; a scorer
module adds its own steps with ``register(step, handler)``. A ``*.reason`` step without a handler of its own
returns the request's ``inputs["summary"]``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from schemas import JudgeCall, JudgeConfig
from worker.judge.base import JudgeFailed, JudgeReply, JudgeRequest

__all__ = [
    "MODEL",
    "BaselineJudge",
    "Handler",
    "content_words",
    "recall_rubric",
    "register",
    "sentences",
    "word_recall",
]

T = TypeVar("T", bound=BaseModel)
Handler = Callable[[Mapping[str, Any]], dict[str, Any]]

MODEL = "baseline-word-overlap-v1"
_HANDLERS: dict[str, Handler] = {}

_STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers him his how
i if in into is it its itself just me more most my no nor not of off on once only or other our out over own same
she should so some such than that the their them then there these they this those through to too under until up
very was we were what when where which while who whom why will with would you your yours please tell explain give
""".split())
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_TOKEN = re.compile(f"[{_CJK}]+|[^\\W_]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_NOT_SURE = re.compile(r"(?i)\b(i (do not|don't) know|not sure|cannot answer|can't answer)\b|わかりません|分かりません")


def _normalise(word: str) -> str:
    word = word.lower()
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """Lower-cased words that carry meaning (no stopwords, plural ``s`` dropped); CJK runs as character bigrams."""
    words: set[str] = set()
    for match in _TOKEN.finditer(text):
        token = match.group()
        if re.match(f"[{_CJK}]", token):
            words.update(token[i:i + 2] for i in range(max(1, len(token) - 1)))
        elif len(token) > 1 and token.lower() not in _STOPWORDS:
            words.add(_normalise(token))
    return words


def sentences(text: str) -> list[str]:
    """``text`` split after sentence-ending punctuation and at line breaks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _share(part: set[str], whole: set[str]) -> float:
    """The fraction of ``whole`` found in ``part`` (0 when ``whole`` is empty)."""
    return len(part & whole) / len(whole) if whole else 0.0


def word_recall(response: str, reference: str) -> float:
    """The fraction of the reference's content words that the response contains."""
    return _share(content_words(response), content_words(reference))


def recall_rubric(response: str, reference: str) -> int:
    """Word recall mapped onto the paper's 0–5 rubric; 0 when the response says it is not sure or is empty."""
    if not response.strip() or _NOT_SURE.search(response):
        return 0
    recall = word_recall(response, reference)
    return next(score for floor, score in ((0.85, 5), (0.65, 4), (0.4, 3), (0.2, 2), (0.0, 1)) if recall >= floor)


def register(step: str, handler: Handler) -> None:
    """Teach the baseline judge a step: ``handler(inputs)`` returns the step's output as a dict."""
    _HANDLERS[step] = handler


class BaselineJudge:
    """A judge with no LLM behind it. ``model`` says so on every score and judge-call row."""

    def __init__(self, config: JudgeConfig | None = None) -> None:
        self.name = config.name if config else "baseline"
        self.model = MODEL

    async def ask(self, request: JudgeRequest[T]) -> JudgeReply[T]:
        handler = _HANDLERS.get(request.step)
        if handler is None and request.step.endswith(".reason") and "summary" in request.inputs:
            handler = _summary_reason
        if handler is None:
            raise JudgeFailed("baseline_unsupported", f"the baseline judge has no heuristic for step {request.step!r}")
        started = time.perf_counter()
        data = handler(request.inputs)
        try:
            output = request.output_type.model_validate(data)
        except ValidationError as exc:
            raise JudgeFailed("baseline_mismatch", f"baseline {request.step} output does not fit: {exc}") from exc
        call = JudgeCall(step=request.step, model=self.model, latency_ms=(time.perf_counter() - started) * 1000)
        return JudgeReply(output=output, raw=json.dumps(data, ensure_ascii=False), calls=[call])


def _summary_reason(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"reason": f"Baseline judge (word overlap, no LLM): {inputs['summary']}."}


def _statements(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"statements": sentences(inputs["output"])}


def _relevance(inputs: Mapping[str, Any]) -> dict[str, Any]:
    question = content_words(inputs["question"])
    results = []
    for statement in inputs["statements"]:
        words = content_words(statement)
        shared = sorted(words & question)
        if len(shared) >= 2 or (shared and len(shared) / len(words) >= 0.3):
            result = "yes"
        elif shared:
            result = "unsure"
        else:
            result = "no"
        why = f"shares {', '.join(shared)} with the question" if shared else "shares no content word with the question"
        results.append({"result": result, "reason": why})
    return {"results": results}


def _judged_statements(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Statements and their verdicts in one answer (Answer Relevancy's fused step)."""
    statements = sentences(inputs["output"])
    verdicts = _relevance({"question": inputs["question"], "statements": statements})["results"]
    return {"statements": [{"statement": s, **v} for s, v in zip(statements, verdicts, strict=True)]}


def _level(coverage: float) -> str:
    return "high" if coverage >= 0.5 else "medium" if coverage >= 0.25 else "low" if coverage > 0 else "none"


def _context_relevance(inputs: Mapping[str, Any]) -> dict[str, Any]:
    question, response = content_words(inputs["question"]), content_words(inputs["response"])
    evaluations, covered = [], set()
    for index, context in enumerate(inputs["contexts"]):
        words = content_words(context)
        covered |= words & question
        coverage = _share(words, question)
        news = words - question  # what the context adds beyond the question's own words
        used = _share(response, news) >= 0.25
        evaluations.append({"context_index": index, "relevance_level": _level(coverage), "used": used,
                            "reasoning": f"covers {coverage:.0%} of the question's content words"})
    uncovered = sorted(question - covered)
    missing = [f"information about {', '.join(uncovered)}"] if uncovered else []
    return {"evaluations": evaluations, "missing_context": missing,
            "overall_assessment": "baseline: word overlap between each context, the question and the response"}


def _alignment(target: str, response_text: str) -> dict[str, Any]:
    """Alignment of a response with a prompt or with system instructions, by overlap and length."""
    asked, response = content_words(target), content_words(response_text)
    checks = [{"requirement": s, "fulfilled": _share(response, content_words(s)) >= 0.5}
              for s in sentences(target) if content_words(s)]
    intent = _share(response, asked)
    requirements = sum(c["fulfilled"] for c in checks) / len(checks) if checks else intent
    completeness = min(1.0, len(response) / max(3, 2 * len(asked)))
    appropriateness = 1.0 if response else 0.0

    def dim(score: float, what: str) -> dict[str, Any]:
        return {"score": round(score, 4), "reasoning": f"baseline: {what}"}

    return {
        "primary_intent": sentences(target)[0] if sentences(target) else "",
        "requirement_checks": checks,
        "intent": dim(intent, "share of the prompt's content words the response contains"),
        "requirements": dim(requirements, "share of the prompt's sentences half-covered by the response"),
        "completeness": dim(completeness, "response length against twice the prompt's content words"),
        "appropriateness": dim(appropriateness, "the response is not empty"),
    }


def _rubric(inputs: Mapping[str, Any]) -> dict[str, Any]:
    score = recall_rubric(inputs["response"], inputs["reference"])
    recall = word_recall(inputs["response"], inputs["reference"])
    return {"evaluation": f"Feedback: baseline word recall against the reference answer is {recall:.0%}. "
                          f"[RESULT] {score}"}


_HANDLERS.update({
    "answer_relevancy.preprocess": _statements,
    "answer_relevancy.analyze": _relevance,
    "answer_relevancy.judge": _judged_statements,
    "context_relevance.analyze": _context_relevance,
    "prompt_alignment.analyze_user": lambda inputs: _alignment(inputs["prompt"], inputs["response"]),
    "prompt_alignment.analyze_system": lambda inputs: _alignment(inputs["system"], inputs["response"]),
    "prompt_alignment.analyze": lambda inputs: {"user": _alignment(inputs["prompt"], inputs["response"]),
                                                "system": _alignment(inputs["system"], inputs["response"])},
    "rag_correctness.evaluate": _rubric,
})
