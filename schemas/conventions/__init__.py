"""The span conventions vigil reads, one module each, and the one place that says which wins: the OpenTelemetry GenAI
conventions (``genai``), OpenInference (``openinference``, LangChain's included), OpenLLMetry / Traceloop
(``openllmetry``) and openlit (``openlit``). Each module's docstring has its table: which attributes and events mean
what. ``schemas.spans`` builds turns from what these functions say of each span.

Per span, first match wins: the kind from OpenLLMetry, then OpenInference, then GenAI (then a plain server or
consumer span is ``server``); messages from openlit when it wrote the span, else the GenAI attributes and events,
then OpenLLMetry's entity input / output, then OpenInference, each filling what the one before left empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import genai, openinference, openlit, openllmetry
from ._parse import Io, Msg, text

__all__ = ["Io", "Msg", "content_setting", "documents", "identity", "io", "kind", "tool"]

_SERVER_KINDS = (2, 5)  # OTLP SPAN_KIND_SERVER, SPAN_KIND_CONSUMER: a request or a message handled


def kind(span: Mapping[str, Any]) -> str:
    """``agent``, ``chain``, ``step``, ``server``, ``llm``, ``tool``, ``retriever`` or ``other``."""
    attrs = span["attributes"]
    found = (openllmetry.kind(attrs) or openinference.kind(attrs)
             or genai.kind(attrs, (e["name"] for e in span.get("events") or ())))
    if found:
        return found
    return "server" if span.get("kind") in _SERVER_KINDS else "other"


def io(span: Mapping[str, Any]) -> Io:
    """(input messages, output messages, system instructions) of one span, whichever convention wrote them."""
    if openlit.claims(span):
        inputs, outputs, system = openlit.io(span)
    else:
        inputs, outputs, system = [], [], ""
    for convention in (genai, openllmetry, openinference):
        if inputs and outputs and system:
            break
        more_in, more_out, more_system = convention.io(span)
        inputs, outputs, system = inputs or more_in, outputs or more_out, system or more_system
    if not system:
        system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


def documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The retrieved documents a span holds, as ``ContextDoc`` fields (documents without text are left out)."""
    docs = [*openinference.documents(attrs), *genai.documents(attrs), *openllmetry.documents(attrs)]
    return [doc for doc in map(_document, docs) if doc["text"]]


def tool(span: Mapping[str, Any]) -> dict[str, Any]:
    """The tool call a tool span made, with its error when the span says it failed."""
    call = openllmetry.tool(span) or openinference.tool(span) or genai.tool(span) or {"name": span["name"],
                                                                                       "arguments": {}}
    error = _error(span)
    if error:
        call["error"] = error
    return call


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Agent name, session id and metadata a span states (``None`` / empty where it states nothing)."""
    out: dict[str, Any] = {"agent": None, "session_id": None, "metadata": {}}
    for convention in (genai, openllmetry, openinference):
        found = convention.identity(attrs)
        for key in ("agent", "session_id"):
            if out[key] in (None, "") and found.get(key) not in (None, ""):
                out[key] = text(found[key])
        out["metadata"] = {**found.get("metadata", {}), **out["metadata"]}
    return out


def content_setting(span: Mapping[str, Any]) -> str:
    """The instrumentation setting that turns message content capture on, for the library that wrote ``span``."""
    scope = str(span.get("scope") or "")
    if scope.startswith("openinference") or openinference.kind(span["attributes"]):
        return openinference.SETTING
    if openlit.claims(span) or scope.startswith("openlit"):
        return openlit.SETTING
    if scope.startswith("opentelemetry.instrumentation.openai.v") or any(
            k.startswith("traceloop.") for k in span["attributes"]):
        return openllmetry.SETTING
    return genai.SETTING


def _error(span: Mapping[str, Any]) -> str | None:
    status = span.get("status") or {}
    error_type = span["attributes"].get("error.type")
    if status.get("code") != 2 and error_type in (None, ""):
        return None
    message = status.get("message") or ""
    if error_type not in (None, "") and str(error_type) not in message:
        message = f"{error_type}: {message}" if message else str(error_type)
    return message or "error"


def _document(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {"text": text(doc)}
    content = doc.get("content", doc.get("text"))
    out: dict[str, Any] = {"text": "" if content is None else text(content)}
    if doc.get("id") not in (None, ""):
        out["id"] = str(doc["id"])
    score = doc.get("score")
    if isinstance(score, str):
        try:
            score = float(score)
        except ValueError:
            score = None
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        out["score"] = float(score)
    return out
