"""Haystack's own tracer (``tracing.enable_tracing(OpenTelemetryTracer(...))``, package opentelemetry-haystack): spans
named by Haystack's operation (``haystack.pipeline.run``, ``haystack.component.run``, ``haystack.agent.run``,
``haystack.agent.step``, ``haystack.agent.step.llm``, ``haystack.agent.step.tool``) whose attributes are all
``haystack.*`` tags. Haystack's tracing docs pair it with an instrumentation of the model client for the LLM calls
(their GenAI or OpenInference attributes, read by those modules), but the tracer alone says what each step sent the
model and what it answered: this module reads the agent's run, its model calls and its tool calls. With a model
client's instrumentation as well, a step's generator span is the wrapper around the client's call (one model call seen
by two layers, read from the inner one). Its other spans (pipeline, component, step) are plain spans.

| what | read from |
| --- | --- |
| an agent run | ``haystack.agent.max_steps`` (set when ``Agent.run`` opens ``haystack.agent.run``, with its tools and exit conditions) |
| a model call | the span ``haystack.agent.step.llm`` (the tracer names each span by its operation, and this one is the step's call of its chat generator); its ``haystack.agent.step.llm.input`` (``{"messages": [ChatMessage ...], "tools": ...}``) / ``.output`` (``{"replies": [ChatMessage ...]}``), the generator's inputs and outputs, are content tags: with content tracing off the call is there with no tag at all |
| messages | Haystack's ``ChatMessage.to_dict()``: ``role``, ``content`` a list of parts, ``{"text"}``, ``{"tool_call": {tool_name, arguments, id}}``, ``{"tool_call_result": {result, origin: <the tool_call>, error}}`` (a tool message answering ``origin.id``; **its ``error`` true says the call failed**: Haystack caught the tool's exception and sent the model its text, and the message is marked ``failed``); or the ``ChatMessage`` dataclass's own fields (``dataclasses.asdict``, as OpenLLMetry's Haystack instrumentation writes a pipeline's data and result, read by ``schemas.conventions.openllmetry``): ``_role``, ``_content``, the parts bare, a ``ToolCall`` ``{tool_name, arguments, id}``, a ``ToolCallResult`` ``{result, origin, error}`` |
| usage, model | a reply's ``meta.usage`` (``prompt_tokens`` / ``completion_tokens``), summed over the replies; its ``meta.model`` |
| a tool span | ``haystack.tool.name`` (set on every tool span an ``Agent`` opens, one per tool call: ``haystack.components.agents.tool_calling``) |
| its arguments | ``haystack.agent.step.tool.input``: the tool call's arguments, JSON |
| its result | ``haystack.agent.step.tool.output``: what the tool returned (a string as it is, anything else as JSON) |
| its error | ``haystack.tool.error`` ``true``: the tool raised (Haystack catches the exception, sends the model its text as the tool message and goes on), and ``haystack.agent.step.tool.output`` is then ``{"error": <the exception's text>}`` |
| id | none: the call is paired with the model's tool call by name and arguments |
| content off | the default: ``HAYSTACK_CONTENT_TRACING_ENABLED=true`` turns the input and output tags on (``SETTING``: a run without them is recorded with its content missing, naming it) |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import Io, Msg, json_value, message, result_text, text, tool_call

__all__ = ["CLAIM_KEYS", "ERROR_KEY", "KIND_KEYS", "LLM_SPAN", "SETTING", "TOOL_KEYS", "dataclass_messages", "error",
           "io", "kind", "model", "tool", "usage", "wrote"]

SETTING = "HAYSTACK_CONTENT_TRACING_ENABLED=true"
LLM_SPAN = "haystack.agent.step.llm"  # the operation, and so the span's name, of an agent step's model call

_TOOL = "haystack.tool.name"
_AGENT = "haystack.agent.max_steps"
_LLM_INPUT = "haystack.agent.step.llm.input"
_LLM_OUTPUT = "haystack.agent.step.llm.output"
KIND_KEYS = (_TOOL, _AGENT, _LLM_INPUT, _LLM_OUTPUT)
CLAIM_KEYS = KIND_KEYS  # ``kind`` claims no span without one of these, unless it is named ``LLM_SPAN``
ERROR_KEY = "haystack.tool.error"
_INPUT = "haystack.agent.step.tool.input"
_OUTPUT = "haystack.agent.step.tool.output"


def kind(attrs: Mapping[str, Any], name: str = "") -> str | None:
    if attrs.get(_TOOL) not in (None, ""):
        return "tool"
    if _AGENT in attrs:
        return "agent"
    return "llm" if name == LLM_SPAN or _LLM_INPUT in attrs or _LLM_OUTPUT in attrs else None


def wrote(span: Mapping[str, Any]) -> bool:
    """Whether Haystack's tracer wrote a span: named by a Haystack operation, or tagged ``haystack.*``."""
    return str(span.get("name") or "").startswith("haystack.") or any(
        key.startswith("haystack.") for key in span["attributes"])


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    if kind(attrs) != "llm":
        return [], [], ""
    given, answered = json_value(attrs.get(_LLM_INPUT)), json_value(attrs.get(_LLM_OUTPUT))
    inputs = _messages(given.get("messages") if isinstance(given, dict) else None, "user")
    outputs = _messages(answered.get("replies") if isinstance(answered, dict) else None, "assistant")
    system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(input tokens, output tokens) a model call's replies state in their ``meta.usage`` (``None`` when silent)."""
    said = [meta["usage"] for meta in _reply_meta(attrs) if isinstance(meta.get("usage"), dict)]
    if not said:
        return None, None
    return tuple(sum(u[k] for u in said if isinstance(u.get(k), int)) for k in ("prompt_tokens", "completion_tokens"))


def model(attrs: Mapping[str, Any]) -> Any:
    """The model that answered, as a model call's replies state it in their ``meta.model`` (``None`` when silent)."""
    return next((meta["model"] for meta in _reply_meta(attrs) if meta.get("model") not in (None, "")), None)


def _reply_meta(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    answered = json_value(attrs.get(_LLM_OUTPUT)) if _LLM_OUTPUT in attrs else None
    replies = answered.get("replies") if isinstance(answered, dict) else None
    return [r["meta"] for r in replies if isinstance(r, dict) and isinstance(r.get("meta"), dict)] if isinstance(
        replies, list) else []


def _messages(raw: Any, default_role: str) -> list[Msg]:
    """Haystack's serialized ``ChatMessage`` list as messages: its ``tool_call`` and ``tool_call_result`` parts
    as the typed parts ``_parse.message`` reads."""
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        parts, failed = [], False
        for part in item.get("content") if isinstance(item.get("content"), list) else []:
            call = part.get("tool_call") if isinstance(part, dict) else None
            result = part.get("tool_call_result") if isinstance(part, dict) else None
            if isinstance(call, dict):
                parts.append({"type": "tool_call", "name": call.get("tool_name"), "arguments": call.get("arguments"),
                              "id": call.get("id")})
            elif isinstance(result, dict):
                origin = result.get("origin") if isinstance(result.get("origin"), dict) else {}
                parts.append({"type": "tool_call_response", "result": result.get("result"), "id": origin.get("id")})
                failed = failed or result.get("error") is True
            elif isinstance(part, dict) and "text" in part:
                parts.append({"type": "text", "content": part["text"]})
        said = message({"role": item.get("role"), "parts": parts}, default_role)
        if failed:
            said["failed"] = True  # the tool raised: the message's text is its error
        out.append(said)
    return out


def dataclass_messages(raw: Any) -> list[Msg]:
    """Haystack's ``ChatMessage`` list written as the dataclass's fields (``_role``, ``_content`` of bare parts), as
    messages: each part put in the shape ``ChatMessage.to_dict()`` gives it, and read as that."""
    shaped = []
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, dict) or "_role" not in item:
            continue
        parts = []
        for part in item.get("_content") if isinstance(item.get("_content"), list) else ():
            if isinstance(part, dict) and "tool_name" in part and "arguments" in part:
                part = {"tool_call": part}
            elif isinstance(part, dict) and "origin" in part and "result" in part:
                part = {"tool_call_result": part}
            parts.append(part)
        shaped.append({"role": item["_role"], "content": parts})
    return _messages(shaped, "user")


TOOL_KEYS = (_TOOL,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    call = tool_call(attrs[_TOOL], attrs.get(_INPUT))
    if attrs.get(_OUTPUT) is not None and error(attrs) is None:  # a failed call's output is its error, no result
        call["result"] = result_text(attrs[_OUTPUT])
    return call


def error(attrs: Mapping[str, Any]) -> str | None:
    """The error of a tool span that says it failed (``haystack.tool.error``): the text its output names, or
    ``None`` when it says it did not fail."""
    if attrs.get(ERROR_KEY) not in (True, "true", "True"):
        return None
    output = json_value(attrs.get(_OUTPUT))
    said = output.get("error") if isinstance(output, dict) else None
    return text(said) if said not in (None, "") else "the tool call failed (haystack.tool.error)"
