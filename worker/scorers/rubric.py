"""``kind: llm_judge``: a user's rubric, one judge call through the same stack as the built-in scorers.

The template's variables are filled from the turn and fenced (``worker.scorers.template``); the judge answers
the typed reply its output spec asks for (``prompts.rubric``) through the client's structured-output ladder, under
the run's call context (limiter fairness, the reply cache keyed on this rubric's version, probe tagging). The score
is normalised to [0, 1]; the label (``yes`` / ``no``, the numeric answer, or the category) and the raw answer are
kept. Reason modes: ``llm`` asks the judge for a reason in the same reply; ``template`` and ``none`` ask for the
answer alone (the template states it). A turn lacking a variable the template uses is unscored, saying which.

A rubric says it does not apply to a turn in the same call, two ways: ``applies_when`` (the judge answers
``applies`` first; false) or a categorical label scored ``null`` (``n/a``). Either is *unscored*, labelled
``not_applicable``, with the judge's reason (or, without one, what it answered).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, PrivateAttr
from vigil.schemas import ScoreResult, Turn
from vigil.schemas.user_scorers import LlmJudgeSpec
from vigil.worker.judge.base import JudgeRequest
from vigil.worker.scorers import base
from vigil.worker.scorers import template as templates
from vigil.worker.scorers.base import DoesNotApply, ScoreRun, Unscorable
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
        clause = self.spec.applies_when
        self._reply = prompts.reply_model(self.spec.output, with_reason=with_reason, applies=clause is not None)
        self._instructions = prompts.instructions(self.spec.output, with_reason=with_reason, applies_when=clause)

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        try:
            filled = templates.values(self._template, turn)
        except templates.Missing as exc:
            raise Unscorable(str(exc)) from None
        reply = await run.ask("judge", JudgeRequest(
            step=f"{self.name}.rubric", instructions=self._instructions,
            prompt=templates.render(self._template, filled), output_type=self._reply,
            inputs={"values": filled, "output": self.spec.output.model_dump(mode="json"),
                    "applies_when": self.spec.applies_when},
        ))
        said = reply.reason if self.reason_mode == "llm" else None  # type: ignore[attr-defined]
        if self.spec.applies_when is not None and not reply.applies:  # type: ignore[attr-defined]
            run.details.set(answer="does not apply")
            raise DoesNotApply(said or f"{self.name}: does not apply (it applies when {self.spec.applies_when})")
        score, label, answer = prompts.normalise(self.spec.output, reply)
        run.details.set(answer=answer)
        if score is None:
            raise DoesNotApply(said or f"{self.name}: the judge answered {label}")
        if self.reason_mode == "template":
            said = f"{self.name}: the judge answered {label} (score {score:.3g} of 1)"
        return run.scored(score, said, label=label)
