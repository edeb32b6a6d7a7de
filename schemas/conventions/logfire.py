"""Pydantic Logfire's OpenAI Agents SDK instrumentation (``logfire.instrument_openai_agents()``): Logfire stands in
for the SDK's trace provider and writes each of the SDK's traces and spans as a span of its own, **its attributes the
SDK's own record of it** (a span's ``span_data.export()``, a trace's ``trace()`` arguments), Logfire's message
template (``logfire.msg_template``) beside them. What a span is follows from which of the SDK's records it holds,
never from the template's wording. Its model calls on the Responses API carry GenAI events (``events``: read by
``schemas.conventions.pydantic_ai``, Logfire's first format) and the GenAI usage attributes; this module reads the rest.

| the SDK's record | what its attributes mean | read as |
| --- | --- | --- |
| a trace (``trace(workflow_name, group_id=…, metadata=…)``, or the one ``Runner.run`` opens itself): ``agent_trace_id`` (the SDK's trace id) | ``group_id``: the SDK's id linking the traces of one conversation (``null`` when not given); ``name``: the workflow's name | an agent span (a workflow of agent runs, the GenAI conventions' ``invoke_workflow``) whose session is its ``group_id`` |
| an agent's run (``AgentSpanData``: ``name``, ``handoffs``, ``tools``, ``output_type``) | ``name``: the agent's name | an agent span naming its agent |
| a function tool's call (``FunctionSpanData``: ``name``, ``input``, ``output``, ``mcp_data``) | ``name``: the tool; ``input``: the arguments the model gave (JSON text); ``output``: what the tool returned | a tool call |
| a model call on chat completions (``GenerationSpanData``: ``input``, ``output``, ``model_config``, ``usage``) | ``input``: the chat messages sent; ``output``: the messages the model answered | an LLM call's messages |
| any span the SDK marked failed (``SpanError``) | ``error``: ``{"message", "data"}``, JSON text (the span's status says only that it failed) | the span's error: its message and its data |
| a model call (``ResponseSpanData``, ``GenerationSpanData``) | ``usage``: the SDK's count of the call's tokens (``input_tokens``, ``output_tokens``), kept when the call's content is not (Logfire writes the GenAI usage attributes only from the response it was given) | the call's usage |

**Content**: the SDK leaves a run's messages, tool arguments and results out of its records when
``RunConfig(trace_include_sensitive_data=False)`` or ``OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false`` (``SETTING``):
Logfire's spans then carry none, whatever Logfire's own settings, and the usage only as the SDK's record.

Logfire writes a value that is an object, a list or ``None`` as JSON text: ``null`` states nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._parse import Io, json_messages, json_value, text, tool_call

__all__ = ["IO_KEYS", "KEEP_KEYS", "KIND_KEYS", "SCOPE", "SETTING", "TEMPLATE_KEY", "TOOL_KEYS", "WHO_KEYS", "error", "identity",
           "io", "kind", "tool", "usage"]

SETTING = ("RunConfig(trace_include_sensitive_data=True), or OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=true (the "
           "OpenAI Agents SDK's default): without it the SDK's records, which Logfire writes, hold no content")
SCOPE = "logfire.openai_agents"  # the instrumentation scope of the spans it writes

TEMPLATE_KEY = "logfire.msg_template"  # on every span Logfire writes
_TRACE_ID = "agent_trace_id"  # the SDK's trace id: the span is one of the SDK's traces
_AGENT_KEYS = ("handoffs", "output_type")  # beside ``name``: the SDK's record of an agent's run
_FUNCTION_KEY = "mcp_data"  # beside ``name``, ``input`` and ``output``: the SDK's record of a function tool's call
_GENERATION_KEY = "model_config"  # beside ``input`` and ``output``: the SDK's record of a chat completion
KIND_KEYS = (_TRACE_ID, *_AGENT_KEYS, _FUNCTION_KEY, _GENERATION_KEY)  # the keys ``kind`` decides on
WHO_KEYS = (_TRACE_ID, *_AGENT_KEYS)  # the keys ``identity`` reads
KEEP_KEYS = (_TRACE_ID,)  # a trace's span carries nothing GenAI: the intake keeps it for its group_id
IO_KEYS = (_GENERATION_KEY,)  # ``io`` reads nothing of a span without it (``conventions.gates``)


def _stated(value: Any) -> Any:
    """A value as Logfire wrote it, ``None`` for JSON ``null``."""
    return None if value in (None, "", "null") else value


def _is_agent(attrs: Mapping[str, Any]) -> bool:
    return "name" in attrs and all(key in attrs for key in _AGENT_KEYS)


def _is_function(attrs: Mapping[str, Any]) -> bool:
    return _FUNCTION_KEY in attrs and "name" in attrs and TEMPLATE_KEY in attrs


def kind(attrs: Mapping[str, Any]) -> str | None:
    if TEMPLATE_KEY not in attrs:
        return None
    if _TRACE_ID in attrs or _is_agent(attrs):
        return "agent"
    if _is_function(attrs):
        return "tool"
    if _GENERATION_KEY in attrs and ("input" in attrs or "output" in attrs):
        return "llm"
    return None


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if TEMPLATE_KEY not in attrs:
        return {}
    if _TRACE_ID in attrs:
        return {"session_id": _stated(attrs.get("group_id"))}
    if _is_agent(attrs):
        return {"agent": _stated(attrs.get("name"))}
    return {}


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    if _GENERATION_KEY not in attrs or TEMPLATE_KEY not in attrs:
        return [], [], ""
    inputs = json_messages(_stated(attrs.get("input")), "user")
    outputs = json_messages(_stated(attrs.get("output")), "assistant")
    system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


TOOL_KEYS = (_FUNCTION_KEY,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if not _is_function(attrs):
        return None
    call = tool_call(attrs["name"], _stated(attrs.get("input")))
    output = _stated(attrs.get("output"))
    if output is not None:
        call["result"] = text(output)
    return call


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(input tokens, output tokens) of the SDK's ``usage`` record on a span Logfire wrote (``None`` when silent)."""
    if TEMPLATE_KEY not in attrs or "usage" not in attrs:
        return None, None
    said = json_value(attrs["usage"])
    if not isinstance(said, dict):
        return None, None
    return said.get("input_tokens"), said.get("output_tokens")


def error(attrs: Mapping[str, Any]) -> str | None:
    """The SDK's ``SpanError`` of a span Logfire wrote: its message, and its data when it says more."""
    if TEMPLATE_KEY not in attrs:
        return None
    said = json_value(_stated(attrs.get("error")))
    if not isinstance(said, dict) or not said.get("message"):
        return None
    data = said.get("data")
    return f"{said['message']}: {json.dumps(data)}" if data else text(said["message"])
