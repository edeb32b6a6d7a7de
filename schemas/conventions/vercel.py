"""The Vercel AI SDK's telemetry (``experimental_telemetry: { isEnabled: true }`` on ``generateText``,
``streamText``, ``generateObject``, ``streamObject``), scope ``ai``.

| what | read from |
| --- | --- |
| span kind | ``ai.operationId``: ``ai.generateText`` / ``ai.streamText`` / ``ai.generateObject`` / ``ai.streamObject`` the run, their ``.doGenerate`` / ``.doStream`` an LLM call, ``ai.toolCall`` a tool call, ``ai.embed`` / ``ai.embedMany`` (and ``.doEmbed``) other |
| messages | the run's ``ai.prompt`` (JSON ``{system, prompt, messages}``) and ``ai.response.text`` / ``ai.response.object``; an LLM call's ``ai.prompt.messages`` (JSON messages of ``text``, ``tool-call`` and ``tool-result`` parts), ``ai.response.text`` and ``ai.response.toolCalls`` (``toolCallId``, ``toolName``, ``input`` / ``args``) |
| model, usage | ``ai.response.model`` / ``ai.model.id``; ``ai.usage.inputTokens`` / ``outputTokens`` (``promptTokens`` / ``completionTokens`` before v5) |
| a tool span | ``ai.toolCall.name``, ``ai.toolCall.id``, ``ai.toolCall.args`` / ``.input``, ``ai.toolCall.result`` / ``.output``; its error from the span status or ``exception`` event |
| who | agent ``ai.telemetry.functionId``; session ``ai.telemetry.metadata.sessionId`` (or ``session_id``, ``conversationId``, ``threadId``); the other ``ai.telemetry.metadata.*`` as turn metadata |
| content off | ``experimental_telemetry: { recordInputs: false, recordOutputs: false }`` |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import Io, Msg, json_value, message, msg, text, tool_call

__all__ = ["CLAIM_KEYS", "KIND_KEY", "SETTING", "TOOL_KEYS", "WHO_KEYS", "identity", "io", "kind", "tool", "usage"]

SETTING = "experimental_telemetry: { isEnabled: true, recordInputs: true, recordOutputs: true } (the defaults)"
KIND_KEY = "ai.operationId"
CLAIM_KEYS = (KIND_KEY,)  # ``kind`` claims no span without one of these
_RUNS = ("ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject")
_METADATA = "ai.telemetry.metadata."
_SESSION_KEYS = ("sessionId", "session_id", "conversationId", "conversation_id", "threadId", "thread_id")


def kind(attrs: Mapping[str, Any]) -> str | None:
    operation = attrs.get(KIND_KEY)
    if not isinstance(operation, str) or not operation.startswith("ai."):
        return None
    if operation in _RUNS:
        return "agent"
    if operation.startswith(_RUNS) and operation.endswith((".doGenerate", ".doStream")):
        return "llm"
    if operation == "ai.toolCall":
        return "tool"
    return "other"


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    found = kind(attrs)
    if found == "agent":
        prompt = json_value(attrs.get("ai.prompt"))
        inputs, system = _prompt(prompt)
    elif found == "llm":
        inputs, system = _prompt({"messages": json_value(attrs.get("ai.prompt.messages"))})
    else:
        return [], [], ""
    answer = attrs.get("ai.response.text")
    if answer in (None, "") and attrs.get("ai.response.object") not in (None, ""):
        answer = text(json_value(attrs["ai.response.object"]))
    calls = json_value(attrs.get("ai.response.toolCalls"))
    asked = [tool_call(c.get("toolName"), c.get("input", c.get("args")), c.get("toolCallId"))
             for c in (calls if isinstance(calls, list) else []) if isinstance(c, dict)]
    outputs = [msg("assistant", text(answer), asked)] if answer not in (None, "") or asked else []
    return inputs, outputs, system


TOOL_KEYS = (KIND_KEY,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    call = tool_call(attrs.get("ai.toolCall.name") or span["name"],
                     attrs.get("ai.toolCall.args", attrs.get("ai.toolCall.input")), attrs.get("ai.toolCall.id"))
    result = attrs.get("ai.toolCall.result", attrs.get("ai.toolCall.output"))
    if result is not None:
        result = json_value(result)
        call["result"] = text(json_value(result) if isinstance(result, str) else result)
    return call


WHO_KEYS = (KIND_KEY,)  # ``identity`` reads nothing of a span without it


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if KIND_KEY not in attrs:  # every span the SDK writes names its operation
        return {"agent": None, "session_id": None, "metadata": {}}
    metadata = {k[len(_METADATA):]: v for k, v in attrs.items() if k.startswith(_METADATA)}
    session = next((metadata.pop(k) for k in _SESSION_KEYS if metadata.get(k) not in (None, "")), None)
    return {"agent": attrs.get("ai.telemetry.functionId"), "session_id": session,
            "metadata": {k: text(v) for k, v in metadata.items()}}


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    return (attrs.get("ai.usage.inputTokens", attrs.get("ai.usage.promptTokens")),
            attrs.get("ai.usage.outputTokens", attrs.get("ai.usage.completionTokens")))


def _prompt(prompt: Any) -> tuple[list[Msg], str]:
    if isinstance(prompt, str):
        return [msg("user", prompt)], ""
    if not isinstance(prompt, dict):
        return [], ""
    raw = prompt.get("messages")
    messages = [message(m, "user") for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
    if isinstance(prompt.get("prompt"), str):
        messages.append(msg("user", prompt["prompt"]))
    system = prompt.get("system") if isinstance(prompt.get("system"), str) else ""
    return messages, system
