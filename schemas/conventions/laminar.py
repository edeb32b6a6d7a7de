"""Laminar (``lmnr``): the spans of its ``@observe`` decorator (``Laminar.start_as_current_span`` too) around the model
calls of its own instrumentations. Every span Laminar writes says what it is in ``lmnr.span.type`` and what it was
given and returned in ``lmnr.span.input`` / ``lmnr.span.output``; the model calls' messages, model and usage are
GenAI attributes (``gen_ai.input.messages`` ..., read by ``schemas.conventions.genai``; the answer as the chat API's
choices, read by ``_parse.unpacked``). Nothing but its type tells a tool's span from the application's own function.

| what | read from |
| --- | --- |
| span kind | ``lmnr.span.type``: ``TOOL`` a tool call (``@observe(span_type="TOOL")``), ``LLM`` a model call (its instrumentations' spans, ``@observe(span_type="LLM")``); ``DEFAULT`` (a plain ``@observe()``: the application's own function, an agent's run or any step of it) and the evaluation types say nothing of what the function did, and are left to the fallback by meaning (a run is found from the model calls under it, as under any plain span) |
| a tool span | the tool: the span's name (the decorated function's, or ``@observe(name=…)``); its arguments ``lmnr.span.input`` (the function's arguments by name, JSON); its result ``lmnr.span.output`` (what it returned, JSON: a text result is the JSON text of that string); its error from the span status and ``exception`` event (``conventions.error``) |
| kept | the intake keeps every span Laminar writes (``KEEP_KEYS``: ``lmnr.span.type``, the association properties), its plain ``DEFAULT`` spans too: the run's root states the session and the run's input and output |
| session | ``lmnr.association.properties.session_id`` (``Laminar.set_trace_session_id``, ``@observe(session_id=…)``: on every span of the trace after it is set); the other association properties (``user_id``, ``metadata.<key>`` by its key) as turn metadata |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import function_call, text

__all__ = ["KEEP_KEYS", "KIND_KEY", "TOOL_KEYS", "WHO_KEYS", "identity", "kind", "tool"]

KIND_KEY = "lmnr.span.type"
_KINDS = {"TOOL": "tool", "LLM": "llm"}
_ASSOCIATION = "lmnr.association.properties."
_METADATA = "metadata."  # Laminar's own metadata, one property per key
WHO_KEYS = (_ASSOCIATION,)  # ``identity`` reads nothing of a span without one of these
KEEP_KEYS = (KIND_KEY, _ASSOCIATION)  # the intake keeps a span with one of these: every span Laminar writes


def kind(attrs: Mapping[str, Any]) -> str | None:
    return _KINDS.get(attrs.get(KIND_KEY))  # type: ignore[arg-type]


TOOL_KEYS = (KIND_KEY,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    return function_call(span["name"], attrs.get("lmnr.span.input"), attrs.get("lmnr.span.output"))


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    properties = {k[len(_ASSOCIATION):]: v for k, v in attrs.items() if k.startswith(_ASSOCIATION)}
    session = properties.pop("session_id", None)
    metadata = {k.removeprefix(_METADATA): text(v) for k, v in properties.items()}
    return {"agent": None, "session_id": session, "metadata": metadata}
