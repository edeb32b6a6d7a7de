"""What every convention reads the same way: a message as ``{role, content, tool_calls, tool_call_id}``, JSON that may
or may not be JSON, ``prefix.N.rest`` attribute groups, roles by their many names."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["Io", "Msg", "indexed", "json_value", "message", "msg", "role", "text", "tool_call"]

Msg = dict[str, Any]  # {"role", "content", "tool_calls": [{"name", "arguments", "id"?}], "tool_call_id"?}
Io = tuple[list[Msg], list[Msg], str]  # (input messages, output messages, system instructions) of one span

_ROLES = {"developer": "system", "human": "user", "ai": "assistant", "model": "assistant", "function": "tool",
          "system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def msg(role_: str, content: str, tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: Any = None) -> Msg:
    out: Msg = {"role": role_, "content": content, "tool_calls": tool_calls or []}
    if tool_call_id not in (None, ""):
        out["tool_call_id"] = str(tool_call_id)
    return out


def tool_call(name: Any, arguments: Any, call_id: Any = None) -> dict[str, Any]:
    """A requested tool call: its name, its arguments as an object (JSON text is read), its id when it has one."""
    parsed = json_value(arguments)
    call: dict[str, Any] = {"name": str(name or ""), "arguments": parsed if isinstance(parsed, dict) else {}}
    if call_id not in (None, ""):
        call["id"] = str(call_id)
    return call


def message(raw: Any, default_role: str) -> Msg:
    """A GenAI or OpenAI-style message (``parts`` or ``content``, ``tool_calls``, ``tool_call_id``) as a ``Msg``."""
    if not isinstance(raw, dict):
        return msg(default_role, text(raw))
    texts, calls = [], []
    call_id = raw.get("tool_call_id")
    content = raw.get("content")
    if isinstance(content, str):
        texts.append(content)
    for part in raw.get("parts") or (content if isinstance(content, list) else []):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "tool_call":
            calls.append(tool_call(part.get("name"), part.get("arguments"), part.get("id")))
        elif kind == "tool_call_response":
            texts.append(text(part.get("response", part.get("result", ""))))
            call_id = call_id or part.get("id")
        elif "content" in part or "text" in part:
            texts.append(text(part.get("content", part.get("text"))))
    openai_calls = json_value(raw.get("tool_calls"))
    for call in openai_calls if isinstance(openai_calls, list) else []:
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            calls.append(tool_call(function.get("name"), function.get("arguments"), call.get("id")))
    return msg(role(raw.get("role"), default_role), "\n".join(texts), calls, call_id)


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` keys grouped by N (in N order), each group keyed by ``rest``."""
    groups: dict[int, dict[str, Any]] = {}
    head = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(head):
            continue
        index, _, rest = key[len(head):].partition(".")
        if index.isdigit() and rest:
            groups.setdefault(int(index), {})[rest] = value
    return [groups[i] for i in sorted(groups)]


def role(value: Any, default: str) -> str:
    return _ROLES.get(str(value).lower(), "user") if value else default


def text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def json_value(value: Any) -> Any:
    """``value`` parsed when it is JSON text (an object, an array or a string), else ``value`` itself."""
    if not isinstance(value, str) or value[:1] not in ("[", "{", '"'):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value
