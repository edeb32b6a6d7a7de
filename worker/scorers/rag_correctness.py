"""RAG correctness (seed 002, method I): how correct the response is, judged against a reference answer.

One ``evaluate`` step: the Figure 5 rubric (0–5) over the question, the contexts, the response and the reference
answer. Contexts come from the monitor's retriever queried with question + reference answer (the paper's E3, the
default when a retriever is configured) or from the trace (E2). The reference answer is the trace's, else the
golden set's for the trace's question; with neither the trace is *unscored*. A verdict of 0 ("not sure") or a reply
without a ``[RESULT]`` in 0–5 is *unscored*. The score is ``result / 5 · scale``; the raw 0–5 is
``details.result``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas import ContextDoc, ScoreResult, StepResult, Turn
from worker.judge.base import Judge, JudgeFailed, JudgeRequest
from worker.retrieval import RetrieverConfig
from worker.scorers._run import ScoreRun, Unscorable
from worker.scorers.prompts import rag_correctness as prompts

__all__ = ["MAX_RESULT", "GoldenItem", "RagCorrectness", "judge_correctness", "load_golden"]

MAX_RESULT = 5
STEP = "rag_correctness.evaluate"


class GoldenItem(BaseModel):
    """One line of a golden set: a question and its reference answer."""

    question: str = Field(min_length=1)
    reference: str = Field(min_length=1)
    id: str | None = None


def load_golden(path: str | Path) -> list[GoldenItem]:
    """A JSONL golden set, ``{"question", "reference", "id"?}`` per line; errors name the line."""
    items = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                items.append(GoldenItem.model_validate_json(line))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: {exc}") from None
    return items


def _key(question: str) -> str:
    return " ".join(question.split()).casefold()


@lru_cache(maxsize=8)
def _references(path: str, mtime_ns: int) -> dict[str, str]:
    return {_key(item.question): item.reference for item in load_golden(path)}


async def judge_correctness(
    run: ScoreRun, *, step: str, question: str, contexts: Sequence[ContextDoc], response: str, reference: str
) -> prompts.Verdict:
    """One Figure 5 verdict, recorded on ``run`` as step ``step``. Unscorable when no 0–5 ``[RESULT]`` is found.

    The reply's ``evaluation`` field is parsed; a reply that is not the JSON asked for but still carries a
    ``[RESULT] n`` (a Prometheus-trained judge writing its native format) is parsed from the raw text."""
    prompt = prompts.render(question=question, contexts=contexts, response=response, reference=reference)
    request = JudgeRequest(step=STEP, instructions=prompts.INSTRUCTIONS, prompt=prompt,
                           output_type=prompts.Evaluation,
                           inputs={"question": question, "contexts": [c.text for c in contexts],
                                   "response": response, "reference": reference})
    try:
        reply = await run.judge.ask(request)
    except JudgeFailed as exc:
        run.calls.extend(exc.calls)
        raise
    run.calls.extend(reply.calls)
    text = reply.output.evaluation if reply.output is not None else reply.raw
    verdict = prompts.parse_verdict(text)
    if verdict is None:
        run.steps.append(StepResult(name=step, prompt=prompt, result={"raw": reply.raw}))
        run.details["raw_reply"] = reply.raw
        raise Unscorable(f"the judge's {step} reply has no [RESULT] between 0 and {MAX_RESULT}")
    run.steps.append(StepResult(name=step, prompt=prompt,
                                result={"feedback": verdict.feedback, "result": verdict.score}))
    return verdict


class RagCorrectness(BaseModel):
    """Params: ``scale`` (1.0), ``retriever`` ({kind, path, top_k}), ``contexts`` ("e3" | "e2"; e3 when a
    retriever is configured), ``golden`` (a JSONL of question → reference for traces without one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str] = "rag_correctness"
    version: ClassVar[str] = "1"

    scale: float = Field(default=1.0, gt=0.0)
    retriever: RetrieverConfig | None = None
    contexts: Literal["e2", "e3"] | None = None
    golden: str | None = None

    @model_validator(mode="after")
    def _needs_retriever(self) -> RagCorrectness:
        if self.contexts == "e3" and self.retriever is None:
            raise ValueError("contexts 'e3' retrieves with question + reference answer: it needs params.retriever")
        if self.golden is not None and not Path(self.golden).is_file():
            raise ValueError(f"golden set {self.golden!r} is not a file")
        return self

    @property
    def context_source(self) -> Literal["e2", "e3"]:
        return self.contexts or ("e3" if self.retriever is not None else "e2")

    def reference_for(self, turn: Turn) -> tuple[str, str] | None:
        """The reference answer and where it came from ("trace" or "golden"), or None."""
        if turn.reference and turn.reference.strip():
            return turn.reference, "trace"
        if self.golden is not None:
            path = Path(self.golden)
            found = _references(str(path.resolve()), path.stat().st_mtime_ns).get(_key(turn.question))
            if found:
                return found, "golden"
        return None

    async def retrieve(self, question: str, reference: str) -> list[ContextDoc]:
        """E3: the retriever's best documents for question + reference answer."""
        assert self.retriever is not None
        retriever = self.retriever.open()
        return await asyncio.to_thread(retriever.search, f"{question}\n{reference}", self.retriever.top_k)

    async def score(self, turn: Turn, judge: Judge) -> ScoreResult:
        run = ScoreRun(self.name, self.version, self.scale, judge)
        return await run.outcome(lambda: self._score(turn, run))

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        found = self.reference_for(turn)
        if found is None:
            raise Unscorable("no reference answer: the trace has none and no golden set holds its question")
        reference, reference_source = found
        source = self.context_source
        contexts = await self.retrieve(turn.question, reference) if source == "e3" else list(turn.contexts)
        run.details.update(reference_source=reference_source, context_source=source,
                           context_ids=[doc.id for doc in contexts])
        verdict = await judge_correctness(run, step="evaluate", question=turn.question, contexts=contexts,
                                          response=turn.output, reference=reference)
        run.details["result"] = verdict.score
        if verdict.score == 0:
            raise Unscorable(f"the judge is not sure (result 0): {verdict.feedback}")
        result = run.scored(verdict.score / MAX_RESULT * self.scale, verdict.feedback)
        return result.model_copy(update={"label": prompts.LABELS[verdict.score]})
