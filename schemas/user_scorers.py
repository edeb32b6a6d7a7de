"""Users' own scorers: the ``scorers:`` section of the config, one definition per scorer.

Each has a unique ``name`` and a ``kind``; a monitor names it in ``scorer:`` as it names a built-in scorer.

- ``llm_judge``: ``prompt`` (a template whose ``{{ places }}`` are the turn's variables: ``question``, ``answer``,
  ``system``, ``contexts``, ``messages``, ``tool_calls``, ``reference``, ``agent``, ``metadata.KEY``) and a typed
  ``output``: ``{type: boolean}``, ``{type: numeric, min, max}`` or ``{type: categorical, labels: {LABEL: SCORE}}``
  (a label scored ``null`` means "does not apply"), and optionally ``applies_when`` (the turns it applies to);
- ``regex`` (``pattern``, ``match: must | must_not``), ``contains`` (``any`` / ``all`` / ``none`` of some phrases),
  ``length`` (``min`` / ``max`` characters or words), ``json_schema`` (``schema``): checks of one ``field``, a
  variable as a rubric names it (the answer unless said; ``tool_calls`` is the calls as a JSON array), no judge call;
- ``python``: ``function: "package.module:callable"`` or ``entry_point: NAME`` (group ``vigil.scorers``), called
  with the turn and ``params`` as keyword arguments, under ``timeout_s``, ``concurrency`` calls at once, on threads
  or (``isolation: process``) in processes limited to ``memory_mb``;
- ``tool_policy``: ``rules`` over the turn's tool calls, in call order: ``{require: NAME}``, ``{forbid: GLOB}``,
  ``{order: [A, B]}``, ``{max_calls: N}`` (optionally ``tool: GLOB``), ``{no_repeat: true}``, ``{no_errors: true}``.

Only the shape is checked here; compiling patterns and schemas, parsing templates and importing functions is the
worker's (``vigil config check`` does it, naming the scorer). ``definition_version`` is a scorer's version: a hash
of what decides its scores, so editing a rubric starts a new series (score ids, reply cache, dashboards).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "TOOL_RULES", "BooleanOutput", "CategoricalOutput", "ContainsSpec", "JsonSchemaSpec", "LengthSpec",
    "LlmJudgeSpec", "NumericOutput", "PythonSpec", "RegexSpec", "ToolPolicySpec", "ToolRule", "UserScorerSpec",
    "definition_version",
]

_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""  # for people; not part of the version


# -- llm_judge ----------------------------------------------------------------------------------------------------

class BooleanOutput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["boolean"]


class NumericOutput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["numeric"]
    min: float
    max: float

    @model_validator(mode="after")
    def _range(self) -> NumericOutput:
        if not self.min < self.max:
            raise ValueError(f"min ({self.min:g}) must be below max ({self.max:g})")
        return self


class CategoricalOutput(BaseModel):
    """Labels and their scores on 0..1; a label whose score is ``null`` (``n/a: null``) says the rubric does not
    apply to the turn: the result is *unscored*, labelled ``not_applicable``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["categorical"]
    labels: dict[str, Annotated[float, Field(ge=0.0, le=1.0)] | None] = Field(min_length=2)

    @model_validator(mode="after")
    def _labels(self) -> CategoricalOutput:
        for label in self.labels:
            if not re.fullmatch(r"[\w .\-/]{1,64}", label):
                raise ValueError(f"label {label!r}: use up to 64 letters, digits, spaces, '.', '_', '-' or '/'")
        if sum(score is not None for score in self.labels.values()) < 2:
            raise ValueError("give at least two labels with a score (a label scored null means 'does not apply')")
        return self


Output = Annotated[BooleanOutput | NumericOutput | CategoricalOutput, Field(discriminator="type")]


class LlmJudgeSpec(_Spec):
    """A rubric the judge applies: the template's variables reach it fenced, its reply is the typed ``output``."""

    kind: Literal["llm_judge"]
    prompt: str = Field(min_length=1)
    output: Output
    # the rubric applies only to turns where this holds ("the question is about a specific order"): the judge
    # decides in the same call, and a turn it does not apply to is unscored, labelled not_applicable
    applies_when: str | None = Field(default=None, min_length=1, max_length=1000)


# -- deterministic checks -----------------------------------------------------------------------------------------

class _Check(_Spec):
    # one of the turn's variables (the worker checks the name); "output" is the answer's older name, kept as the
    # default so existing checks keep their versions
    field: str = Field(default="output", min_length=1)


class RegexSpec(_Check):
    kind: Literal["regex"]
    pattern: str = Field(min_length=1)  # RE2 syntax: no backreferences or lookaround, so a match takes linear time
    match: Literal["must", "must_not"] = "must"
    timeout_s: float = Field(default=1.0, gt=0, le=60)


class ContainsSpec(_Check):
    kind: Literal["contains"]
    any: list[str] = Field(default_factory=list)  # at least one of them
    all: list[str] = Field(default_factory=list)  # every one of them
    none: list[str] = Field(default_factory=list)  # not one of them
    case_sensitive: bool = False

    @model_validator(mode="after")
    def _phrases(self) -> ContainsSpec:
        if not (self.any or self.all or self.none):
            raise ValueError("give at least one of any, all, none (lists of phrases)")
        if any(not p for p in (*self.any, *self.all, *self.none)):
            raise ValueError("a phrase is empty")
        return self


class LengthSpec(_Check):
    kind: Literal["length"]
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)
    unit: Literal["chars", "words"] = "chars"

    @model_validator(mode="after")
    def _bounds(self) -> LengthSpec:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class JsonSchemaSpec(_Check):
    """The field must parse as JSON and validate against ``schema`` (any JSON Schema draft; 2020-12 by default)."""

    kind: Literal["json_schema"]
    json_schema: dict[str, Any] = Field(alias="schema")


# -- python -------------------------------------------------------------------------------------------------------

class PythonSpec(_Spec):
    kind: Literal["python"]
    function: str | None = None  # "package.module:callable"
    entry_point: str | None = None  # a name in the entry-point group ``vigil.scorers``
    params: dict[str, Any] = Field(default_factory=dict)  # passed as keyword arguments
    timeout_s: float = Field(default=5.0, gt=0, le=300)
    # thread: calls run on the worker's own threads (a call past its limit keeps its thread until it returns);
    # process: in a pool of worker processes, where a call past its limit, or over memory_mb, is killed
    isolation: Literal["thread", "process"] = "thread"
    concurrency: int = Field(default=4, ge=1, le=64)  # calls at once per worker process (threads or processes)
    memory_mb: int = Field(default=1024, ge=64, le=1_048_576)  # isolation: process: a process's address space

    @model_validator(mode="after")
    def _one_source(self) -> PythonSpec:
        if (self.function is None) == (self.entry_point is None):
            raise ValueError("give exactly one of function ('package.module:callable') and entry_point")
        if self.function is not None and not _FUNCTION.match(self.function):
            raise ValueError(f"function {self.function!r}: expected 'package.module:callable'")
        return self


# -- tool_policy --------------------------------------------------------------------------------------------------

TOOL_RULES = ("require", "forbid", "order", "max_calls", "no_repeat", "no_errors")


class ToolRule(BaseModel):
    """One rule, a mapping with one of ``TOOL_RULES`` (``max_calls`` may add ``tool: GLOB``). Names are globs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    require: str | None = Field(default=None, min_length=1)
    forbid: str | None = Field(default=None, min_length=1)
    order: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=2)
    max_calls: int | None = Field(default=None, ge=0)
    tool: str | None = Field(default=None, min_length=1)
    no_repeat: Literal[True] | None = None
    no_errors: Literal[True] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_rule(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"a rule is a mapping such as {{require: NAME}}, got {data!r}")  # noqa: TRY004 (pydantic reports ValueError)
        unknown = [k for k in data if k not in (*TOOL_RULES, "tool")]
        if unknown:
            raise ValueError(f"unknown rule {unknown[0]!r} (known: {', '.join(TOOL_RULES)})")
        given = [k for k in TOOL_RULES if k in data]
        if len(given) != 1:
            raise ValueError(f"one rule per item, got {', '.join(given) or 'none'}")
        if "tool" in data and given != ["max_calls"]:
            raise ValueError("tool: only narrows max_calls")
        return data

    @property
    def kind(self) -> str:
        return next(k for k in TOOL_RULES if getattr(self, k) is not None)

    def describe(self) -> str:
        """The rule as the config says it: ``forbid delete_*``, ``order lookup_order -> issue_refund``."""
        kind = self.kind
        if kind == "order":
            return "order " + " -> ".join(self.order or ())
        if kind == "max_calls":
            return f"max_calls {self.max_calls}" + (f" of {self.tool}" if self.tool else "")
        if kind in ("no_repeat", "no_errors"):
            return kind
        return f"{kind} {getattr(self, kind)}"


class ToolPolicySpec(_Spec):
    kind: Literal["tool_policy"]
    rules: list[ToolRule] = Field(min_length=1)


UserScorerSpec = Annotated[
    LlmJudgeSpec | RegexSpec | ContainsSpec | LengthSpec | JsonSchemaSpec | PythonSpec | ToolPolicySpec,
    Field(discriminator="kind"),
]
_UNVERSIONED = {"name", "description", "timeout_s", "isolation", "concurrency", "memory_mb"}  # what does not change a score


def definition_version(spec: BaseModel, *extra: str) -> str:
    """12 hex digits of a hash of the definition (prompt, output spec, pattern, schema, rules, function path and
    params; ``extra``: what the worker adds, e.g. an entry point's distribution version)."""
    definition = spec.model_dump(mode="json", by_alias=True, exclude=_UNVERSIONED, exclude_none=True)
    text = json.dumps([definition, *extra], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
