"""AgentOps (``agentops``): the spans of its decorators and trace management around the model calls of its own
instrumentations. Every span its SDK writes says what it is in ``agentops.span.kind`` and what the decorated function
was given and returned in ``agentops.<kind>.input`` / ``.output``; the model calls are OpenLLMetry-style spans
(``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``, read by ``schemas.conventions.openllmetry``).

| what | read from |
| --- | --- |
| span kind | ``agentops.span.kind``: ``session`` (a trace, ``agentops.start_trace`` or ``@trace``: the application's grouping of what it runs, a conversation's runs under it) a chain, so a session that holds several agent runs is their container; ``agent`` an agent run (``@agent``); ``tool`` a tool call (``@tool``); ``workflow``, ``task`` and ``operation`` the application's own steps, chains; the others (``guardrail``, ``http`` ...) are left to the fallback by meaning |
| a tool span | the tool: ``operation.name`` (the decorated function's name, or ``@tool(name=…)``); its arguments ``agentops.tool.input`` (the Python call's ``{"args", "kwargs"}``, unwrapped: ``_parse.call_arguments``); its result ``agentops.tool.output``; its error from the span status and ``exception`` event (``conventions.error``) |
| kept | the intake keeps every span AgentOps' decorators write (``KEEP_KEYS``: ``agentops.span.kind``) |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import function_call

__all__ = ["KEEP_KEYS", "KIND_KEY", "TOOL_KEYS", "kind", "tool"]

KIND_KEY = "agentops.span.kind"
_KINDS = {"session": "chain", "agent": "agent", "tool": "tool", "workflow": "chain", "task": "chain",
          "operation": "chain"}
KEEP_KEYS = (KIND_KEY,)  # the intake keeps a span with one of these: every span AgentOps' decorators write


def kind(attrs: Mapping[str, Any]) -> str | None:
    return _KINDS.get(attrs.get(KIND_KEY))  # type: ignore[arg-type]


TOOL_KEYS = (KIND_KEY,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    return function_call(attrs.get("operation.name") or span["name"], attrs.get("agentops.tool.input"),
                         attrs.get("agentops.tool.output"))
