"""What the shipper makes of a captured turn: a JSON-ready dict shaped like ``schemas.Turn``, never validated here.

Values are converted to JSON data (datetimes to ISO 8601, bytes decoded with ``surrogateescape`` so that invalid
UTF-8 reaches the worker and is dead-lettered there with the field named); a value that is not data raises
``Unserializable`` naming where it sits. Two shorthands are expanded: ``input`` as a string (one user message) and
``contexts`` as a list of strings. OpenAI's tool-call shapes are taken as they are (``openai_tool_calls``,
``openai_messages``): chat ``tool_calls`` with ``function.arguments`` as JSON text, the Responses API's
``function_call`` / ``function_call_output`` items, in ``tool_calls=`` and in ``input=``. What agents return is taken as it comes: an ``output`` that is a response object
or a dict (an OpenAI chat completion or Responses object, a LangChain/Anthropic message, ``{"content": ...}``,
``{"output": ...}``, ``{"text": ...}``) becomes its answer text (``output_text``), and metadata values and tags that
are not strings become strings (JSON for numbers, booleans and structures). The result is not validated here: the
monitor checks it against ``schemas.Turn`` before shipping.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any
from uuid import UUID

from opentelemetry.trace import SpanContext
from pydantic import BaseModel
from vigil.schemas.trace import RELEASE_KEY, WIRE_VERSION

__all__ = ["Unserializable", "openai_messages", "openai_tool_calls", "output_text", "to_wire"]


class Unserializable(ValueError):
    """A captured value that is not JSON data; the message names its path and type."""


def to_wire(payload: Any, at: float, span: SpanContext | None, defaults: Mapping[str, str], *,
            release: str | None = None) -> dict[str, Any]:
    """The wire dict for one captured ``payload`` (a mapping, a pydantic model or a zero-argument builder);
    ``release`` goes in ``metadata[RELEASE_KEY]`` unless the turn says its own."""
    if callable(payload) and not isinstance(payload, (Mapping, BaseModel)):
        payload = payload()
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json", exclude_none=True)
    if not isinstance(payload, Mapping):
        raise Unserializable(f"turn: {type(payload).__name__} is not a mapping")
    if "output" in payload and not isinstance(payload["output"], str):
        payload = {**payload, "output": output_text(payload["output"])}
    try:
        turn: dict[str, Any] = _data(payload, "")
    except RecursionError:
        raise Unserializable("turn: nested too deeply or refers to itself") from None
    if isinstance(turn.get("metadata"), dict):
        turn["metadata"] = {key: _text(value) for key, value in turn["metadata"].items()}
    if isinstance(turn.get("tags"), list):
        turn["tags"] = [_text(tag) for tag in turn["tags"]]
    for key, value in defaults.items():
        turn.setdefault(key, value)
    if release is not None:
        metadata = turn.get("metadata")
        if metadata is None or isinstance(metadata, dict):
            turn["metadata"] = {RELEASE_KEY: release, **(metadata or {})}
    turn.setdefault("schema_version", WIRE_VERSION)  # a worker on an older contract ignores fields it does not know
    if "trace_id" not in turn:
        if span is not None and span.is_valid:
            turn["trace_id"] = format(span.trace_id, "032x")
            turn.setdefault("span_id", format(span.span_id, "016x"))
        else:
            turn["trace_id"] = format(random.getrandbits(128), "032x")
    turn.setdefault("started_at", datetime.fromtimestamp(at, UTC).isoformat())
    if isinstance(turn.get("input"), str):
        turn["input"] = [{"role": "user", "content": turn["input"]}]
    elif isinstance(turn.get("input"), list):
        turn["input"] = openai_messages(turn["input"])
    if isinstance(turn.get("tool_calls"), list):
        turn["tool_calls"] = openai_tool_calls(turn["tool_calls"])
    contexts = turn.get("contexts")
    if isinstance(contexts, list):
        turn["contexts"] = [{"text": doc} if isinstance(doc, str) else doc for doc in contexts]
    return turn


def openai_tool_calls(calls: list[Any]) -> list[Any]:
    """Tool calls as the turn contract has them, taken from OpenAI's shapes as they are: a chat completion's
    ``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}``), the Responses API's
    ``function_call`` items (``call_id``, ``name``, ``arguments``) with the ``function_call_output`` items that answer
    them (``call_id``, ``output``: the call's result); arguments given as JSON text are read. Anything else is left
    for validation to name."""
    out: list[Any] = []
    results = {item.get("call_id"): item.get("output") for item in calls
               if isinstance(item, dict) and item.get("type") == "function_call_output"}
    for item in calls:
        if not isinstance(item, dict) or item.get("type") == "function_call_output":
            if not isinstance(item, dict):
                out.append(item)
            continue
        function = item.get("function") if isinstance(item.get("function"), dict) else None
        if function is not None or item.get("type") == "function_call":
            source = function or item
            call = {"name": source.get("name"), "arguments": _arguments(source.get("arguments"))}
            call_id = item.get("call_id") or item.get("id")
            if call_id:
                call["id"] = call_id
            for key in ("result", "error"):
                if item.get(key) is not None:
                    call[key] = item[key]
            if "result" not in call and results.get(call_id) is not None:
                call["result"] = _text(results[call_id]) if not isinstance(results[call_id], str) else results[call_id]
            out.append(call)
        else:
            out.append({**item, "arguments": _arguments(item["arguments"])} if "arguments" in item else item)
    return out


def openai_messages(messages: list[Any]) -> list[Any]:
    """Input messages as the turn contract has them, from OpenAI's shapes: an assistant message's chat
    ``tool_calls``, content given as a list of parts (``text`` / ``input_text`` / ``output_text``), and the
    Responses API's input items (``{"type": "message", ...}``, ``function_call`` as the assistant asking for a tool,
    ``function_call_output`` as the tool's message)."""
    out: list[Any] = []
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
            continue
        kind = message.get("type")
        if kind == "function_call":
            out.append({"role": "assistant", "content": "", "tool_calls": openai_tool_calls([message])})
            continue
        if kind == "function_call_output":
            output = message.get("output")
            out.append({"role": "tool", "content": output if isinstance(output, str) else _text(output),
                        "tool_call_id": message.get("call_id")})
            continue
        message = {k: v for k, v in message.items() if not (k == "type" and v == "message")}
        if isinstance(message.get("content"), list):
            message["content"] = "\n".join(
                str(part.get("text", "")) for part in message["content"]
                if isinstance(part, dict) and part.get("type", "text") in ("text", "input_text", "output_text"))
        if message.get("content") is None and "role" in message:
            message["content"] = ""
        if isinstance(message.get("tool_calls"), list):
            message["tool_calls"] = openai_tool_calls(message["tool_calls"])
        out.append(message)
    return out


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except ValueError:
            return {"arguments": value}  # not JSON: kept whole, under a name
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return {} if value is None else value


_TEXT_KEYS = ("content", "output", "text", "answer", "output_text", "message")


def output_text(value: Any) -> str | None:
    """The answer text in what an agent returned, or ``Unserializable`` saying what was there instead.

    A string as is; ``None`` stays ``None`` (no output); bytes as on the wire; a chat completion (object or dict)
    by ``choices[0].message.content``; an object or dict by its first text-bearing attribute or key among
    ``content``, ``output``, ``text``, ``answer``, ``output_text``, ``message``; a list of content blocks (each with
    a ``text``) joined by newlines.
    """
    text = _find_text(value, 4)
    if text is None and value is not None:
        raise Unserializable(
            f"output: a {type(value).__name__} with no answer text in it (pass a str, a dict with 'content', "
            "'output' or 'text', or a chat completion)"
        )
    return text


def _find_text(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return value  # decoded on the wire like any bytes
    if depth == 0 or isinstance(value, (int, float)):
        return None
    if isinstance(value, (list, tuple)):
        blocks = [_find_text(block, depth - 1) for block in value if not isinstance(block, str)]
        if not value or len(blocks) < len(value) or any(not isinstance(block, str) for block in blocks):
            return None
        return "\n".join(blocks)
    get = value.get if isinstance(value, Mapping) else lambda key: getattr(value, key, None)
    try:
        choices = get("choices")
        if isinstance(choices, (list, tuple)) and choices:
            return _find_text(choices[0], depth - 1)
        for key in _TEXT_KEYS:
            found = _find_text(get(key), depth - 1)
            if found is not None:
                return found
    except Exception:  # noqa: BLE001 - a property of a foreign object may raise anything
        return None
    return None


def _text(value: Any) -> str:
    """A metadata value or tag as a string: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


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
