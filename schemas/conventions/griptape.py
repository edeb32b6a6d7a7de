"""Griptape's own observability (``Observability(observability_driver=OpenTelemetryObservabilityDriver(...))``,
``griptape[drivers-observability-opentelemetry]``; its Datadog and Griptape Cloud drivers are the same tracer with
another exporter). The driver makes one span for each call of a method Griptape decorates ``@observable``, named
``<class>.<method>()`` (``OpenTelemetryObservabilityDriver.observe``), with status OK, or ERROR and an ``exception``
event when the method raised. Its only attribute is the decorator's ``tags``, and only two of Griptape's observables
give any: **no span carries a message, a tool's arguments or its result**, and no setting adds them. The content
of a run comes from an instrumentation of the model client its prompt driver calls (``OpenAiChatPromptDriver``
calls ``openai``), whose LLM spans sit under the driver's (``SETTING``: a run without them is recorded with its
content missing, naming that).

| what | read from |
| --- | --- |
| a structure's run | the span ``<structure>.run()`` or ``.run_stream()`` (``Structure.run`` / ``run_stream``: ``Agent``, ``Pipeline``, ``Workflow``, and a subclass by its own name), with no ``tags``: Griptape's only untagged observables named so; its ``before_run()``, ``try_run()`` and ``after_run()`` are plain spans under it |
| a model call | ``tags`` holds ``PromptDriver.run()`` (``BasePromptDriver.run``: one per call, retries inside it); its ``try_run()`` / ``try_stream()`` under it is the driver's request; with the model client instrumented, the client's LLM span under those is the same call seen nearer the wire |
| a tool call | ``tags`` holds ``Tool.run()`` (``BaseTool.try_run``: one span per action the model asked for) |
| its tool | the span name's class (``<tool>.try_run()``): Griptape names each of a tool's activities to the model ``<tool>_<activity>`` (``BaseTool.to_native_tool_name``), so the span ran the model's call of a name that starts ``<tool>_`` (``runs``) |
| its error | status ERROR and the ``exception`` event: the activity raised; Griptape then hands the model the error's text as the tool's result (an ``ErrorArtifact``) and goes on |
| a failed model call | status ERROR and the ``exception`` event on the ``PromptDriver.run()`` span; Griptape's task catches it and the run ends with an ``ErrorArtifact`` as its output (no span above it says it failed) |
| arguments, result, messages, usage, model, session | none |
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["CLAIM_KEYS", "SETTING", "TAGS", "TOOL_KEYS", "kind", "runs", "tagged", "tool"]

SETTING = ("OpenAIInstrumentor().instrument(tracer_provider=…) (opentelemetry-instrumentation-genai-openai) with "
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY, or another instrumentation of the model client "
           "Griptape's prompt driver calls: Griptape's own spans carry no content")
TAGS = "tags"
CLAIM_KEYS = (TAGS,)  # ``kind`` claims no span without one of these, unless its name ends in ``()``
_TAGGED = {"PromptDriver.run()": "llm", "Tool.run()": "tool"}
_STRUCTURE_RUN = re.compile(r"^[A-Za-z_]\w*\.run(?:_stream)?\(\)$")
_TOOL_SPAN = re.compile(r"^([A-Za-z_]\w*)\.try_run\(\)$")


def tagged(attrs: Mapping[str, Any]) -> str | None:
    """``llm`` or ``tool`` when a span's ``tags`` say it is Griptape's model call or tool call, else ``None``."""
    tags = attrs.get(TAGS)
    if isinstance(tags, (list, tuple)):
        return next((_TAGGED[tag] for tag in tags if tag in _TAGGED), None)
    return None


def kind(attrs: Mapping[str, Any], name: str = "") -> str | None:
    if TAGS in attrs:
        return tagged(attrs)
    return "agent" if name.endswith("()") and _STRUCTURE_RUN.match(name) else None


TOOL_KEYS = (TAGS,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool span's call: its tool, no arguments (its error is the span's, read by ``conventions.error``);
    ``names_tool``: the name is the tool's, not the call's (``runs`` pairs it, and assembly drops the mark)."""
    if tagged(span["attributes"]) != "tool":
        return None
    found = _TOOL_SPAN.match(str(span.get("name") or ""))
    return {"name": found.group(1) if found else span["name"], "arguments": {}, "names_tool": True}


def runs(call: Mapping[str, Any], asked: Mapping[str, Any]) -> bool:
    """Whether a Griptape tool span's ``call`` ran the model's call ``asked``: one of its tool's activities."""
    return bool(call.get("names_tool")) and str(asked.get("name") or "").startswith(f"{call['name']}_")
