"""Prompt Alignment (seed 004): how well the response meets the user's prompt and complies with the system
instructions, on intent, requirements, completeness and appropriateness.

``evaluation_mode``: ``user`` (0.4/0.3/0.2/0.1), ``system`` (0.35/0.35/0.15/0.15) or ``both`` (0.7 · user + 0.3 ·
system, the default). ``both`` makes two judge calls, ``analyze_user`` and ``analyze_system``: system compliance is
judged on its own against the trace's system instructions (``Turn.system``, else its system messages), not copied
from the user score as in the reference implementation. ``both`` on a trace without system instructions is scored
as ``user`` and the reason says so; ``system`` on such a trace is *unscored*.

The seed makes a missing user prompt or response an error: a trace without a user message is *failed* with error
type ``invalid_input`` and a reason saying what is missing (a ``Turn`` always has an output, so a missing response
is refused at ingest). An empty response scores 0 with a reason, without a judge call. The label is the band of
the score interpretation in the seed "リファレンス: Prompt Alignment Scorer".
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from vigil.schemas import ScoreResult, Turn
from vigil.worker.judge import baseline
from vigil.worker.judge.base import JudgeRequest
from vigil.worker.scorers import base
from vigil.worker.scorers.base import InvalidInput, ReasonedScorer, ScoreRun, Unscorable
from vigil.worker.scorers.formulas import Bands, prompt_alignment_score
from vigil.worker.scorers.prompts import prompt_alignment as prompts
from vigil.worker.scorers.prompts.common import Reason

__all__ = ["PromptAlignment", "system_instructions"]


def system_instructions(turn: Turn) -> str:
    """The instructions the agent ran under: ``Turn.system``, else its system messages joined."""
    if turn.system and turn.system.strip():
        return turn.system
    return "\n\n".join(m.content for m in turn.input if m.role == "system" and m.content.strip())


class Details(base.Details):
    mode: str | None = None
    user: dict[str, float] | None = None
    system: dict[str, float] | None = None
    note: str | None = None


class PromptAlignment(ReasonedScorer):
    name: ClassVar[str] = "prompt_alignment"
    version: ClassVar[str] = "2"
    bands: ClassVar[Bands] = ((0.9, "excellent alignment"), (0.8, "very good alignment"), (0.7, "good alignment"),
                              (0.6, "moderate alignment"), (0.4, "poor alignment"), (0.0, "very poor alignment"))
    Details: ClassVar[type[base.Details]] = Details

    evaluation_mode: Literal["user", "system", "both"] = "both"
    steps: Literal["separate", "fused"] = "separate"

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        prompt, response, system = turn.question, turn.output, system_instructions(turn)
        if not prompt.strip():
            raise InvalidInput("prompt alignment needs both the user's prompt and the agent's response; "
                               "the trace has no user message")
        if not response.strip():
            return run.empty_answer("The response is empty: it meets none of the prompt's intent or requirements.")
        if self.evaluation_mode == "system" and not system:
            raise Unscorable("system mode, but the trace has no system instructions to comply with")
        run.details.mode = self.evaluation_mode

        user = system_side = None
        if self.steps == "fused" and self.evaluation_mode == "both" and system:
            both = await run.ask("analyze", JudgeRequest(
                step=f"{self.name}.analyze", instructions=prompts.FUSED_SYSTEM,
                prompt=prompts.render_fused(system=system, prompt=prompt, response=response),
                output_type=prompts.Alignments, inputs={"system": system, "prompt": prompt, "response": response},
                offline=baseline.alignment_both_step,
            ))
            user, system_side = both.user, both.system
        if user is None and self.evaluation_mode in ("user", "both"):
            user = await run.ask("analyze_user", JudgeRequest(
                step=f"{self.name}.analyze_user", instructions=prompts.ANALYZE_USER_SYSTEM,
                prompt=prompts.render_analyze_user(prompt=prompt, response=response), output_type=prompts.Alignment,
                inputs={"prompt": prompt, "response": response}, offline=baseline.alignment_user_step,
            ))
        if system_side is None and system and self.evaluation_mode in ("system", "both"):
            system_side = await run.ask("analyze_system", JudgeRequest(
                step=f"{self.name}.analyze_system", instructions=prompts.ANALYZE_SYSTEM_SYSTEM,
                prompt=prompts.render_analyze_system(system=system, prompt=prompt, response=response),
                output_type=prompts.Alignment, inputs={"system": system, "prompt": prompt, "response": response},
                offline=baseline.alignment_system_step,
            ))
        analyses: dict[str, Any] = {side: analysis.model_dump() for side, analysis in
                                    (("user", user), ("system", system_side)) if analysis is not None}

        user_dims = user.dimensions() if user else None
        system_dims = system_side.dimensions() if system_side else None
        score = prompt_alignment_score(user_dims, system_dims, mode=self.evaluation_mode, scale=self.scale)
        run.details.set(user=user_dims, system=system_dims)
        no_system = self.evaluation_mode == "both" and system_side is None
        if no_system:
            run.details.note = prompts.NO_SYSTEM_NOTE

        summary = prompts.summarise(score=score, scale=self.scale, mode=self.evaluation_mode, user=user_dims,
                                    system=system_dims)
        template = f"Prompt alignment {summary}." + (f" {prompts.NO_SYSTEM_NOTE}" if no_system else "")
        reason = await run.reason(self.reason_mode, template=template, request=lambda: JudgeRequest(
            step=f"{self.name}.reason", instructions=prompts.REASON_SYSTEM,
            prompt=prompts.render_reason(analyses=analyses, score=score, scale=self.scale, summary=summary),
            output_type=Reason, inputs={"summary": summary, "score": score, "scale": self.scale},
        ))
        if no_system and reason is not None and prompts.NO_SYSTEM_NOTE not in reason:
            reason = f"{reason} {prompts.NO_SYSTEM_NOTE}"
        return run.scored(score, reason)
