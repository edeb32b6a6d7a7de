"""Labelled items for ``vigil eval``, and the loaders that read them from a file, one format each.

An item is one turn people have judged: ``{"id", "group"?, "human", "turn", "comment"?}``. ``human`` is a number,
higher is better; ``group`` marks items that people compared with each other (two answers to one question), so
agreement is also measured pairwise inside each group; ``comment`` is what the people said of it (a review export
writes each reviewer's, ``name: text``), shown beside the item where the judge disagrees. ``turn`` is the turn JSON that ``vigil emit`` takes; ``trace_id`` defaults
to the item's id and ``agent`` to ``eval``.

Formats:

- ``jsonl`` (the default): one item per line.
- ``ragchecker``: the RAGChecker human-labelled correctness preferences (a JSON list; each record holds a question,
  a reference answer, two responses and one annotator's ``correctness_label`` in −2…+2, positive when model2's
  response is better). Each record becomes a group of two items: model1's response with ``human = −label`` and
  model2's with ``human = +label``, so a record whose annotator saw no difference (label 0) makes no pair. Records
  of the same instance carry the same responses under the same trace ids, so each response is scored once however
  many annotators labelled it.
- ``llmbar``: LLMBar Natural (a JSON list of ``{"input", "output_1", "output_2", "label"}``; ``label`` names the
  output that follows the instruction). Each record becomes a group of two items, the labelled output with
  ``human = 1`` and the other with ``human = 0``. There is no reference answer.

A line or record that cannot be read becomes a ``BadLine`` naming its line (or record) number and the field; the
others still load.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from vigil.schemas import Turn

__all__ = ["FORMATS", "BadLine", "Dataset", "EvalItem", "Format", "load_dataset"]

Format = Literal["jsonl", "ragchecker", "llmbar"]


class EvalItem(BaseModel):
    """One labelled turn."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    group: str | None = None
    human: float
    turn: Turn
    comment: str | None = None

    @field_validator("human")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


@dataclass(frozen=True)
class BadLine:
    line: int  # 1-based line number (jsonl) or record number (JSON-list formats)
    field: str
    message: str
    unit: str = "line"

    def __str__(self) -> str:
        return f"{self.unit} {self.line}: {self.field}: {self.message}"


@dataclass(frozen=True)
class Dataset:
    path: str
    format: Format
    sha256: str  # of the file's bytes: which data a kept run measured
    items: list[EvalItem]
    bad: list[BadLine]


def _where(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error["loc"]) or "(top level)"


def _bad(number: int, exc: ValidationError, unit: str, prefix: str = "") -> BadLine:
    first = exc.errors()[0]
    field = _where(first)
    return BadLine(number, f"{prefix}{field}" if prefix else field, first["msg"], unit)


def _jsonl(text: str) -> tuple[list[EvalItem], list[BadLine]]:
    items, bad = [], []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            bad.append(BadLine(number, "(line)", f"not JSON: {exc}"))
            continue
        if not isinstance(data, dict):
            bad.append(BadLine(number, "(line)", "expected a JSON object"))
            continue
        if isinstance(data.get("turn"), dict) and data.get("id") is not None:
            data["turn"] = {"trace_id": str(data["id"]), "agent": "eval"} | data["turn"]
        try:
            item = EvalItem.model_validate(data)
        except ValidationError as exc:
            bad.append(_bad(number, exc, "line"))
            continue
        if item.id in first_line:
            bad.append(BadLine(number, "id", f"{item.id!r} is already the id of line {first_line[item.id]}"))
            continue
        first_line[item.id] = number
        items.append(item)
    return items, bad


def _records(text: str) -> list[Any]:
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of records")  # noqa: TRY004 (what the file holds, not a caller's type)
    return data


def _pair(number: int, build: Callable[[], list[dict[str, Any]]]) -> tuple[list[EvalItem], BadLine | None]:
    try:
        return [EvalItem.model_validate(item) for item in build()], None
    except KeyError as exc:
        return [], BadLine(number, str(exc.args[0]), "missing", "record")
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            return [], _bad(number, exc, "record")
        return [], BadLine(number, "(record)", str(exc), "record")


def _ragchecker(text: str) -> tuple[list[EvalItem], list[BadLine]]:
    items, bad = [], []
    seen: dict[Any, int] = {}
    for number, record in enumerate(_records(text), start=1):
        def build(record: Any = record) -> list[dict[str, Any]]:
            instance = record["instance_id"]
            label = record["correctness_label"]
            if isinstance(label, bool) or not isinstance(label, int | float):
                raise TypeError("correctness_label must be a number")
            annotator = seen.get(instance, 0) + 1
            seen[instance] = annotator
            group = f"{instance}/a{annotator}"
            return [
                {"id": f"{group}/{side}", "group": group, "human": sign * label,
                 "turn": {"trace_id": f"ragchecker-{instance}-{side}", "agent": record[side].get("model_name")
                          or side, "input": [{"role": "user", "content": record["query"]}],
                          "output": record[side]["response"], "reference": record["gt_answer"],
                          "tags": [str(record.get("dataset", ""))]}}
                for side, sign in (("model1", -1), ("model2", 1))
            ]
        found, problem = _pair(number, build)
        items.extend(found)
        if problem:
            bad.append(problem)
    return items, bad


def _llmbar(text: str) -> tuple[list[EvalItem], list[BadLine]]:
    items, bad = [], []
    for number, record in enumerate(_records(text), start=1):
        def build(record: Any = record, number: int = number) -> list[dict[str, Any]]:
            label = record["label"]
            if label not in (1, 2):
                raise ValueError(f"label must be 1 or 2, not {label!r}")
            group = str(number)
            return [
                {"id": f"{group}/output_{side}", "group": group, "human": 1.0 if side == label else 0.0,
                 "turn": {"trace_id": f"llmbar-{number}-{side}", "agent": "llmbar",
                          "input": [{"role": "user", "content": record["input"]}],
                          "output": record[f"output_{side}"]}}
                for side in (1, 2)
            ]
        found, problem = _pair(number, build)
        items.extend(found)
        if problem:
            bad.append(problem)
    return items, bad


FORMATS: dict[str, Callable[[str], tuple[list[EvalItem], list[BadLine]]]] = {
    "jsonl": _jsonl, "ragchecker": _ragchecker, "llmbar": _llmbar,
}


def load_dataset(path: str | Path, format: Format = "jsonl") -> Dataset:
    """Read ``path`` in ``format``. Raises ValueError when the file as a whole cannot be read (not UTF-8, not the
    JSON list a format expects); a bad line or record is kept in ``Dataset.bad`` and the rest still loads."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 (byte {exc.start})") from None
    try:
        items, bad = FORMATS[format](text)
    except ValueError as exc:
        raise ValueError(f"{path}: not a {format} file: {exc}") from None
    return Dataset(str(path), format, hashlib.sha256(raw).hexdigest(), items, bad)
