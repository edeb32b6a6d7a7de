"""Firebase Genkit's own tracing (JS ``genkit``: every action, flow and ``generate`` runs in a span of the tracer
``genkit-tracer``, exported to any OTLP backend by ``enableTelemetry`` from ``genkit/tracing``). Its spans carry no
GenAI attribute: what a span is and what it holds are ``genkit:*`` attributes, written by ``runInNewSpan``
(``@genkit-ai/core`` ``tracing/instrumentation.ts``) from the span's metadata: ``genkit:<key>`` for each field,
``genkit:metadata:<key>`` for its custom metadata, objects and the input as JSON.

| what | read from |
| --- | --- |
| span kind | ``genkit:type`` ``action`` (every registered action) with its action type ``genkit:metadata:subtype``: ``model`` / ``background-model`` an LLM call, ``tool`` / ``tool.v2`` a tool call, ``retriever`` a retriever, ``agent`` an agent (the Agents API's ``defineAgent``), ``flow`` / ``executable-prompt`` a framework's chain (the run when it is the trace's top span); any other action type (``embedder``, ``indexer``, ``evaluator``, ``util`` ...) other. ``genkit:type`` ``flow`` (Genkit before 1.0) and the chat API's ``send`` (a ``helper`` span naming its session, ``genkit:sessionId``: one turn of a chat) a chain. The other spans with no action type (``generate``'s ``util`` span, ``flowStep``, ``promptTemplate``) repeat what the actions under them say: plain spans |
| messages of a model call | ``genkit:input``: the ``GenerateRequest`` (``messages``, each ``{role: user / model / system / tool, content: [Part]}``); ``genkit:output``: the ``GenerateResponse``, its ``message`` (``candidates[0].message`` before 1.0). Parts: ``{text}``, ``{toolRequest: {name, ref, input}}`` (a tool call, ``ref`` its id), ``{toolResponse: {name, ref, output}}`` (a tool result; a ``tool`` message of several is one tool message each); ``media``, ``data``, ``reasoning`` and ``custom`` parts are not text |
| contexts | a retriever action's ``genkit:output``, ``{documents: [{content: [Part], metadata}]}``: each document's text parts, ``metadata.id`` / ``metadata.score`` when it names them |
| retrieved text in a prompt | a part with ``metadata.purpose`` ``context`` (what ``augmentWithContext`` adds to the last user message when documents are handed to ``generate({docs})``) is the documents, not the user's words: not read as the message's text |
| a run's input and output | a flow's ``genkit:input`` / ``genkit:output``: the flow's own input and output as JSON, evidence of words as ``_parse.value_messages`` says; an agent's ``genkit:output``, ``{message, finishReason, sessionId, state}``: its ``message`` the answer |
| model, usage | a model span's ``genkit:name`` (the model action, ``<plugin>/<model>``); ``genkit:output`` ``usage.inputTokens`` / ``outputTokens`` |
| a tool span | ``genkit:name`` the tool; ``genkit:input`` the call's arguments, ``genkit:output`` its result (JSON: a string result is the text it holds; a ``tool.v2`` action, a multipart tool, returns the envelope ``{output, content, metadata}``: the result is its ``output``, else its content's text); no id (paired with the model's ``toolRequest`` by name and arguments); its error from the span status and ``exception`` event (``runInNewSpan`` records both when the action throws) |
| a failed agent turn | an agent's ``genkit:output`` with ``finishReason`` ``failed``: the Agents API resolves an in-band failure so, with the error in ``error`` (``{status, message}``), the span's status OK |
| who | agent: a flow's or an agent's ``genkit:name``; session: ``genkit:metadata:agent:sessionId`` (an agent's conversation), ``genkit:sessionId`` (the chat API's ``send``) |
| content | always: Genkit writes every action's input and output (``SETTING`` names what removes them) |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import Io, Msg, json_value, message, text, value_messages

__all__ = ["CLAIM_KEYS", "DOCUMENT_KEYS", "KEEP_KEYS", "KIND_KEY", "SETTING", "TOOL_KEYS", "WHO_KEYS", "documents",
           "error", "identity", "io", "kind", "model", "tool", "usage"]

SETTING = ("Genkit's genkit:input / genkit:output span attributes, written on every action (not redacted by the "
           "exporter, as the Google Cloud plugin's disableLoggingInputAndOutput does)")
KIND_KEY = "genkit:type"
CLAIM_KEYS = (KIND_KEY,)  # ``kind`` claims no span without one of these
_SUBTYPE = "genkit:metadata:subtype"
_INPUT, _OUTPUT, _NAME = "genkit:input", "genkit:output", "genkit:name"
_SESSION_KEYS = ("genkit:metadata:agent:sessionId", "genkit:sessionId")
# the spans the intake keeps: actions (each names its action type) and the chat API's turns (they name the session)
KEEP_KEYS = (_SUBTYPE, "genkit:sessionId")
_KINDS = {"model": "llm", "background-model": "llm", "tool": "tool", "tool.v2": "tool", "retriever": "retriever",
          "agent": "agent", "flow": "chain", "executable-prompt": "chain"}


def kind(attrs: Mapping[str, Any]) -> str | None:
    span_type = attrs.get(KIND_KEY)
    if span_type is None:  # not Genkit's: one lookup
        return None
    if span_type == "action":
        return _KINDS.get(attrs.get(_SUBTYPE), "other")
    return "chain" if span_type == "flow" or "genkit:sessionId" in attrs else "other"


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    found = kind(attrs)
    if found == "llm":
        request, response = json_value(attrs.get(_INPUT)), json_value(attrs.get(_OUTPUT))
        inputs = _messages(request.get("messages") if isinstance(request, dict) else None)
        answer = _answer(response)
        outputs = _messages([answer]) if answer is not None else []
    elif found == "chain":
        inputs = value_messages(attrs[_INPUT], "user") if attrs.get(_INPUT) not in (None, "") else []
        outputs = value_messages(attrs[_OUTPUT], "assistant") if attrs.get(_OUTPUT) not in (None, "") else []
    elif found == "agent":
        answer = _answer(json_value(attrs.get(_OUTPUT)))
        inputs, outputs = [], _messages([answer]) if answer is not None else []
    else:
        return [], [], ""
    system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


TOOL_KEYS = (KIND_KEY,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    arguments = json_value(attrs.get(_INPUT))
    call: dict[str, Any] = {"name": text(attrs.get(_NAME) or span["name"]),
                            "arguments": arguments if isinstance(arguments, dict) else {}}
    if attrs.get(_OUTPUT) is not None:
        result = json_value(attrs[_OUTPUT])
        if attrs.get(_SUBTYPE) == "tool.v2" and isinstance(result, dict):  # the multipart envelope
            said = [p["text"] for p in result.get("content") or () if isinstance(p, dict) and isinstance(p.get("text"), str)]
            result = result["output"] if result.get("output") is not None else "\n".join(said)
        call["result"] = text(result)
    return call


DOCUMENT_KEYS = (_SUBTYPE,)  # ``documents`` reads nothing of a span without it


def documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The documents a retriever action returned, as ``{content, id, score}`` (``[]`` for any other span)."""
    if attrs.get(_SUBTYPE) != "retriever":
        return []
    response = json_value(attrs.get(_OUTPUT))
    found = response.get("documents") if isinstance(response, dict) else None
    out = []
    for doc in found if isinstance(found, list) else ():
        if not isinstance(doc, dict):
            continue
        parts = doc.get("content") if isinstance(doc.get("content"), list) else []
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        out.append({"content": "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)),
                    "id": meta.get("id"), "score": meta.get("score")})
    return out


def model(attrs: Mapping[str, Any]) -> Any:
    """The model action a model span ran (``None`` for any other span)."""
    return attrs.get(_NAME) if kind(attrs) == "llm" else None


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(input tokens, output tokens) a model span's response states (``None`` when silent or not a model span)."""
    if kind(attrs) != "llm":
        return None, None
    response = json_value(attrs.get(_OUTPUT))
    said = response.get("usage") if isinstance(response, dict) else None
    return (said.get("inputTokens"), said.get("outputTokens")) if isinstance(said, dict) else (None, None)


def error(attrs: Mapping[str, Any]) -> str | None:
    """An agent turn that failed in band (``finishReason`` ``failed`` in its output, status OK): its error's text."""
    if attrs.get(_SUBTYPE) != "agent":
        return None
    output = json_value(attrs.get(_OUTPUT))
    if not isinstance(output, dict) or output.get("finishReason") != "failed":
        return None
    said = output.get("error")
    if isinstance(said, dict):
        return text(said.get("message") or said.get("status") or said) or "the agent turn failed"
    return text(said) if said not in (None, "") else "the agent turn failed (finishReason failed)"


WHO_KEYS = (_SUBTYPE, "genkit:sessionId")  # ``identity`` reads nothing of a span without one


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    agent = attrs.get(_NAME) if attrs.get(_SUBTYPE) in ("flow", "agent") else None
    session = next((attrs[k] for k in _SESSION_KEYS if attrs.get(k) not in (None, "")), None)
    return {"agent": agent, "session_id": session, "metadata": {}}


def _answer(response: Any) -> Any:
    """The message a ``GenerateResponse`` (or an agent's output) carries: ``message``, else ``candidates[0]``'s."""
    if not isinstance(response, dict):
        return None
    if isinstance(response.get("message"), dict):
        return response["message"]
    candidates = response.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    return first.get("message") if isinstance(first, dict) else None


def _is_context(part: dict[str, Any]) -> bool:
    meta = part.get("metadata")
    return isinstance(meta, dict) and meta.get("purpose") == "context"


def _messages(raw: Any) -> list[Msg]:
    """Genkit's ``MessageData`` list as messages: its ``toolRequest`` / ``toolResponse`` parts as the typed parts
    ``_parse.message`` reads, a tool message of several responses as one tool message each; a context part (the
    retrieved documents written into the prompt) is not the message's text."""
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        parts = []
        for part in item.get("content") if isinstance(item.get("content"), list) else ():
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                if _is_context(part):
                    continue
                parts.append({"type": "text", "content": part["text"]})
            elif isinstance(asked := part.get("toolRequest"), dict):
                parts.append({"type": "tool_call", "name": asked.get("name"), "arguments": asked.get("input"),
                              "id": asked.get("ref")})
            elif isinstance(answered := part.get("toolResponse"), dict):
                result = answered.get("output")
                parts.append({"type": "tool_call_response", "result": result if isinstance(result, str)
                              else text(result), "id": answered.get("ref")})
        responses = [p for p in parts if p["type"] == "tool_call_response"]
        if len(responses) > 1 and len(responses) == len(parts):
            out += [message({"role": "tool", "parts": [p]}, "tool") for p in responses]
        else:
            out.append(message({"role": item.get("role"), "parts": parts}, "user"))
    return out
