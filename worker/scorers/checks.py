"""Deterministic checks of one field of a turn: ``regex``, ``contains``, ``length``, ``json_schema``. No judge call.

Each scores 1.0 (label ``pass``) or 0.0 (``fail``) with a reason saying what it found, and costs no tokens. The
pattern, phrases and schema are compiled once, when the scorer is built (``vigil config check`` builds it, so a
pattern that does not compile or a schema that is not valid JSON Schema is a config error naming the scorer).
The field is one of the turn's variables (``worker.scorers.variables``: the names and text a rubric reads too; a
``json_schema`` check parses that text); a turn without it (no ``system`` for ``field: system``) is unscored with
that reason. A field that names no variable is a build error.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import PrivateAttr
from vigil.schemas import ScoreResult, Turn
from vigil.schemas.user_scorers import (
    ContainsSpec,
    JsonSchemaSpec,
    LengthSpec,
    RegexSpec,
)
from vigil.worker.scorers import variables
from vigil.worker.scorers.base import ScorerFailed, ScoreRun
from vigil.worker.scorers.isolation import Busy, Overrun, ThreadLane
from vigil.worker.scorers.user import FAIL, PASS, UserScorer, field_text

__all__ = ["ContainsCheck", "JsonSchemaCheck", "LengthCheck", "RegexCheck"]


def _verdict(run: ScoreRun, ok: bool, reason: str, **details: Any) -> ScoreResult:
    run.note("check", {"passed": ok, **details})
    return run.scored(1.0 if ok else 0.0, reason, label=PASS if ok else FAIL)


def _quote(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


class _FieldCheck(UserScorer):
    """A check of one of the turn's variables: the field must name one."""

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        variables.canonical(self.spec.field)


class RegexCheck(_FieldCheck):
    """``regex`` on RE2 (google-re2), whose matching takes time linear in the text, so no answer an agent gives can
    make a pattern backtrack for minutes. RE2 has no backreferences or lookaround: a pattern using them is a config
    error naming ``pattern``. The match runs off the event loop (a thread of the check's own) within ``timeout_s``;
    past it the check fails (``timeout``), naming itself."""

    spec: RegexSpec
    _pattern: Any = PrivateAttr()
    _lane: ThreadLane | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        import re2

        super().model_post_init(context)
        options = re2.Options()
        options.log_errors = False  # the config check says it, once, on one line
        try:
            self._pattern = re2.compile(self.spec.pattern, options)
        except re2.error as exc:
            said = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise ValueError(f"pattern {self.spec.pattern!r} does not compile on RE2 (linear-time matching: no "
                             f"backreferences or lookaround): {said}") from None

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        text, spec = field_text(turn, self.spec.field), self.spec
        if self._lane is None:
            self._lane = ThreadLane(2, f"vigil-regex-{self.name}")
        try:
            found = await self._lane.call(spec.timeout_s, self._pattern.search, text, label=f"trace {turn.trace_id}")
        except (Overrun, Busy) as exc:
            raise ScorerFailed("timeout", f"regex check {self.name!r} on the {spec.field} ({len(text)} characters) "
                                          f"{exc} (timeout_s)") from None
        where = f"the {spec.field}"
        if spec.match == "must":
            return _verdict(run, found is not None, f"{where} matches /{spec.pattern}/ at {_quote(found.group())}"
                            if found else f"{where} does not match /{spec.pattern}/")
        return _verdict(run, found is None, f"{where} does not match /{spec.pattern}/" if found is None
                        else f"{where} matches /{spec.pattern}/, which it must not, at {_quote(found.group())}")


class ContainsCheck(_FieldCheck):
    spec: ContainsSpec

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        spec = self.spec
        text = field_text(turn, spec.field)
        fold = (lambda s: s) if spec.case_sensitive else str.casefold
        haystack = fold(text)
        has = {p: fold(p) in haystack for p in (*spec.any, *spec.all, *spec.none)}
        problems = []
        if spec.any and not any(has[p] for p in spec.any):
            problems.append(f"none of {spec.any}")
        if missing := [p for p in spec.all if not has[p]]:
            problems.append(f"not {missing}")
        if present := [p for p in spec.none if has[p]]:
            problems.append(f"{present}, which it must not")
        reason = (f"the {spec.field} contains " + "; ".join(problems)) if problems else \
            f"the {spec.field} contains what it must and nothing it must not"
        return _verdict(run, not problems, reason, found=[p for p, yes in has.items() if yes])


class LengthCheck(_FieldCheck):
    spec: LengthSpec

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        spec = self.spec
        text = field_text(turn, spec.field)
        size = len(text.split()) if spec.unit == "words" else len(text)
        unit = "words" if spec.unit == "words" else "characters"
        short = spec.min is not None and size < spec.min
        long = spec.max is not None and size > spec.max
        bound = f"under the minimum of {spec.min}" if short else f"over the maximum of {spec.max}" if long else \
            "within " + " and ".join(f"{k} {v}" for k, v in (("min", spec.min), ("max", spec.max)) if v is not None)
        return _verdict(run, not (short or long), f"the {spec.field} has {size} {unit}, {bound}", length=size)


class JsonSchemaCheck(_FieldCheck):
    spec: JsonSchemaSpec
    _validator: Any = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        from jsonschema import SchemaError
        from jsonschema.validators import validator_for

        schema = self.spec.json_schema
        cls = validator_for(schema, default=_default_validator())
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            at = "/".join(str(p) for p in exc.absolute_path)
            raise ValueError(f"schema{'.' + at if at else ''} is not valid JSON Schema: {exc.message}") from None
        self._validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        from jsonschema.exceptions import best_match

        field = self.spec.field
        try:
            document = json.loads(field_text(turn, field))
        except ValueError as exc:
            return _verdict(run, False, f"the {field} is not JSON: {exc}", path=None)
        error = best_match(self._validator.iter_errors(document))
        if error is None:
            return _verdict(run, True, f"the {field} is JSON that matches the schema", path=None)
        path = _path(error)
        return _verdict(run, False, f"the {field} does not match the schema at {path or '(root)'}: "
                                    f"{_message(error)}", path=path)


def _default_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator


def _path(error: Any) -> str:
    """Where the document fails, as ``order_id`` or ``items.0.sku``; a missing required property is named too."""
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = next((p for p in error.validator_value if p not in error.instance), None)
        if missing is not None:
            parts.append(str(missing))
    return ".".join(parts)


def _message(error: Any) -> str:
    if error.validator == "required":
        return "a required property is missing"
    text = error.message
    return text if len(text) <= 200 else text[:200] + "…"
