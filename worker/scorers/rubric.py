"""``kind: llm_judge``: a user's rubric, one judge call through the same stack as the built-in scorers.

The template's variables are filled from the turn and fenced (``worker.scorers.template``); the judge answers
the typed reply its output spec asks for (``prompts.rubric``) through the client's structured-output ladder, under
the run's call context (limiter fairness, the reply cache keyed on this rubric's version, probe tagging). The score
is normalised to [0, 1]; the label (``yes`` / ``no``, the numeric answer, or the category) and the raw answer are
kept. Reason modes: ``llm`` asks the judge for a reason in the same reply; ``template`` and ``none`` ask for the
answer alone (the template states it). A turn lacking a variable the template uses is unscored, saying which.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, PrivateAttr
from vigil.schemas import ScoreResult, Turn
from vigil.schemas.user_scorers import LlmJudgeSpec
from vigil.worker.judge.base import JudgeRequest
from vigil.worker.scorers import base
from vigil.worker.scorers import template as templates
from vigil.worker.scorers.base import ScoreRun, Unscorable
from vigil.worker.scorers.prompts import rubric as prompts
from vigil.worker.scorers.user import UserScorer

__all__ = ["Rubric"]


class Details(base.Details):
    answer: Any = None  # what the judge answered: the boolean, the number on the rubric's scale, or the label


class Rubric(UserScorer):
    Details = Details
    spec: LlmJudgeSpec
    _template: templates.Template = PrivateAttr()
    _reply: type[BaseModel] = PrivateAttr()
    _instructions: str = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._template = templates.parse(self.spec.prompt)
        with_reason = self.reason_mode == "llm"
        self._reply = prompts.reply_model(self.spec.output, with_reason=with_reason)
        self._instructions = prompts.instructions(self.spec.output, with_reason=with_reason)

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        try:
            filled = templates.values(self._template, turn)
        except templates.Missing as exc:
            raise Unscorable(str(exc)) from None
        reply = await run.ask("judge", JudgeRequest(
            step=f"{self.name}.rubric", instructions=self._instructions,
            prompt=templates.render(self._template, filled), output_type=self._reply,
            inputs={"values": filled, "output": self.spec.output.model_dump(mode="json")},
        ))
        score, label, answer = prompts.normalise(self.spec.output, reply)
        run.details.set(answer=answer)
        if self.reason_mode == "llm":
            reason = reply.reason  # type: ignore[attr-defined]
        elif self.reason_mode == "template":
            reason = f"{self.name}: the judge answered {label} (score {score:.3g} of 1)"
        else:
            reason = None
        return run.scored(score, reason, label=label)
