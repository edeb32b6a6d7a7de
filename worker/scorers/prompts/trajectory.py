"""The trajectory judge's prompt: one call over a compact rendering of the whole run, and its typed reply.

The run is rendered once, by ``render_run``, a pure function of the turn and a character budget:

- the question, the contexts, the steps and the answer are four fenced parts, in that order, under one nonce;
- each tool call is a step numbered from 1 in call order (``step 3``), one JSON object a line with the keys of
  ``vigil.worker.scorers.variables``' ``tool_calls`` (``name``, ``arguments``, ``result``, ``error``) after its
  ``step``, a result that is JSON nested as its value; each context is ``{"id", "text"}`` as there, so a rubric's ``{{ tool_calls }}`` and this judge read the
  same fields;
- the budget (``budget_chars``, 24,000 by default) is shared so that nothing is dropped whole: the question and the
  answer are kept up to a quarter of it each, and the rest is split evenly between the steps' and contexts' texts;
  a text over its share keeps its head and tail with ``[… N characters cut …]`` between, so a status at the end of
  a long result still shows. A field's cut is said in the text, never silently.

The reply names, for each claim of the answer, whether the steps and contexts support it, a step contradicts it,
or nothing supports it, and the step that decides; whether the tools fit the request; whether the task got done.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field
from vigil.schemas import Turn
from vigil.worker.judge.fence import fence
from vigil.worker.scorers.prompts.common import data_message, nonce_for

__all__ = ["BUDGET_CHARS", "SYSTEM", "Claim", "RenderedRun", "TrajectoryVerdict", "cut", "render_run", "step_items"]

BUDGET_CHARS = 24_000

SYSTEM = """You are an evaluator of one run of an AI agent that used tools. You get the user's question, the \
documents the agent was given (contexts), every tool call it made as a numbered step (name, arguments, result or \
error), and its final answer.

Judge the answer against the run, not against your own knowledge:
1. claims: list each claim of the answer (a fact it states, or an action it says was done or will be done). For \
each, verdict "supported" when a step's result or a context says it (or, for an action, a step performed it \
without error); "contradicted" when a step's result or error says otherwise (a different id, amount, date or status; \
an action whose step failed, or that a result ruled out); "unsupported" when nothing in the run says it (an action \
no step performed, a fact no step looked up). Give the step number that decides (null when none does). Greetings, \
offers and questions back to the user are no claims.
2. tools_fit: true when the tools called are the ones the request needs, with the arguments it gives (a required \
lookup done before acting on its result); false when a needed call is missing, or a call is wrong for the request.
3. task_done: true when the answer completes what the user asked, or says truthfully why it cannot.
4. step: the number of the step where the run first goes wrong (null when it does not, or when the fault is a \
missing step), and reason: one or two sentences naming that step, or the missing call."""


class Claim(BaseModel):
    claim: str = Field(description="The claim, in a few words.")
    verdict: Literal["supported", "contradicted", "unsupported"]
    step: int | None = Field(default=None, description="The step that decides, or null.")


class TrajectoryVerdict(BaseModel):
    claims: list[Claim]
    tools_fit: bool
    task_done: bool
    step: int | None = Field(default=None, description="Where the run first goes wrong, or null.")
    reason: str = Field(description="One or two sentences naming the step, or the missing call.")


def step_items(turn: Turn) -> list[dict[str, Any]]:
    """Each tool call as a numbered step, with the ``tool_calls`` variable's keys."""
    return [{"step": n, "name": c.name, "arguments": c.arguments, "result": c.result, "error": c.error}
            for n, c in enumerate(turn.tool_calls, 1)]


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail around a note of how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    return f"{text[:head]} [… {len(text) - head - tail} characters cut …] {text[len(text) - tail:]}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class RenderedRun(BaseModel):
    """The run as the judge sees it: the user message, and what it was rendered from (the offline judge's input)."""

    prompt: str
    question: str
    answer: str
    steps: list[dict[str, Any]]
    contexts: list[dict[str, Any]]


def render_run(turn: Turn, *, budget_chars: int = BUDGET_CHARS) -> RenderedRun:
    """The compact, fenced rendering of ``turn``'s run within ``budget_chars`` (the rules: the module docstring)."""
    question = cut(turn.question, budget_chars // 4)
    answer = cut(turn.output, budget_chars // 4)
    steps = step_items(turn)
    contexts = [{"id": d.id, "text": d.text} for d in turn.contexts]
    pieces = sum(1 + (s["result"] is not None) + (s["error"] is not None) for s in steps) + len(contexts)
    share = max((budget_chars - len(question) - len(answer)) // max(pieces, 1), 80)
    steps = [s | {"arguments": _cut_value(s["arguments"], share), "result": _cut_value(s["result"], share),
                  "error": _cut_value(s["error"], share)} for s in steps]
    contexts = [c | {"text": cut(c["text"], share)} for c in contexts]
    lines = {"steps": "\n".join(json.dumps(s, ensure_ascii=False) for s in steps) or "(no tool was called)",
             "contexts": "\n".join(json.dumps(c, ensure_ascii=False) for c in contexts) or "(none)"}
    nonce = nonce_for(question, lines["contexts"], lines["steps"], answer)
    prompt = data_message(nonce, fence(question, nonce=nonce, label="question"),
                          fence(lines["contexts"], nonce=nonce, label="contexts"),
                          fence(lines["steps"], nonce=nonce, label="steps, in call order"),
                          fence(answer, nonce=nonce, label="final answer"))
    return RenderedRun(prompt=prompt, question=question, answer=answer, steps=steps, contexts=contexts)


def _cut_value(value: Any, limit: int) -> Any:
    """A step's field within ``limit``: a result that is JSON as its value (so it reads as one object, not an
    escaped string), when it fits; else its text, cut."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    text = _text(value)
    return value if len(text) <= limit else cut(text, limit)
