"""A rubric's prompt template: ``{{ variable }}`` places, filled once from the turn. Pure functions.

Substitution is one pass of a regular expression over the template the user wrote: each place is replaced by the
turn's value for it, fenced (``worker.judge.fence``), and the result is never scanned again. So a turn whose text
holds ``{{ metadata.x }}``, ``{{ 7*7 }}`` or ``{% for %}`` reaches the judge literally; nothing is evaluated, no
template engine runs. Whitespace inside the braces is optional.

Variables: ``input`` (the user's last message), ``messages`` (the conversation), ``output``, ``system``,
``contexts``, ``reference``, ``tool_calls``, ``agent`` and ``metadata.KEY``. A turn that lacks one the template
uses (no contexts for ``{{ contexts }}``) is ``Missing``: the scorer leaves it unscored with that reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vigil.schemas import Turn
from vigil.worker.judge.fence import fence, nonce_for
from vigil.worker.scorers.prompts.common import data_header

__all__ = ["VARIABLES", "Missing", "Template", "parse", "render", "values"]

_PLACE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_METADATA = re.compile(r"^metadata\.([A-Za-z0-9_.\-]+)$")


class Missing(ValueError):
    """The turn lacks a value the template needs (the message says which)."""


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=0)  # one item per line: no item can pose as two


def _text(value: str | None, what: str) -> str:
    if value is None or not value.strip():
        raise Missing(f"the turn has no {what}")
    return value


# Each variable: (its value as text, the turn -> text), ``json`` saying whether it is JSON.
VARIABLES: dict[str, Callable[[Turn], str]] = {
    "input": lambda t: _text(t.question, "user message for {{input}}"),
    "messages": lambda t: _json([{"role": m.role, "content": m.content} for m in t.input]),
    "output": lambda t: t.output,  # an empty answer is still the answer to judge
    "system": lambda t: _text(t.system, "system instructions for {{system}}"),
    "contexts": lambda t: _json([{"id": d.id, "text": d.text} if d.id else {"text": d.text} for d in t.contexts])
    if t.contexts else _text(None, "contexts for {{contexts}}"),
    "reference": lambda t: _text(t.reference, "reference answer for {{reference}}"),
    "tool_calls": lambda t: _json([c.model_dump(exclude_none=True) for c in t.tool_calls])
    if t.tool_calls else _text(None, "tool calls for {{tool_calls}}"),
    "agent": lambda t: t.agent,
}


@dataclass(frozen=True)
class Template:
    text: str
    variables: tuple[str, ...]  # in order of first use


def parse(text: str) -> Template:
    """The template's variables; a ValueError names an unknown one, or says there is none."""
    found: list[str] = []
    for match in _PLACE.finditer(text):
        name = match.group(1)
        if name not in VARIABLES and not _METADATA.match(name):
            known = ", ".join((*VARIABLES, "metadata.KEY"))
            raise ValueError(f"unknown template variable {{{{{name}}}}} (known: {known})")
        if name not in found:
            found.append(name)
    if not found:
        raise ValueError("the prompt uses no turn variable: put {{output}} (or another) where the turn goes")
    return Template(text, tuple(found))


def value(name: str, turn: Turn) -> str:
    """The turn's value for one variable, as text; ``Missing`` when the turn has none."""
    if (meta := _METADATA.match(name)) is not None:
        key = meta.group(1)
        return _text(turn.metadata.get(key), f"metadata.{key} for {{{{metadata.{key}}}}}")
    try:
        return VARIABLES[name](turn)
    except ValueError as exc:
        raise Missing(str(exc)) from None


def values(template: Template, turn: Turn) -> dict[str, str]:
    """Every variable the template uses, from the turn; ``Missing`` names the first the turn lacks."""
    return {name: value(name, turn) for name in template.variables}


def render(template: Template, filled: Mapping[str, str]) -> str:
    """The user message: the fence rules with this prompt's nonce, then the template with each place replaced, in
    one pass, by its value fenced. Nothing substituted is read again."""
    nonce = nonce_for(template.text, *(f"{k}\x00{v}" for k, v in filled.items()))
    fenced = {name: fence(text, nonce=nonce, label=name) for name, text in filled.items()}
    body = _PLACE.sub(lambda m: fenced[m.group(1)], template.text)
    return f"{data_header(nonce)}\n\n{body}"
