"""The OpenTelemetry GenAI semantic conventions (``opentelemetry-instrumentation-openai-v2``, ``-google-genai``, the
``opentelemetry-util-genai`` family, and any agent that sets the attributes itself), current and older.

| what | read from |
| --- | --- |
| span kind | ``gen_ai.operation.name``: ``invoke_agent`` / ``create_agent`` agent, ``invoke_workflow`` (a workflow of agents and tools run as one: OpenLIT's span around a LangGraph graph's or an OpenAI Agents SDK trace's run, named by ``gen_ai.workflow.name``) agent, and so is a span that names a workflow but no operation (OpenLIT sets the operation only when the graph returns: a failed run's span has none), ``execute_tool`` tool, ``retrieval`` retriever, ``chat`` / ``text_completion`` / ``generate_content`` / ``completion`` LLM; an operation the spec does not list is read by its words (``agent.run`` an agent, ``execute_task`` an agent's run of the task it is given, Strands' ``invoke_swarm`` / ``invoke_graph`` an agent run: agents run together on one request, ``tool.execute`` a tool, ``...generation`` an LLM call, anything else other); no operation: message attributes or events make an LLM span |
| messages, current | ``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions`` (JSON messages of typed parts: ``text``, ``tool_call`` with its id, ``tool_call_response``) |
| messages, as events | span events or log records ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message`` (``tool_calls``), ``gen_ai.tool.message`` (``id``), ``gen_ai.choice``; ``gen_ai.content.prompt`` / ``gen_ai.content.completion``; ``gen_ai.client.inference.operation.details`` (attached by ``schemas.spans.attach_logs``) |
| messages, oldest | ``gen_ai.prompt`` / ``gen_ai.completion`` (JSON messages, or indexed ``.N.role`` / ``.N.content`` / ``.N.tool_calls.K.*`` / ``.N.function_call.*``), also where the current attributes are there but say nothing (messages with no text and no tool call) |
| contexts | ``gen_ai.retrieval.documents`` (JSON: ``content`` / ``text``, ``id``, ``score``) |
| a tool span | ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` (Google ADK writes ``<not specified>`` where it knows none, a failed call's: no id), ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result`` (JSON on a span, as the conventions record it: a text result may be the JSON text of that string, MLflow's GenAI export writes every result so, and is read as the text it holds), or as the older events on the span: ``gen_ai.tool.message`` (``content`` = the arguments) and ``gen_ai.choice`` (``message`` = the result); its error from the span status and ``error.type`` |
| content blocks | a message's ``content`` (or a choice's ``message``) as the JSON text of a list of blocks (``[{"text": ...}]``, ``{"toolUse": ...}``, ``{"toolResult": ...}``) is read as those parts; a choice's ``message`` as plain text is the message's text (Strands Agents' default spans) |
| who | agent ``gen_ai.agent.name``, else its id ``gen_ai.agent.id`` (on one span, a name any convention states wins over an id: ``conventions.identity``); session ``gen_ai.conversation.id`` |
| response | ``gen_ai.response.id``, a model call's id, which a Responses API conversation id may name (``schemas.chains``) |
| content off | ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` unset (the default); or the content captured as log records that were never exported to the intake (``SETTING`` names both). The value named is one every instrumentation of these conventions obeys: ``span_only`` with ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` (the ``opentelemetry-util-genai`` family, ``opentelemetry-instrumentation-genai-*``, reads only ``span_only`` / ``event_only`` / ``span_and_event`` and takes ``true`` as no content; the older ``-openai-v2`` reads ``span_only`` under the opt-in). A framework whose own telemetry writes these conventions has a switch of its own, known by the instrumentation scope it writes under (``SCOPE_SETTINGS``): Semantic Kernel's sensitive-diagnostics variable, Microsoft Agent Framework's ``enable_sensitive_telemetry()`` |
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ._parse import (
    Io,
    Msg,
    indexed,
    json_messages,
    json_value,
    message,
    msg,
    result_text,
    role,
    text,
    tool_call,
)

__all__ = ["AGENT_ID", "DOCUMENT_KEYS", "INPUT_EVENTS", "IO_KEYS", "LLM_OPERATIONS", "OPERATIONS", "RESPONSE_ID",
           "SCOPE_SETTINGS", "SETTING", "TOOL_KEYS", "WHO_KEYS", "documents", "identity", "io", "kind", "tool"]

SETTING = ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only with "
           "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (the opentelemetry-instrumentation-genai-* "
           "packages take span_only, event_only or span_and_event and read true as off); content sent as log records "
           "reaches vigil only with the logs exported to the intake too")
_SK_SETTING = ("SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true (with "
               "..._DIAGNOSTICS=true), with its logs exported to the intake too: the messages travel as log records")
# (instrumentation scope prefix, the setting that turns its message content on): frameworks writing these conventions
SCOPE_SETTINGS = (("semantic_kernel", _SK_SETTING), ("Microsoft.SemanticKernel", _SK_SETTING),
                  ("agent_framework", "enable_sensitive_telemetry() (agent_framework.observability), or "
                                      "ENABLE_SENSITIVE_DATA=true"))
INPUT_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
OUTPUT_EVENTS = frozenset({"gen_ai.choice", "gen_ai.content.prompt", "gen_ai.content.completion"})
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_MESSAGE_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion")


def kind(attrs: Mapping[str, Any], event_names: Iterable[str]) -> str | None:
    operation = attrs.get("gen_ai.operation.name", "")
    if operation.__class__ is str and operation in OPERATIONS:  # as the spec spells it (most spans): no lowering
        return OPERATIONS[operation]
    operation = str(operation).lower()
    if operation:
        return OPERATIONS.get(operation) or _by_words(operation)
    if _WORKFLOW in attrs:  # a workflow's run that failed before its operation was set (OpenLIT's LangGraph)
        return "agent"
    for key in attrs:  # loops, not generators: every span no mapper before this one claims is asked
        if key.startswith(_MESSAGE_KEYS):
            return "llm"
    for name in event_names:
        if name in INPUT_EVENTS or name in OUTPUT_EVENTS:
            return "llm"
    return None


_WORKFLOW = "gen_ai.workflow.name"
OPERATIONS = {"invoke_agent": "agent", "create_agent": "agent", "invoke_workflow": "agent", "execute_tool": "tool",
              "retrieval": "retriever", **dict.fromkeys(LLM_OPERATIONS, "llm")}


def _by_words(operation: str) -> str:
    """An operation the spec does not list, read by its words (``agent.run``, ``tool.execute``, ``generation``; the
    agentic proposal's ``execute_task``, a task being the work an agent is given: OpenLIT's pydantic-ai run)."""
    words = set(re.split(r"[^a-z]+", operation))
    if words & {"agent", "task"}:  # a task is the work an agent is given: its run (``execute_task``)
        return "agent"
    if words & {"swarm", "graph"}:  # agents run together on one request (Strands' ``invoke_swarm``, ``invoke_graph``)
        return "agent"
    if "tool" in words:
        return "tool"
    if words & {"retrieval", "retrieve"}:
        return "retriever"
    if words & {"chat", "completion", "generate", "generation"}:
        return "llm"
    return "other"


_INPUT, _OUTPUT = _MESSAGE_KEYS[:2]  # the current attributes, looked up first: a model call's span has them
_SYSTEM = "gen_ai.system_instructions"
# the keys ``io`` reads (and the ``prefix.N.rest`` groups of the older flat messages), beside the span's events: it is
# asked of no span with none of them and no event (``conventions.gates``)
IO_KEYS = (*_MESSAGE_KEYS, _SYSTEM, "gen_ai.prompt.", "gen_ai.completion.")


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    events = span.get("events")
    system = _system_instructions(attrs[_SYSTEM]) if _SYSTEM in attrs else ""
    inputs = json_messages(attrs.get(_INPUT), "user") or _json_messages(attrs, "gen_ai.prompt", "user")
    outputs = json_messages(attrs.get(_OUTPUT), "assistant") or _json_messages(attrs, "gen_ai.completion", "assistant")
    if not _says_anything(inputs):
        inputs = _flat_indexed(attrs, "gen_ai.prompt", "user") or inputs
    if not _says_anything(outputs):
        outputs = _flat_indexed(attrs, "gen_ai.completion", "assistant") or outputs
    if not inputs or not outputs:
        event_in, event_out = _event_messages(events or ())
        inputs, outputs = inputs or event_in, outputs or event_out
    return inputs, outputs, system


_DOCUMENTS = "gen_ai.retrieval.documents"
DOCUMENT_KEYS = (_DOCUMENTS,)  # the key ``documents`` reads


def documents(attrs: Mapping[str, Any]) -> list[Any]:
    docs = json_value(attrs.get(_DOCUMENTS))
    return docs if isinstance(docs, list) else []


_NO_ID = "<not specified>"  # Google ADK's tool call id where it knows none


# ``tool`` reads nothing of a span without one of these (``conventions.gates``)
TOOL_KEYS = ("gen_ai.tool.name", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    name = attrs.get("gen_ai.tool.name")
    if name is None and "gen_ai.tool.call.arguments" not in attrs and "gen_ai.tool.call.result" not in attrs:
        return None
    arguments, result = attrs.get("gen_ai.tool.call.arguments"), attrs.get("gen_ai.tool.call.result")
    for event in span.get("events") or ():  # the call as the older events on its span (Strands)
        event_attrs = event.get("attributes") or {}
        if event["name"] == "gen_ai.tool.message" and arguments is None:
            arguments = event_attrs.get("content")
        elif event["name"] == "gen_ai.choice" and result is None and event_attrs.get("message") is not None:
            result = message({"content": json_value(event_attrs["message"])}, "tool")["content"]
    call_id = attrs.get("gen_ai.tool.call.id")
    call = tool_call(name or span["name"], arguments, None if call_id == _NO_ID else call_id)
    if result is not None:
        if result.__class__ is str and result[:1] == '"' and (said := json_value(result)).__class__ is str:
            result = said  # a result is JSON on a span: a text result written as JSON is the text it holds
        call["result"] = result_text(result)
    return call


_AGENT, _SESSION = "gen_ai.agent.name", "gen_ai.conversation.id"
AGENT_ID = "gen_ai.agent.id"  # the agent when nothing names it (``conventions.identity``)
RESPONSE_ID = "gen_ai.response.id"
WHO_KEYS = (_AGENT, _SESSION, AGENT_ID)  # the keys ``identity`` reads


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {"agent": attrs.get(_AGENT), "session_id": attrs.get(_SESSION)}


def _json_messages(attrs: Mapping[str, Any], key: str, default_role: str) -> list[Msg]:
    return json_messages(attrs.get(key), default_role)


def _says_anything(messages: list[Msg]) -> bool:
    """Whether messages hold any text or tool call: a list of empty messages (LiteLLM's ``gen_ai.output.messages``
    of a call that answered only tool calls: ``"parts": []``) says nothing, and loses to the flat attributes."""
    for m in messages:
        if m["content"] or m["tool_calls"]:
            return True
    return False


def _flat_indexed(attrs: Mapping[str, Any], prefix: str, default_role: str) -> list[Msg]:
    """``gen_ai.prompt.0.role`` / ``.0.content`` / ``.0.tool_calls.0.name`` as OpenLLMetry's older versions write;
    ``.N.function_call.name`` / ``.arguments`` (OpenAI's older function calling) is a tool call of message N (LiteLLM
    writes each tool call of its answer so, one N each)."""
    out = []
    for group in indexed(attrs, prefix):
        calls = [tool_call(c.get("name"), c.get("arguments"), c.get("id")) for c in indexed(group, "tool_calls")]
        if group.get("function_call.name"):
            calls.append(tool_call(group["function_call.name"], group.get("function_call.arguments")))
        out.append(msg(role(group.get("role"), default_role), text(group.get("content", "")), calls,
                       group.get("tool_call_id")))
    return out


def _event_messages(events: Iterable[Mapping[str, Any]]) -> tuple[list[Msg], list[Msg]]:
    """The older GenAI events, recorded as span events (or log records attached to their span), in time order."""
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    for event in sorted(events, key=lambda e: e.get("time", 0)):
        name, attrs = event["name"], event.get("attributes") or {}
        body = json_value(attrs.get("gen_ai.event.content"))
        body = body if isinstance(body, dict) else {}
        if name in INPUT_EVENTS:
            raw = {"role": attrs.get("role", INPUT_EVENTS[name]),
                   "content": attrs.get("content", body.get("content", "")),
                   "tool_calls": attrs.get("tool_calls", body.get("tool_calls")),
                   "tool_call_id": attrs.get("id", body.get("id"))}
            inputs.append(message(raw, INPUT_EVENTS[name]))
        elif name == "gen_ai.choice":
            raw = json_value(attrs.get("message", body.get("message")))
            if isinstance(raw, (list, str)) and raw != "":  # its content blocks, or its plain text (Strands)
                raw = {"content": raw}
            if not isinstance(raw, dict):
                raw = {"content": attrs.get("content", body.get("content", ""))}
            if not raw.get("tool_calls") and attrs.get("tool_calls", body.get("tool_calls")):
                raw = {**raw, "tool_calls": attrs.get("tool_calls", body.get("tool_calls"))}  # beside the message
            outputs.append(message({"role": "assistant", **raw}, "assistant"))
        elif name == "gen_ai.content.prompt" and "gen_ai.prompt" in attrs:
            inputs.extend(_json_messages(attrs, "gen_ai.prompt", "user"))
        elif name == "gen_ai.content.completion" and "gen_ai.completion" in attrs:
            outputs.extend(_json_messages(attrs, "gen_ai.completion", "assistant"))
    return inputs, outputs


def _system_instructions(raw: Any) -> str:
    if raw is None:
        return ""
    parsed = json_value(raw)
    if isinstance(parsed, list):
        return "\n".join(text(p.get("content", p.get("text", ""))) if isinstance(p, dict) else str(p) for p in parsed)
    if isinstance(parsed, dict):
        return text(parsed.get("content", parsed.get("text", "")))
    return parsed if isinstance(parsed, str) else ""
