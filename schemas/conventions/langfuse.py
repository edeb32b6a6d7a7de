"""The Langfuse SDK's observations (Python ``langfuse`` v3 and later: OpenTelemetry spans of the tracer
``langfuse-sdk``, made by ``@observe``, ``start_as_current_span`` / ``start_as_current_generation`` /
``start_observation`` and its integrations such as the ``langfuse.openai`` drop-in). Langfuse adds its exporter to
the application's TracerProvider, so any other exporter on it sends the same spans. They carry no GenAI or
OpenInference attribute: what an observation is and holds are ``langfuse.observation.*`` attributes, written by
``langfuse/_client/attributes.py`` (``create_span_attributes``, ``create_generation_attributes``): input and output
as JSON text (a string as itself), usage and model parameters as JSON objects.

| what | read from |
| --- | --- |
| span kind | ``langfuse.observation.type``: ``generation`` an LLM call; ``tool`` a tool call; ``retriever`` a retriever; ``agent`` an agent; ``span`` (``@observe()``'s default: a function the application chose to observe) and ``chain`` a chain (the run when it is the trace's top span); ``embedding``, ``evaluator``, ``guardrail`` and ``event`` other |
| messages of a generation | ``langfuse.observation.input``: the messages as the model was sent them (a list of OpenAI-style messages, or ``{"messages": [...], "tools": [...]}`` when tools were offered, as ``langfuse.openai`` writes it; plain text is a user message); ``langfuse.observation.output``: the message the model answered (an OpenAI-style message, ``tool_calls`` with their ids, or plain text) |
| a run's input and output | a span's, chain's or agent's ``langfuse.observation.input`` / ``.output`` when it is evidence of words as ``_parse.value_messages`` says, else ``langfuse.trace.input`` / ``.output`` on it (what the application stated as the trace's, ``update_current_trace``): ``@observe`` records a function's arguments as ``{"args": [...], "kwargs": {...}}``, a call's packaging, which says nothing (then the trace's input, else the LLM calls, are read), and its return value as itself |
| model, usage | ``langfuse.observation.model.name``; ``langfuse.observation.usage_details``, an object of token counts: input ``input`` (Langfuse's own key), ``prompt_tokens`` or ``input_tokens`` (the provider's, as the OpenAI integration passes its usage on), output ``output``, ``completion_tokens`` or ``output_tokens`` |
| a tool span | its span name (the function's, or ``name=``) the tool; ``langfuse.observation.input`` the call's arguments (``{"args", "kwargs"}`` as ``_parse.call_arguments`` reads it), ``.output`` its result; no id (paired with the model's tool calls by name and arguments) |
| errors | ``langfuse.observation.level`` ``ERROR`` with ``langfuse.observation.status_message`` (``@observe`` sets both when the function raises, and the span status ERROR with the message) |
| who | agent: ``langfuse.trace.name``; session ``session.id``, user ``user.id`` (``propagate_attributes`` / ``update_current_trace``; the OpenInference keys, read there) |
| content | on by default: ``SETTING`` names what turns it off |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import (
    Io,
    call_arguments,
    json_messages,
    json_value,
    result_text,
    text,
    value_messages,
)

__all__ = ["CLAIM_KEYS", "KEEP_KEYS", "KIND_KEY", "LEVEL_KEY", "SETTING", "TOOL_KEYS", "WHO_KEYS", "error", "identity",
           "io", "kind", "model", "tool", "usage"]

SETTING = ("Langfuse's observation input and output (@observe(capture_input=…, capture_output=…), "
           "LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED, a mask= on the Langfuse client)")
KIND_KEY = "langfuse.observation.type"
CLAIM_KEYS = (KIND_KEY,)  # ``kind`` claims no span without one of these
LEVEL_KEY = "langfuse.observation.level"
_INPUT, _OUTPUT = "langfuse.observation.input", "langfuse.observation.output"
_TRACE_INPUT, _TRACE_OUTPUT = "langfuse.trace.input", "langfuse.trace.output"
_MODEL, _USAGE = "langfuse.observation.model.name", "langfuse.observation.usage_details"
_TRACE_NAME = "langfuse.trace.name"
KEEP_KEYS = (KIND_KEY,)  # every observation names its type: the spans the intake keeps
_KINDS = {"generation": "llm", "tool": "tool", "retriever": "retriever", "agent": "agent", "span": "chain",
          "chain": "chain"}
_INPUT_TOKENS = ("input", "prompt_tokens", "input_tokens")
_OUTPUT_TOKENS = ("output", "completion_tokens", "output_tokens")


def kind(attrs: Mapping[str, Any]) -> str | None:
    observation = attrs.get(KIND_KEY)
    if observation is None:  # not Langfuse's: one lookup
        return None
    return _KINDS.get(observation, "other")


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    found = kind(attrs)
    if found == "llm":
        inputs, outputs = json_messages(attrs.get(_INPUT), "user"), json_messages(attrs.get(_OUTPUT), "assistant")
    elif found in ("chain", "agent"):
        inputs = _stated(attrs, _INPUT, "user") or _stated(attrs, _TRACE_INPUT, "user")
        outputs = _stated(attrs, _OUTPUT, "assistant") or _stated(attrs, _TRACE_OUTPUT, "assistant")
    else:
        return [], [], ""
    system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


def _stated(attrs: Mapping[str, Any], key: str, default_role: str) -> list:
    said = attrs.get(key)
    return value_messages(said, default_role) if said not in (None, "") else []


TOOL_KEYS = (KIND_KEY,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    """The call a tool observation made: its name, its arguments (a Python call's packaging read as the call's), its
    result."""
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    given = call_arguments(json_value(attrs.get(_INPUT)))
    call: dict[str, Any] = {"name": span["name"], "arguments": given if isinstance(given, dict) else {}}
    if attrs.get(_OUTPUT) is not None:
        call["result"] = result_text(attrs[_OUTPUT])
    return call


def model(attrs: Mapping[str, Any]) -> Any:
    return attrs.get(_MODEL) if KIND_KEY in attrs else None


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(input tokens, output tokens) an observation's ``usage_details`` states (``None`` when silent)."""
    if _USAGE not in attrs:
        return None, None
    said = json_value(attrs[_USAGE])
    if not isinstance(said, dict):
        return None, None
    return (next((said[k] for k in _INPUT_TOKENS if isinstance(said.get(k), int)), None),
            next((said[k] for k in _OUTPUT_TOKENS if isinstance(said.get(k), int)), None))


def error(attrs: Mapping[str, Any]) -> str | None:
    """An observation whose level is ``ERROR``: its status message (``None`` for any other level)."""
    if attrs.get(LEVEL_KEY) != "ERROR":
        return None
    said = attrs.get("langfuse.observation.status_message")
    return text(said) if said not in (None, "") else "the observation's level is ERROR"


WHO_KEYS = (_TRACE_NAME,)  # ``identity`` reads nothing of a span without it


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {"agent": attrs.get(_TRACE_NAME), "session_id": None, "metadata": {}}
