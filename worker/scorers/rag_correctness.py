"""RAG correctness (seed 002, method I): how correct the response is, judged against a reference answer.

One ``evaluate`` step: the Figure 5 rubric (0–5) over the question, the contexts, the response and the reference
answer. Contexts come from the monitor's retriever queried with question + reference answer (the paper's E3, the
default when a retriever is configured) or from the trace (E2). The reference answer is the trace's, else the
golden set's for the trace's question; with neither the trace is *unscored*. A reply without a ``[RESULT]`` in 0–5
is *unscored*. A verdict of 0 (the rubric's "the response states it is not sure") is the agent abstaining: scored,
labelled ``abstained``, with no score, so the paper's mean that excludes score 0 is the report's mean and the
abstention rate is counted on its own. An empty response scores 0 (the bottom of the scale) without a judge call.
The score is ``result / 5 · scale``; the raw 0–5 is ``details.result``; the label is the rubric's level.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, model_validator
from vigil.schemas import ContextDoc, ScoreResult, Turn
from vigil.worker.judge import baseline
from vigil.worker.judge.base import JudgeReply, JudgeRequest
from vigil.worker.retrieval import RetrieverConfig
from vigil.worker.scorers import base
from vigil.worker.scorers.base import Scorer, ScoreRun, Unscorable
from vigil.worker.scorers.formulas import Bands
from vigil.worker.scorers.prompts import rag_correctness as prompts

__all__ = ["MAX_RESULT", "GoldenItem", "RagCorrectness", "judge_correctness", "load_golden"]

MAX_RESULT = 5
STEP = "rag_correctness.evaluate"
# The rubric's levels (the paper's Figure 5) as bands of result / 5.
RUBRIC_BANDS: Bands = tuple((level / MAX_RESULT, prompts.LABELS[level]) for level in range(MAX_RESULT, 1, -1)) + (
    (0.0, prompts.LABELS[1]),)
EMPTY_FEEDBACK = "The response is empty: it gives none of the reference answer."


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


def _verdict(reply: JudgeReply[prompts.Evaluation]) -> tuple[prompts.Verdict, dict[str, object]]:
    """The reply's ``evaluation`` field, or (a Prometheus-trained judge writing its native format instead of the
    JSON asked for) the raw text, read for its ``[RESULT] n``."""
    verdict = prompts.parse_verdict(reply.output.evaluation if reply.output is not None else reply.raw)
    if verdict is None:
        raise ValueError(f"has no [RESULT] between 0 and {MAX_RESULT}")
    return verdict, {"feedback": verdict.feedback, "result": verdict.score}


async def judge_correctness(
    run: ScoreRun, *, step: str, question: str, contexts: Sequence[ContextDoc], response: str, reference: str
) -> prompts.Verdict:
    """One Figure 5 verdict, recorded on ``run`` as step ``step``; Unscorable when no 0–5 ``[RESULT]`` is found.
    An empty response is the rubric's bottom (1, "completely wrong") without a judge call: saying nothing is not
    the same as saying one is not sure."""
    if not response.strip():
        run.note(step, {"feedback": EMPTY_FEEDBACK, "result": 1})
        return prompts.Verdict(score=1, feedback=EMPTY_FEEDBACK)
    prompt = prompts.render(question=question, contexts=contexts, response=response, reference=reference)
    return await run.ask(step, JudgeRequest(
        step=STEP, instructions=prompts.SYSTEM, prompt=prompt, output_type=prompts.Evaluation,
        inputs={"question": question, "contexts": [c.text for c in contexts], "response": response,
                "reference": reference}, offline=baseline.rubric_step,
    ), parse=_verdict)


class Details(base.Details):
    reference_source: str | None = None
    context_source: str | None = None
    context_ids: list[str | None] | None = None
    result: float | None = None  # 0–5; a fraction when the judge gives a finer result (the baseline heuristic)


class RagCorrectness(Scorer):
    """Params: ``scale`` (1.0), ``retriever`` ({kind, path, top_k}), ``contexts`` ("e3" | "e2"; e3 when a
    retriever is configured), ``golden`` (a JSONL of question → reference for traces without one)."""

    name: ClassVar[str] = "rag_correctness"
    version: ClassVar[str] = "2"
    bands: ClassVar[Bands] = RUBRIC_BANDS
    Details: ClassVar[type[base.Details]] = Details

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

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        found = self.reference_for(turn)
        if found is None:
            raise Unscorable("no reference answer: the trace has none and no golden set holds its question")
        reference, reference_source = found
        source = self.context_source
        contexts = await self.retrieve(turn.question, reference) if source == "e3" else list(turn.contexts)
        run.details.set(reference_source=reference_source, context_source=source,
                        context_ids=[doc.id for doc in contexts])
        if not turn.output.strip():
            return run.empty_answer(EMPTY_FEEDBACK)
        verdict = await judge_correctness(run, step="evaluate", question=turn.question, contexts=contexts,
                                          response=turn.output, reference=reference)
        run.details.result = verdict.score
        if verdict.score == 0:
            return run.abstained(f"The agent abstained (result 0, the response states it is not sure): "
                                 f"{verdict.feedback}")
        return run.scored(verdict.score / MAX_RESULT * self.scale, verdict.feedback)
