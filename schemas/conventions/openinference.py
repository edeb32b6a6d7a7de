"""OpenInference (Arize / Phoenix: ``openinference-instrumentation-openai``, ``-langchain``, ``-llama-index`` ...).

| what | read from |
| --- | --- |
| span kind | ``openinference.span.kind``: ``AGENT`` agent, ``CHAIN`` chain (at the top of a trace, the turn's root), ``LLM``, ``TOOL``, ``RETRIEVER``; the others (``EMBEDDING``, ``RERANKER``, ``PROMPT``, ``GUARDRAIL`` ...) are kept as members, not read |
| messages | ``llm.input_messages.N.message.{role, content, contents.M.message_content.text, tool_call_id, tool_calls.K.tool_call.{id, function.name, function.arguments}}``, ``llm.output_messages.*``; else ``input.value`` / ``output.value`` when they are evidence of words (text, a message list, JSON with a known key: ``messages``, ``input``, ``question``, ``query`` ...); kwargs, state and Python reprs are not |
| what a run was asked | where ``input.value`` says nothing, the tasks a crew's kickoff states it was given (``crew_tasks``: a JSON list of tasks, each ``description`` one user message; CrewAI's kickoff has no ``input.value`` unless it was given template variables) |
| the answer's form | ``llm.invocation_parameters``' ``tool_choice``: a call of the one function the request forced is the model's answer, its arguments the text (``_parse.forced_answer``: function calling as structured output, Instructor's way) |
| model, usage | ``llm.model_name``, ``llm.token_count.prompt`` / ``completion`` |
| contexts | ``retrieval.documents.N.document.{content, id, score}``; LangChain puts id and score in ``document.metadata`` (JSON), read there when the fields are missing |
| a tool span | ``tool.name`` (else the span's name, ``<tool>.__call__``: ``conventions.tool``), ``input.value`` (the call's arguments: ``tool.parameters`` is the tool's schema, never read; inputs of one text value are written as that text, ``A-1001``, no arguments object: the LLM's call gives them), ``output.value`` (a JSON string, ``output.mime_type`` ``application/json``, is the text it holds; the JS instrumentation's ``{"output": <serialized ToolMessage>}`` its content), ``tool_call.id``; its error from the span status or ``exception`` event |
| who | agent ``agent.name``; session ``session.id``; ``user.id`` and the ``metadata`` JSON object as turn metadata |
| content off | ``OPENINFERENCE_HIDE_INPUTS`` / ``OPENINFERENCE_HIDE_OUTPUTS`` (or ``..._HIDE_INPUT_MESSAGES`` / ``..._OUTPUT_MESSAGES``) set |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import (
    Io,
    Msg,
    forced_answer,
    indexed,
    json_value,
    key_marks,
    keys_start,
    msg,
    result_text,
    role,
    text,
    tool_call,
    value_messages,
)

__all__ = ["CLAIM_KEYS", "DOCUMENT_KEYS", "IO_KEYS", "SETTING", "TOOL_KEYS", "WHO_KEYS", "documents", "identity", "io",
           "kind", "tool"]

SETTING = "OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS unset"
_KINDS = {"AGENT": "agent", "CHAIN": "chain", "LLM": "llm", "TOOL": "tool", "RETRIEVER": "retriever"}
CLAIM_KEYS = ("openinference.span.kind",)  # ``kind`` claims no span without one of these


def kind(attrs: Mapping[str, Any]) -> str | None:
    value = str(attrs.get("openinference.span.kind", "")).upper()
    if not value:
        return None
    return _KINDS.get(value, "other")


_MESSAGE_MARKS = key_marks("llm.input_messages.", "llm.output_messages.")  # what the message lists' keys start with
# the keys ``io`` reads (the message lists' groups, the span's input and output values, a crew's tasks): it is asked of
# no span with none of them (``conventions.gates``); the request's parameters matter only beside output messages
IO_KEYS = ("llm.input_messages.", "llm.output_messages.", "input.value", "output.value", "crew_tasks")


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    if keys_start(attrs, _MESSAGE_MARKS):  # one look at the keys for both lists: most spans have neither
        inputs = _messages(attrs, "llm.input_messages", "user")
        outputs = _messages(attrs, "llm.output_messages", "assistant")
        if outputs and attrs.get("llm.invocation_parameters"):
            outputs = forced_answer(outputs, attrs["llm.invocation_parameters"])
    else:
        inputs, outputs = [], []
    if not inputs and attrs.get("input.value") not in (None, ""):
        inputs = value_messages(attrs["input.value"], "user")
    if not inputs and attrs.get("crew_tasks"):
        inputs = _tasks(attrs["crew_tasks"])
    if not outputs and attrs.get("output.value") not in (None, ""):
        outputs = value_messages(attrs["output.value"], "assistant")
    return inputs, outputs, ""


DOCUMENT_KEYS = ("retrieval.documents.",)  # what every key ``documents`` reads starts with (a prefix: it ends in ".")


def documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    docs = []
    for group in indexed(attrs, "retrieval.documents"):
        meta = json_value(group.get("document.metadata"))
        meta = meta if isinstance(meta, dict) else {}
        docs.append({"content": group.get("document.content"),
                     "id": group.get("document.id", meta.get("id", meta.get("doc_id", meta.get("source")))),
                     "score": group.get("document.score", meta.get("score", meta.get("relevance_score")))})
    return docs


# ``tool`` reads nothing of a span without one of these (``conventions.gates``)
TOOL_KEYS = ("tool.name", "openinference.span.kind")


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if "tool.name" not in attrs and kind(attrs) != "tool":
        return None
    call = tool_call(attrs.get("tool.name") or span["name"], attrs.get("input.value"), attrs.get("tool_call.id"))
    output = attrs.get("output.value")
    if output is not None:
        if (attrs.get("output.mime_type") == "application/json" and isinstance(output, str) and output[:1] == '"'
                and isinstance(said := json_value(output), str)):
            output = said  # a tool's text result written as JSON (a quoted string): the text it holds
        call["result"] = result_text(output)
    return call


WHO_KEYS = ("metadata", "user.id", "agent.name", "session.id")  # the keys ``identity`` reads


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    metadata = _metadata(attrs.get("metadata"))
    if attrs.get("user.id") not in (None, ""):
        metadata["user.id"] = text(attrs["user.id"])
    return {"agent": attrs.get("agent.name"), "session_id": attrs.get("session.id"), "metadata": metadata}


_METADATA: dict[str, dict[str, str]] = {}  # the ``metadata`` texts read (``_metadata``), by their text
_METADATA_MAX = 1024  # texts remembered; past it, forgotten at once and learnt again
_METADATA_TEXT_MAX = 4096  # characters of a text past which it is not remembered: a sender's long metadata would
# otherwise hold memory no sender should set (1024 texts of 4096 characters, and what they make, at most)


def _metadata(value: Any) -> dict[str, str]:
    """The ``metadata`` JSON object as turn metadata (``metadata.<key>``: each value as text), a new dict. A function
    of the text alone, so remembered by it: a LangChain run hands its metadata down to the runs under it, and each of
    their spans writes it again (writing its values that are no text as JSON is most of ``identity``'s time)."""
    # a text of a few thousand characters at most (not an object an exporter wrote as one: read each time)
    remembered = value.__class__ is str and len(value) <= _METADATA_TEXT_MAX
    found = _METADATA.get(value) if remembered else None
    if found is None:
        meta = json_value(value)
        found = {f"metadata.{k}": text(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
        if not remembered:
            return found
        if len(_METADATA) >= _METADATA_MAX:
            _METADATA.clear()
        _METADATA[value] = found
    return dict(found)


def _messages(attrs: Mapping[str, Any], prefix: str, default_role: str) -> list[Msg]:
    out = []
    for group in indexed(attrs, prefix):
        content = group.get("message.content")
        if content is None:
            parts = indexed(group, "message.contents")
            content = "\n".join(text(p["message_content.text"]) for p in parts if "message_content.text" in p)
        calls = [tool_call(c.get("tool_call.function.name"), c.get("tool_call.function.arguments"),
                           c.get("tool_call.id")) for c in indexed(group, "message.tool_calls")]
        out.append(msg(role(group.get("message.role"), default_role), text(content), calls,
                       group.get("message.tool_call_id")))
    return out


def _tasks(value: Any) -> list[Msg]:
    """The tasks a span states it was given (``crew_tasks``: a JSON list of objects), each task's ``description`` as
    a user message: the words the agents were asked, before the framework builds its prompt around them."""
    parsed = json_value(value)
    if not isinstance(parsed, list):
        return []
    return [msg("user", task["description"]) for task in parsed
            if isinstance(task, dict) and isinstance(task.get("description"), str) and task["description"].strip()]
