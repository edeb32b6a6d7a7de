"""OpenLLMetry (Traceloop): the ``traceloop-sdk`` decorators' spans (``@workflow``, ``@agent``, ``@task``, ``@tool``)
around the LLM spans of its instrumentations (``opentelemetry-instrumentation-openai`` ... write GenAI attributes,
read by ``schemas.conventions.genai``).

| what | read from |
| --- | --- |
| span kind | ``traceloop.span.kind``: ``workflow`` / ``agent`` the turn's root, ``task`` a step (its spans join the turn), ``tool`` a tool call |
| question, answer | the root's ``traceloop.entity.input`` (JSON ``{"args": [...], "kwargs": {...}}``: the first text argument, else a ``question`` / ``input`` / ``query`` / ``message`` keyword) and ``traceloop.entity.output`` (JSON: text, or an object's ``answer`` / ``output`` / ``content`` / ``text``) |
| contexts | a task whose output is a list of documents (objects with ``content`` / ``page_content`` / ``text``, and ``id``, ``score``) |
| a tool span | ``traceloop.entity.name``, ``traceloop.entity.input`` (the arguments: an object argument or the keywords), ``traceloop.entity.output``; its error from the span status. The LangChain instrumentation writes a callback's own packaging there (``on_tool_start``: ``{"input_str", "tags", "metadata", "inputs", "kwargs"}``; ``on_tool_end``: ``{"output", "kwargs"}``, also as ``gen_ai.tool.call.arguments`` / ``.result``): the arguments are ``inputs`` (else ``input_str``), the call's id ``kwargs.tool_call_id``, the result ``output`` (a serialized ``ToolMessage``: its content), never the packaging around them |
| who | agent: the ``agent`` span's ``traceloop.entity.name``, else ``traceloop.workflow.name``; session: ``traceloop.association.properties.session_id`` (or ``conversation_id``, ``thread_id``); the other association properties and the workflow name as turn metadata |
| content off | ``TRACELOOP_TRACE_CONTENT=false`` |
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from typing import Any

from ._parse import Io, json_value, msg, result_text, text, tool_call

__all__ = ["DOCUMENT_KEYS", "SETTING", "WHO_KEYS", "documents", "identity", "io", "kind", "tool"]

SETTING = "TRACELOOP_TRACE_CONTENT=true (the default)"
_KINDS = {"workflow": "agent", "agent": "agent", "task": "step", "tool": "tool"}
_ASSOCIATION = "traceloop.association.properties."
_SESSION_KEYS = ("session_id", "conversation_id", "thread_id", "chat_id")
_QUESTION_KEYS = ("question", "input", "query", "message", "prompt", "text")
_ANSWER_KEYS = ("answer", "output", "content", "text", "result", "response")


def kind(attrs: Mapping[str, Any]) -> str | None:
    value = attrs.get("traceloop.span.kind")
    return _KINDS.get(str(value).lower(), "other") if value else None


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    if kind(attrs) != "agent":
        return [], [], ""
    question = _question(json_value(attrs.get("traceloop.entity.input")))
    answer = _answer(json_value(attrs.get("traceloop.entity.output")))
    return ([msg("user", question)] if question else []), ([msg("assistant", answer)] if answer else []), ""


DOCUMENT_KEYS = ("traceloop.span.kind",)  # ``documents`` reads nothing of a span without it (no task)


def documents(attrs: Mapping[str, Any]) -> list[Any]:
    if kind(attrs) != "step":
        return []
    output = json_value(attrs.get("traceloop.entity.output"))
    if isinstance(output, list) and output and all(
            isinstance(d, dict) and any(k in d for k in ("content", "page_content", "text")) for d in output):
        return [{**d, "content": d.get("content", d.get("page_content", d.get("text")))} for d in output]
    return []


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    arguments = json_value(attrs.get("traceloop.entity.input"))
    call_id = None
    if isinstance(arguments, dict) and "input_str" in arguments:  # a LangChain callback's on_tool_start
        call_id = (arguments.get("kwargs") or {}).get("tool_call_id")
        arguments = arguments["inputs"] if isinstance(arguments.get("inputs"), dict) else arguments["input_str"]
    elif isinstance(arguments, dict) and ("args" in arguments or "kwargs" in arguments):
        objects = [a for a in arguments.get("args") or [] if isinstance(a, dict)]
        arguments = objects[0] if objects else arguments.get("kwargs") or {}
    call = tool_call(attrs.get("traceloop.entity.name") or span["name"], arguments, call_id)
    output = json_value(attrs.get("traceloop.entity.output"))
    if isinstance(output, dict) and set(output) == {"output", "kwargs"}:  # a LangChain callback's on_tool_end
        call["result"] = result_text(output["output"])
    elif output is not None:
        call["result"] = text(output)
    return call


WHO_KEYS = ("traceloop.",)  # what every key ``identity`` reads starts with


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if not any(map(str.startswith, attrs, repeat(WHO_KEYS))):
        return {"agent": None, "session_id": None, "metadata": {}}
    properties = {k[len(_ASSOCIATION):]: v for k, v in attrs.items() if k.startswith(_ASSOCIATION)}
    session = None
    if properties:
        session = next((properties.pop(k) for k in _SESSION_KEYS if properties.get(k) not in (None, "")), None)
    metadata = {k: text(v) for k, v in properties.items()}
    if attrs.get("traceloop.workflow.name"):
        metadata["workflow"] = text(attrs["traceloop.workflow.name"])
    agent = attrs.get("traceloop.entity.name") or attrs.get("traceloop.workflow.name") if kind(attrs) == "agent" else None
    return {"agent": agent, "session_id": session, "metadata": metadata}


def _question(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and ("args" in value or "kwargs" in value):
        for arg in value.get("args") or []:
            if isinstance(arg, str) and arg:
                return arg
        value = value.get("kwargs") or {}
    if isinstance(value, dict):
        for key in _QUESTION_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
    return "" if value is None else text(value)


def _answer(value: Any) -> str:
    if isinstance(value, dict):
        for key in _ANSWER_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
    return "" if value is None else text(value)
