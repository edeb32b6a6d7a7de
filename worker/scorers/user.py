"""Users' own scorers (the config's ``scorers:``): one base class under the built-in ``Scorer``, and the builder.

A user scorer's config is its definition (``spec``), its name is the definition's, and its version a hash of the
definition (``schemas.user_scorers.definition_version``), so a score row, the reply cache and the dashboards tell
an edited rubric from the old one. It scores through ``Scorer.score`` like a built-in: the same call context,
``ScoreRun`` and three outcomes. Its label is its own verdict (``pass`` / ``fail`` for a check), not a seed's band.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

from pydantic import PrivateAttr, ValidationError
from vigil.schemas import Turn
from vigil.schemas.user_scorers import definition_version
from vigil.worker.scorers import variables
from vigil.worker.scorers.base import ReasonedScorer, Unscorable
from vigil.worker.scorers.formulas import Bands

__all__ = ["FAIL", "KINDS", "PASS", "UserScorer", "build_user_scorer", "field_text"]

PASS, FAIL = "pass", "fail"

# kind -> "module:Class", imported on first use (building a regex check never imports jsonschema)
KINDS: dict[str, str] = {
    "llm_judge": "vigil.worker.scorers.rubric:Rubric",
    "regex": "vigil.worker.scorers.checks:RegexCheck",
    "contains": "vigil.worker.scorers.checks:ContainsCheck",
    "length": "vigil.worker.scorers.checks:LengthCheck",
    "json_schema": "vigil.worker.scorers.checks:JsonSchemaCheck",
    "python": "vigil.worker.scorers.function:FunctionScorer",
    "tool_policy": "vigil.worker.scorers.tool_policy:ToolPolicy",
}


class UserScorer(ReasonedScorer):
    """A scorer defined in the config. Subclasses declare ``spec`` with their definition's type and may add to
    the version (``_version_extra``) what the definition alone does not pin (an entry point's package version)."""

    bands: ClassVar[Bands] = ((1.0, PASS), (0.0, FAIL))
    spec: Any
    _version: str = PrivateAttr(default="")

    def model_post_init(self, context: Any, /) -> None:
        self._version = definition_version(self.spec, *self._version_extra())

    def _version_extra(self) -> tuple[str, ...]:
        return ()

    @property  # type: ignore[override]
    def name(self) -> str:
        return self.spec.name

    @property  # type: ignore[override]
    def version(self) -> str:
        return self._version


def field_text(turn: Turn, field: str) -> str:
    """The text a check looks at: the turn's variable ``field`` (``worker.scorers.variables``, the same text a
    rubric's ``{{ field }}`` gets); ``Unscorable`` when the turn does not carry it."""
    try:
        return variables.value(field, turn)
    except variables.Missing as exc:
        raise Unscorable(f"{exc} to check") from None


def build_user_scorer(spec: Any, reason_mode: str = "llm") -> UserScorer:
    """The scorer a definition describes; a ValueError says what is wrong with it (a pattern that does not compile,
    an invalid JSON schema, an unknown template variable, a function that cannot be imported)."""
    module, _, attr = KINDS[spec.kind].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    try:
        return cls(spec=spec, reason_mode=reason_mode)
    except ValidationError as exc:  # what the build raised, said without pydantic's wrapping
        raise ValueError("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
