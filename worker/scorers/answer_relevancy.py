"""Answer Relevancy (seeds 000, 001): how much of the output addresses the question.

Steps (``steps: separate``, the seeds'): ``preprocess`` (the judge splits the output into statements), ``analyze``
(a yes / unsure / no verdict per statement), ``reason``. ``steps: fused`` makes the first two one call, ``judge``
(statements with their verdicts), with the same verdict semantics. Score ``((yes + uncertainty_weight · unsure) /
statements) · scale``. An empty output scores 0 without a judge call; a trace without a user message, no
statements, or verdicts that do not match the statements one for one are *unscored*. The label is the band of the "Score Interpretation" in the seed "Answer
Relevancy Scorer".
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field
from vigil.schemas import ScoreResult, Turn
from vigil.worker.judge import baseline
from vigil.worker.judge.base import JudgeRequest
from vigil.worker.scorers import base
from vigil.worker.scorers.base import ReasonedScorer, ScoreRun, Unscorable
from vigil.worker.scorers.formulas import Bands, answer_relevancy_score
from vigil.worker.scorers.prompts import answer_relevancy as prompts
from vigil.worker.scorers.prompts.common import Reason

__all__ = ["AnswerRelevancy"]


class Details(base.Details):
    statements: int | None = None
    yes: int | None = None
    unsure: int | None = None
    no: int | None = None


class AnswerRelevancy(ReasonedScorer):
    name: ClassVar[str] = "answer_relevancy"
    version: ClassVar[str] = "2"
    bands: ClassVar[Bands] = ((1.0, "fully relevant"), (0.7, "mostly relevant"), (0.4, "partially relevant"),
                              (0.1, "minimally relevant"), (0.0, "not relevant"))
    Details: ClassVar[type[base.Details]] = Details

    uncertainty_weight: float = Field(default=0.3, ge=0.0, le=1.0)
    steps: Literal["separate", "fused"] = "separate"

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        question, output = turn.question, turn.output
        if not question.strip():
            raise Unscorable("the trace has no user message for the output to be relevant to")
        if not output.strip():
            return run.empty_answer("The output is empty, so it addresses nothing the question asks.")

        if self.steps == "fused":
            statements, results = await self._judge_fused(run, question, output)
        else:
            statements, results = await self._judge_separately(run, question, output)
        verdicts = [v.result for v in results]
        score = answer_relevancy_score(verdicts, uncertainty_weight=self.uncertainty_weight, scale=self.scale)
        counts = {v: verdicts.count(v) for v in ("yes", "unsure", "no")}
        run.details.set(statements=len(statements), **counts)

        summary = prompts.summarise(score=score, scale=self.scale, **counts)
        judged = [{"statement": s, "result": v.result, "reason": v.reason}
                  for s, v in zip(statements, results, strict=True)]
        template = f"Answer relevancy {summary}."
        reason = await run.reason(self.reason_mode, template=template, request=lambda: JudgeRequest(
            step=f"{self.name}.reason", instructions=prompts.REASON_SYSTEM,
            prompt=prompts.render_reason(question=question, verdicts=judged, score=score, scale=self.scale,
                                         uncertainty_weight=self.uncertainty_weight, summary=summary),
            output_type=Reason, inputs={"summary": summary, "score": score, "scale": self.scale},
        ))
        return run.scored(score, reason)

    async def _judge_separately(self, run: ScoreRun, question: str, output: str) -> tuple[list[str], list]:
        extracted = await run.ask("preprocess", JudgeRequest(
            step=f"{self.name}.preprocess", instructions=prompts.EXTRACT_SYSTEM,
            prompt=prompts.render_extract(output=output), output_type=prompts.Statements,
            inputs={"output": output}, offline=baseline.statements_step,
        ))
        statements = [s for s in extracted.statements if s.strip()]
        if not statements:
            raise Unscorable("the judge found no statements in the output")
        analysis = await run.ask("analyze", JudgeRequest(
            step=f"{self.name}.analyze", instructions=prompts.ANALYZE_SYSTEM,
            prompt=prompts.render_analyze(question=question, statements=statements), output_type=prompts.Verdicts,
            inputs={"question": question, "statements": statements}, offline=baseline.relevance_step,
        ))
        if len(analysis.results) != len(statements):
            raise Unscorable(f"the judge gave {len(analysis.results)} verdicts for {len(statements)} statements")
        return statements, analysis.results

    async def _judge_fused(self, run: ScoreRun, question: str, output: str) -> tuple[list[str], list]:
        judged = await run.ask("judge", JudgeRequest(
            step=f"{self.name}.judge", instructions=prompts.FUSED_SYSTEM,
            prompt=prompts.render_fused(question=question, output=output), output_type=prompts.JudgedStatements,
            inputs={"question": question, "output": output}, offline=baseline.judged_statements_step,
        ))
        kept = [j for j in judged.statements if j.statement.strip()]
        if not kept:
            raise Unscorable("the judge found no statements in the output")
        return [j.statement for j in kept], kept
