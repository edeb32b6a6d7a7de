"""A turn's variables: the names a check's ``field`` and a rubric's ``{{ place }}`` read, and the one text each is.

A check and a rubric that name the same variable see the same text: ``value(name, turn)`` is the only rendering.
The rule, for every variable:

- a text the turn carries renders as it is: ``question`` (the user's own words, ``Turn.question``), ``answer``
  (the final answer, which may be empty: an empty answer is still the answer to judge), ``system``, ``reference``,
  ``agent``, ``metadata.KEY`` (one metadata value);
- a list renders as a JSON array with one key per line (``indent=0``, so no item can pose as two), each item with
  fixed keys, absent values as ``null``: ``messages`` (``role``, ``content``), ``contexts`` (``id``, ``text``),
  ``tool_calls`` (``name``, ``arguments``, ``result``, ``error``, in call order; the call's id is plumbing and is
  left out);
- what the agent *did* is always there: ``answer``, ``messages``, ``tool_calls`` (a run that called no tool made
  zero calls: ``[]``) and ``agent``; what the agent was *given* is missing when the turn does not carry it, or
  carries only blanks (no ``question``, ``system``, ``reference``, ``contexts`` or metadata key): ``Missing`` says
  which, and a check or rubric over it leaves the turn unscored with that reason.

``input`` and ``output`` are the older names of ``question`` and ``answer`` and mean exactly them (``canonical``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from vigil.schemas import Turn

__all__ = ["ALIASES", "KNOWN", "VARIABLES", "Missing", "Variable", "canonical", "value"]

METADATA_PREFIX = "metadata."
_METADATA = re.compile(r"^metadata\.([A-Za-z0-9_.\-]+)$")


class Missing(ValueError):
    """The turn does not carry a variable (the message names it)."""


def _json(items: list[dict[str, object]]) -> str:
    return json.dumps(items, ensure_ascii=False, indent=0)


def _given(text: str | None, name: str) -> str:
    if text is None or not text.strip():
        raise Missing(f"the turn has no {name}")
    return text


def _contexts(turn: Turn) -> str:
    if not turn.contexts:
        raise Missing("the turn has no contexts")
    return _json([{"id": d.id, "text": d.text} for d in turn.contexts])


@dataclass(frozen=True)
class Variable:
    name: str
    renders: str  # how it renders, for people (the README's table says the same)
    text: Callable[[Turn], str]


VARIABLES: dict[str, Variable] = {v.name: v for v in (
    Variable("question", "the user's own words (the last user message); missing when blank",
             lambda t: _given(t.question, "question")),
    Variable("answer", "the agent's final answer as it is, empty included", lambda t: t.output),
    Variable("system", "the system instructions; missing when the turn has none",
             lambda t: _given(t.system, "system")),
    Variable("contexts", 'JSON array of {"id", "text"}; missing when the turn has none', _contexts),
    Variable("messages", 'JSON array of {"role", "content"}: the conversation the run was given',
             lambda t: _json([{"role": m.role, "content": m.content} for m in t.input])),
    Variable("tool_calls", 'JSON array of {"name", "arguments", "result", "error"} in call order; [] for none',
             lambda t: _json([{"name": c.name, "arguments": c.arguments, "result": c.result, "error": c.error}
                              for c in t.tool_calls])),
    Variable("reference", "the reference answer; missing when the turn has none",
             lambda t: _given(t.reference, "reference")),
    Variable("agent", "the agent's name", lambda t: t.agent),
)}
ALIASES = {"input": "question", "output": "answer"}
KNOWN = ", ".join((*VARIABLES, f"{METADATA_PREFIX}KEY"))  # for error messages


def canonical(name: str) -> str:
    """The variable ``name`` means (an alias resolved); a ValueError names an unknown one and lists the known."""
    name = ALIASES.get(name, name)
    if name in VARIABLES or _METADATA.match(name):
        return name
    raise ValueError(f"unknown variable {name!r} (known: {KNOWN})")


def value(name: str, turn: Turn) -> str:
    """The turn's text for variable ``name``; ``Missing`` when the turn does not carry it."""
    name = canonical(name)
    if (meta := _METADATA.match(name)) is not None:
        return _given(turn.metadata.get(meta.group(1)), name)
    return VARIABLES[name].text(turn)
