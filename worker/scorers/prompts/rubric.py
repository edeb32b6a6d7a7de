"""A user's rubric (``kind: llm_judge``): the static system message and the typed reply its output spec asks for.

The system message says how to answer for the output type (the same for every call of a scorer: a cacheable
prefix); the user message is the rubric's own template with the turn's values fenced in (``worker.scorers.template``).
The reply model states the output exactly, so the JSON schema the judge gets does too: a boolean ``verdict``, a
``score`` with ``minimum`` / ``maximum``, or a ``label`` from the enum, after a ``reason`` when the judge writes one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, create_model
from vigil.schemas.user_scorers import BooleanOutput, CategoricalOutput, NumericOutput

__all__ = ["instructions", "normalise", "reply_model"]

Output = BooleanOutput | NumericOutput | CategoricalOutput

_TASK = """You are an evaluator applying a rubric written by the owner of an AI agent to one of the agent's turns. \
The rubric is in the user message, with the turn's material fenced inside it. Apply the rubric exactly as written, \
to the fenced material only."""

_ANSWER = {
    "boolean": "Answer with verdict true when the rubric holds for this turn, false when it does not.",
    "numeric": "Answer with a score from {min:g} (worst) to {max:g} (best), as the rubric defines the scale.",
    "categorical": "Answer with exactly one of these labels: {labels}.",
}
_REASON = " First give your reason in one or two sentences, then the answer."
_APPLIES = """The rubric applies only to turns where this holds: {clause}
Answer applies true when it holds for this turn; when it does not, answer applies false (the rest of your answer \
is then ignored)."""
_NOT_APPLICABLE = " Answer {labels} when the rubric does not apply to this turn."


def instructions(output: Output, *, with_reason: bool, applies_when: str | None = None) -> str:
    """The system message of a rubric with this output spec (and applicability clause, when it has one)."""
    labels = getattr(output, "labels", {})
    answer = _ANSWER[output.type].format(min=getattr(output, "min", 0), max=getattr(output, "max", 0),
                                         labels=", ".join(labels))
    if none := [label for label, score in labels.items() if score is None]:
        answer += _NOT_APPLICABLE.format(labels=" or ".join(none))
    applies = f"{_APPLIES.format(clause=applies_when)}\n\n" if applies_when else ""
    return f"{_TASK}\n\n{applies}{answer}{_REASON if with_reason else ''}"


_MODELS: dict[tuple[str, bool], type[BaseModel]] = {}


def reply_model(output: Output, *, with_reason: bool, applies: bool = False) -> type[BaseModel]:
    """The pydantic model of the judge's reply, one per output spec (the judge client caches its schema);
    ``applies``: the rubric has an applicability clause, answered first."""
    key = (output.model_dump_json(), with_reason, applies)
    if key not in _MODELS:
        _MODELS[key] = _reply_model(output, with_reason, applies)
    return _MODELS[key]


def _reply_model(output: Output, with_reason: bool, applies: bool) -> type[BaseModel]:
    fields: dict = {}
    if applies:
        fields["applies"] = (bool, ...)
    if with_reason:
        fields["reason"] = (str, Field(description="One or two sentences."))
    if isinstance(output, BooleanOutput):
        fields["verdict"] = (bool, ...)
    elif isinstance(output, NumericOutput):
        fields["score"] = (float, Field(ge=output.min, le=output.max))
    else:
        fields["label"] = (Literal[tuple(output.labels)], ...)  # type: ignore[misc]
    return create_model(f"Rubric{output.type.capitalize()}Reply", **fields)


def normalise(output: Output, reply: BaseModel) -> tuple[float | None, str, object]:
    """(score in [0, 1], label, the judge's raw answer): true 1 / false 0; (v - min) / (max - min); the label's
    score, None for a label that says the rubric does not apply."""
    if isinstance(output, BooleanOutput):
        verdict = bool(reply.verdict)  # type: ignore[attr-defined]
        return (1.0 if verdict else 0.0), ("yes" if verdict else "no"), verdict
    if isinstance(output, NumericOutput):
        value = float(reply.score)  # type: ignore[attr-defined]
        return (value - output.min) / (output.max - output.min), f"{value:g}", value
    label = str(reply.label)  # type: ignore[attr-defined]
    return output.labels[label], label, label
