"""A rubric's prompt template: ``{{ variable }}`` places, filled once from the turn. Pure functions.

Substitution is one pass of a regular expression over the template the user wrote: each place is replaced by the
turn's value for it, fenced (``worker.judge.fence``), and the result is never scanned again. So a turn whose text
holds ``{{ metadata.x }}``, ``{{ 7*7 }}`` or ``{% for %}`` reaches the judge literally; nothing is evaluated, no
template engine runs. Whitespace inside the braces is optional.

Variables are the turn's (``worker.scorers.variables``: the same names and text a check reads). A turn that lacks
one the template uses (no contexts for ``{{ contexts }}``) is ``Missing``: the scorer leaves it unscored with that
reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from vigil.schemas import Turn
from vigil.worker.judge.fence import fence, nonce_for
from vigil.worker.scorers import variables
from vigil.worker.scorers.prompts.common import data_header
from vigil.worker.scorers.variables import Missing

__all__ = ["Missing", "Template", "parse", "render", "values"]

_PLACE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


@dataclass(frozen=True)
class Template:
    text: str
    variables: tuple[str, ...]  # in order of first use


def parse(text: str) -> Template:
    """The template's variables (their canonical names); a ValueError names an unknown one, or says there is none."""
    found: list[str] = []
    for match in _PLACE.finditer(text):
        try:
            name = variables.canonical(match.group(1))
        except ValueError:
            raise ValueError(f"unknown template variable {{{{{match.group(1)}}}}} (known: {variables.KNOWN})") from None
        if name not in found:
            found.append(name)
    if not found:
        raise ValueError("the prompt uses no turn variable: put {{answer}} (or another) where the turn goes")
    return Template(text, tuple(found))


def values(template: Template, turn: Turn) -> dict[str, str]:
    """Every variable the template uses, from the turn; ``Missing`` names the first the turn lacks, and the place."""
    filled = {}
    for name in template.variables:
        try:
            filled[name] = variables.value(name, turn)
        except Missing as exc:
            raise Missing(f"{exc} for {{{{{name}}}}}") from None
    return filled


def render(template: Template, filled: Mapping[str, str]) -> str:
    """The user message: the fence rules with this prompt's nonce, then the template with each place replaced, in
    one pass, by its value fenced. Nothing substituted is read again."""
    nonce = nonce_for(template.text, *(f"{k}\x00{v}" for k, v in filled.items()))
    fenced = {name: fence(text, nonce=nonce, label=name) for name, text in filled.items()}
    body = _PLACE.sub(lambda m: fenced[variables.canonical(m.group(1))], template.text)
    return f"{data_header(nonce)}\n\n{body}"
