"""What the shipper makes of a captured turn: a JSON-ready dict shaped like ``schemas.Turn``, never validated here.

Values are converted to JSON data (datetimes to ISO 8601, bytes decoded with ``surrogateescape`` so that invalid
UTF-8 reaches the worker and is dead-lettered there with the field named); a value that is not data raises
``Unserializable`` naming where it sits. Two shorthands are expanded: ``input`` as a string (one user message) and
``contexts`` as a list of strings.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any
from uuid import UUID

from opentelemetry.trace import SpanContext
from pydantic import BaseModel

__all__ = ["Unserializable", "to_wire"]


class Unserializable(ValueError):
    """A captured value that is not JSON data; the message names its path and type."""


def to_wire(payload: Any, at: float, span: SpanContext | None, defaults: Mapping[str, str]) -> dict[str, Any]:
    """The wire dict for one captured ``payload`` (a mapping, a pydantic model or a zero-argument builder)."""
    if callable(payload) and not isinstance(payload, (Mapping, BaseModel)):
        payload = payload()
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json", exclude_none=True)
    if not isinstance(payload, Mapping):
        raise Unserializable(f"turn: {type(payload).__name__} is not a mapping")
    try:
        turn: dict[str, Any] = _data(payload, "")
    except RecursionError:
        raise Unserializable("turn: nested too deeply or refers to itself") from None
    for key, value in defaults.items():
        turn.setdefault(key, value)
    if "trace_id" not in turn:
        if span is not None and span.is_valid:
            turn["trace_id"] = format(span.trace_id, "032x")
            turn.setdefault("span_id", format(span.span_id, "016x"))
        else:
            turn["trace_id"] = format(random.getrandbits(128), "032x")
    turn.setdefault("started_at", datetime.fromtimestamp(at, UTC).isoformat())
    if isinstance(turn.get("input"), str):
        turn["input"] = [{"role": "user", "content": turn["input"]}]
    contexts = turn.get("contexts")
    if isinstance(contexts, list):
        turn["contexts"] = [{"text": doc} if isinstance(doc, str) else doc for doc in contexts]
    return turn


def _data(value: Any, path: str) -> Any:
    convert = _CONVERTERS.get(type(value))
    if convert is not None:
        return convert(value, path)
    for kind, convert in _CONVERTERS.items():
        if isinstance(value, kind):
            return convert(value, path)
    raise Unserializable(f"{path or 'turn'}: {type(value).__name__} is not JSON data")


def _mapping(value: Mapping[Any, Any], path: str) -> dict[str, Any]:
    out = {}
    for key, item in value.items():
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise Unserializable(f"{path or 'turn'}: key of type {type(key).__name__}")
        name = key if isinstance(key, str) else str(key)
        out[name] = _data(item, f"{path}.{name}" if path else name)
    return out


def _sequence(value: list[Any] | tuple[Any, ...], path: str) -> list[Any]:
    return [_data(item, f"{path}[{i}]") for i, item in enumerate(value)]


def _same(value: Any, path: str) -> Any:
    return value


_CONVERTERS: dict[type, Callable[[Any, str], Any]] = {
    str: _same,
    int: _same,
    float: _same,
    bool: _same,
    type(None): _same,
    dict: _mapping,
    list: _sequence,
    tuple: _sequence,
    bytes: lambda v, _: v.decode("utf-8", "surrogateescape"),
    bytearray: lambda v, _: bytes(v).decode("utf-8", "surrogateescape"),
    memoryview: lambda v, _: v.tobytes().decode("utf-8", "surrogateescape"),
    datetime: lambda v, _: v.isoformat(),
    date: lambda v, _: v.isoformat(),
    UUID: lambda v, _: str(v),
    Enum: lambda v, path: _data(v.value, path),
    BaseModel: lambda v, path: _data(v.model_dump(mode="json", exclude_none=True), path),
    Mapping: _mapping,
}
