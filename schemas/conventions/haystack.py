"""Haystack's own tracer (``tracing.enable_tracing(OpenTelemetryTracer(...))``, package opentelemetry-haystack): spans
named by Haystack's operation (``haystack.pipeline.run``, ``haystack.component.run``, ``haystack.agent.run``,
``haystack.agent.step``, ``haystack.agent.step.llm``, ``haystack.agent.step.tool``) whose attributes are all
``haystack.*`` tags. Haystack's tracing docs pair it with an instrumentation of the model client for the LLM calls
(their GenAI or OpenInference attributes, read by those modules); this module reads what only Haystack writes: which
span is an agent's run and its tool calls. Its other spans (pipeline, component, step, the step's generator call) are
read as plain spans around the model calls; the run's question and answer are the model calls'.

| what | read from |
| --- | --- |
| an agent run | ``haystack.agent.max_steps`` (set when ``Agent.run`` opens ``haystack.agent.run``, with its tools and exit conditions) |
| a tool span | ``haystack.tool.name`` (set on every tool span an ``Agent`` opens, one per tool call: ``haystack.components.agents.tool_calling``) |
| its arguments | ``haystack.agent.step.tool.input``: the tool call's arguments, JSON |
| its result | ``haystack.agent.step.tool.output``: what the tool returned (a string as it is, anything else as JSON) |
| its error | ``haystack.tool.error`` ``true``: the tool raised (Haystack catches the exception, sends the model its text as the tool message and goes on), and ``haystack.agent.step.tool.output`` is then ``{"error": <the exception's text>}`` |
| id | none: the call is paired with the model's tool call by name and arguments |
| content off | the default: ``HAYSTACK_CONTENT_TRACING_ENABLED=true`` turns the input and output tags on |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import json_value, result_text, text, tool_call

__all__ = ["ERROR_KEY", "KIND_KEYS", "error", "kind", "tool"]

_TOOL = "haystack.tool.name"
_AGENT = "haystack.agent.max_steps"
KIND_KEYS = (_TOOL, _AGENT)
ERROR_KEY = "haystack.tool.error"
_INPUT = "haystack.agent.step.tool.input"
_OUTPUT = "haystack.agent.step.tool.output"


def kind(attrs: Mapping[str, Any]) -> str | None:
    if attrs.get(_TOOL) not in (None, ""):
        return "tool"
    return "agent" if _AGENT in attrs else None


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
