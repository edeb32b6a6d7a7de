"""The existing-OpenTelemetry-spans path: a ``SpanProcessor`` that turns finished GenAI spans into turns.

A span counts as a turn when it carries both an input and an output under the GenAI conventions: the current
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON, messages made of typed parts), the older
``gen_ai.prompt`` / ``gen_ai.completion`` (text or JSON messages), or the indexed
``gen_ai.prompt.<i>.content`` / ``gen_ai.completion.<i>.content`` some instrumentations write. ``on_end`` runs on
the thread that ended the span, so it only checks a few keys and queues the span; the conversion (JSON parsing)
happens on the monitor's shipper thread. The turn keeps the span's own trace_id and span_id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from producers.monitor import Monitor

__all__ = ["GenAISpanProcessor", "turn_from_span"]

_INPUT_KEYS = ("gen_ai.input.messages", "gen_ai.prompt", "gen_ai.prompt.0.content")
_OUTPUT_KEYS = ("gen_ai.output.messages", "gen_ai.completion", "gen_ai.completion.0.content")
_ROLES = {"developer": "system", "human": "user", "ai": "assistant", "model": "assistant"}


class GenAISpanProcessor(SpanProcessor):
    """Add to a ``TracerProvider``: every finished GenAI span with an input and an output becomes one turn."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes
        if not attributes or not span.context or not span.context.is_valid:
            return
        if any(key in attributes for key in _INPUT_KEYS) and any(key in attributes for key in _OUTPUT_KEYS):
            self.monitor.capture_deferred(partial(turn_from_span, span))

    def shutdown(self) -> None:
        """The monitor belongs to the application, which shuts it down (it also does so at exit)."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.monitor.flush(timeout_millis / 1000)


def turn_from_span(span: ReadableSpan) -> dict[str, Any]:
    """The turn dict (not validated) for one finished GenAI span."""
    attrs: Mapping[str, Any] = span.attributes or {}
    context = span.get_span_context()
    input_messages = _messages(attrs, "gen_ai.input.messages", "gen_ai.prompt", "user")
    output_messages = _messages(attrs, "gen_ai.output.messages", "gen_ai.completion", "assistant")
    turn: dict[str, Any] = {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "input": [{"role": m["role"], "content": m["content"]} for m in input_messages],
        "output": "\n".join(m["content"] for m in output_messages if m["role"] == "assistant" and m["content"]),
    }
    system = _system(attrs, input_messages)
    if system:
        turn["system"] = system
    tool_calls = [call for m in output_messages for call in m["tool_calls"]]
    if tool_calls:
        turn["tool_calls"] = tool_calls
    for key, value in (
        ("agent", attrs.get("gen_ai.agent.name")),
        ("session_id", attrs.get("gen_ai.conversation.id")),
        ("model", attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")),
        ("started_at", _iso(span.start_time)),
        ("ended_at", _iso(span.end_time)),
    ):
        if value:
            turn[key] = value
    usage = _usage(attrs)
    if usage:
        turn["usage"] = usage
    documents = _json(attrs.get("gen_ai.retrieval.documents"))
    if isinstance(documents, list):
        turn["contexts"] = [_document(doc) for doc in documents]
    metadata = {
        name: str(attrs[key])
        for name, key in (
            ("operation", "gen_ai.operation.name"),
            ("provider", "gen_ai.provider.name"),
            ("system", "gen_ai.system"),
            ("response_id", "gen_ai.response.id"),
        )
        if key in attrs
    }
    metadata["span_name"] = span.name
    turn["metadata"] = metadata
    return turn


def _messages(attrs: Mapping[str, Any], current: str, legacy: str, role: str) -> list[dict[str, Any]]:
    """Messages as {role, content, tool_calls} from whichever convention the span used."""
    raw = attrs.get(current, attrs.get(legacy))
    if raw is None:
        return _indexed(attrs, legacy, role)
    parsed = _json(raw)
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return [{"role": role, "content": str(raw), "tool_calls": []}]
    return [_message(m, role) for m in parsed]


def _indexed(attrs: Mapping[str, Any], prefix: str, role: str) -> list[dict[str, Any]]:
    out, i = [], 0
    while f"{prefix}.{i}.content" in attrs or f"{prefix}.{i}.role" in attrs:
        out.append({
            "role": _role(attrs.get(f"{prefix}.{i}.role"), role),
            "content": str(attrs.get(f"{prefix}.{i}.content", "")),
            "tool_calls": [],
        })
        i += 1
    return out


def _message(message: Any, role: str) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {"role": role, "content": str(message), "tool_calls": []}
    texts, tool_calls = [], []
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    for part in message.get("parts") or (content if isinstance(content, list) else []):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "tool_call":
            arguments = _json(part.get("arguments"))
            tool_calls.append({"name": str(part.get("name", "")), "arguments": arguments if isinstance(arguments, dict) else {}})
        elif kind == "tool_call_response":
            texts.append(_text(part.get("response")))
        elif "content" in part or "text" in part:
            texts.append(_text(part.get("content", part.get("text"))))
    return {"role": _role(message.get("role"), role), "content": "\n".join(texts), "tool_calls": tool_calls}


def _system(attrs: Mapping[str, Any], input_messages: list[dict[str, Any]]) -> str:
    instructions = _json(attrs.get("gen_ai.system_instructions"))
    if isinstance(instructions, list):
        return "\n".join(_text(p.get("content")) if isinstance(p, dict) else str(p) for p in instructions)
    if isinstance(instructions, str):
        return instructions
    return "\n".join(m["content"] for m in input_messages if m["role"] == "system")


def _usage(attrs: Mapping[str, Any]) -> dict[str, Any]:
    prompt = attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens"))
    completion = attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens"))
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {key: value for key, value in usage.items() if value is not None}


def _document(doc: Any) -> Any:
    if not isinstance(doc, dict):
        return {"text": str(doc)}
    out = {"text": _text(doc.get("content", doc.get("text")))}
    if doc.get("id") is not None:
        out["id"] = str(doc["id"])
    if isinstance(doc.get("score"), (int, float)):
        out["score"] = doc["score"]
    return out


def _role(value: Any, default: str) -> str:
    role = str(value) if value else default
    return _ROLES.get(role, role)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _iso(nanoseconds: int | None) -> str | None:
    return datetime.fromtimestamp(nanoseconds / 1e9, UTC).isoformat() if nanoseconds else None
