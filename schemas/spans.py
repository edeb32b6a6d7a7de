"""Whole traces become turns: the one place where spans (OTLP over ``vigil intake``, or the in-process
``producers.GenAISpanProcessor``) are read as agent turns.

Input: the spans of one trace as plain records (``SpanRecord``: hex ids, nanosecond times, flat attributes, span
events, resource attributes). Output: turn dicts shaped like ``schemas.Turn`` (validated later, by the worker).

**Which spans make a turn.** One turn per *agent root*: an agent span (``gen_ai.operation.name = invoke_agent``,
OpenInference ``AGENT``) with no agent above it, or an OpenInference ``CHAIN`` with no parent in the trace. A trace
without agent roots makes one turn per top-level LLM span (no LLM above it), so a trace with a single LLM span is one
turn. Everything under the root belongs to its turn: the root gives the question and the final answer (else the first
LLM call's input and the last LLM call's output); the last LLM call gives the system prompt (unless the root has one),
the model and the token usage; retriever spans give the contexts, in start order; tool spans give the tool calls
(else the tool calls in the LLM outputs). The turn keeps the root's trace id and span id: assembling the same trace
again, with spans that arrived late, gives the same turn id, so its row and its scores are replaced, not duplicated.

**Conventions read**, per span, first match wins: current GenAI (``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.system_instructions``: JSON messages made of typed parts); ``gen_ai.prompt`` /
``gen_ai.completion`` (text, JSON, or indexed ``.N.role`` / ``.N.content``); the older GenAI span events
(``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
``gen_ai.choice``, and ``gen_ai.content.prompt`` / ``gen_ai.content.completion``); OpenInference
(``llm.input_messages.N.message.*``, ``llm.output_messages.N.message.*``, else ``input.value`` / ``output.value``;
``llm.model_name``, ``llm.token_count.*``, ``retrieval.documents.N.document.{content,id,score}``, ``tool.*``).
Agent name: ``gen_ai.agent.name``, ``agent.name``, else the resource's ``service.name``; session:
``gen_ai.conversation.id`` or ``session.id``; environment: the resource's ``deployment.environment[.name]``;
project: the resource's ``vigil.project``; reference answer (ground truth for ``rag_correctness``: replayed or test
traffic knows one, live traffic seldom does): ``vigil.reference`` on any of the turn's spans; origin: ``vigil.origin``
on any of the turn's spans (an agent sets it from vigil's ``X-Vigil-Origin`` header: ``vigil.producers.origin_of``), so
vigil's own traffic is never sampled.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from vigil.schemas.trace import ORIGIN_ATTRIBUTE, ORIGINS

__all__ = ["CONTENT_EVENTS", "DETAILS_EVENT", "RESOURCE_KEYS", "SpanEvent", "SpanRecord", "assemble", "attach_logs", "is_genai",
           "log_record"]

# The resource attributes assembly reads; a receiver may keep only these.
RESOURCE_KEYS = frozenset({"service.name", "deployment.environment.name", "deployment.environment", "vigil.project"})


class SpanEvent(TypedDict):
    name: str
    time: int
    attributes: dict[str, Any]


class SpanRecord(TypedDict):
    """One span as vigil keeps it: JSON data, ids in lowercase hex, times in nanoseconds since the epoch."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: NotRequired[list[SpanEvent]]
    resource: NotRequired[dict[str, Any]]
    log: NotRequired[bool]  # a log record's event for span ``span_id``, not a span (``log_record``)


REFERENCE_ATTRIBUTE = "vigil.reference"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"  # a call's inputs, outputs and instructions, as one event
_ROLES = {"developer": "system", "human": "user", "ai": "assistant", "model": "assistant", "function": "tool",
          "system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
_INPUT_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                 "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
# The GenAI events assembly reads (as span events, or as log records sent to the intake's /v1/logs).
CONTENT_EVENTS = frozenset({*_INPUT_EVENTS, "gen_ai.choice", "gen_ai.content.prompt", "gen_ai.content.completion",
                            DETAILS_EVENT})
_GENAI_PREFIXES = ("gen_ai.", "llm.", "input.value", "output.value", "retrieval.", "openinference.", "tool.")
_LLM_OPERATIONS = {"chat", "text_completion", "generate_content", "completion"}


def is_genai(attributes: Mapping[str, Any], event_names: Iterable[str] = ()) -> bool:
    """Whether a span carries anything this module reads (cheap: key prefixes and event names only)."""
    return any(key.startswith(_GENAI_PREFIXES) for key in attributes) or any(
        name.startswith("gen_ai.") for name in event_names)


def assemble(spans: Iterable[SpanRecord]) -> list[dict[str, Any]]:
    """The turns in one trace's spans (a span id seen twice counts once: the last copy wins). Log records
    (``log_record``) are attached to their spans first (``attach_logs``)."""
    by_id: dict[str, SpanRecord] = {}
    logs: list[SpanRecord] = []
    for span in spans:
        if span.get("log"):
            logs.append(span)
        else:
            by_id[span["span_id"]] = span
    by_id = attach_logs(by_id, logs)
    children: dict[str | None, list[SpanRecord]] = defaultdict(list)
    for span in by_id.values():
        parent = span.get("parent_id")
        children[parent if parent in by_id else None].append(span)
    kinds = {span_id: _kind(span, span.get("parent_id") not in by_id) for span_id, span in by_id.items()}

    roots = _roots(children, kinds, ("agent",))
    if not roots:
        roots = _roots(children, kinds, ("llm",))
    turns = []
    for root in sorted(roots, key=lambda s: s["start"]):
        members = sorted(_descendants(root, children), key=lambda s: (s["start"], s["end"]))
        turn = _turn(root, kinds[root["span_id"]], members, kinds)
        if turn is not None:
            turns.append(turn)
    return turns


def log_record(trace_id: str, span_id: str, event: SpanEvent, resource: dict[str, Any]) -> SpanRecord:
    """A GenAI event that came as an OpenTelemetry log record (the GenAI conventions' events: message content in
    ``gen_ai.user.message`` / ``gen_ai.choice`` ..., or all of a call's in ``DETAILS_EVENT``), kept with its trace's
    spans: a span-shaped record marked ``log`` that ``assemble`` attaches to its span."""
    return {"trace_id": trace_id, "span_id": span_id, "parent_id": None, "name": event["name"],
            "start": event["time"], "end": event["time"], "attributes": {}, "events": [event], "resource": resource,
            "log": True}


def attach_logs(by_id: dict[str, SpanRecord], logs: Iterable[SpanRecord]) -> dict[str, SpanRecord]:
    """Spans with their log records' events added (an event delivered twice counts once). The attributes of a
    ``gen_ai.client.inference.operation.details`` event fill in what its span does not say itself. A log record
    whose span never arrived stands in for it: a span of its own, at the top of the trace."""
    events: dict[str, list[SpanEvent]] = defaultdict(list)
    stand_ins: dict[str, SpanRecord] = {}
    for log in logs:
        events[log["span_id"]].extend(log.get("events") or ())
        stand_ins.setdefault(log["span_id"], log)
    if not events:
        return by_id
    out = dict(by_id)
    for span_id, added in events.items():
        span = out.get(span_id)
        if span is None:
            first = stand_ins[span_id]
            times = [e["time"] for e in added if e.get("time")] or [first["start"]]
            span = {**first, "name": "log events", "start": min(times), "end": max(times), "events": []}
            span.pop("log", None)
        seen, merged = set(), []
        for event in [*(span.get("events") or ()), *added]:
            key = (event["name"], event.get("time"), json.dumps(event.get("attributes"), sort_keys=True, default=str))
            if key not in seen:
                seen.add(key)
                merged.append(event)
        attributes = dict(span["attributes"])
        for event in merged:
            if event["name"] == DETAILS_EVENT:
                for key, value in (event.get("attributes") or {}).items():
                    attributes.setdefault(key, value)
        out[span_id] = {**span, "attributes": attributes, "events": merged}
    return out


def _roots(children: Mapping[str | None, list[SpanRecord]], kinds: Mapping[str, str], wanted: tuple[str, ...]):
    """The spans of a wanted kind with no span of that kind above them (walked from the trace's top)."""
    found, stack = [], list(children.get(None, []))
    while stack:
        span = stack.pop()
        if kinds[span["span_id"]] in wanted:
            found.append(span)
            continue
        stack.extend(children.get(span["span_id"], []))
    return found


def _descendants(root: SpanRecord, children: Mapping[str | None, list[SpanRecord]]) -> list[SpanRecord]:
    out, stack = [], list(children.get(root["span_id"], []))
    while stack:
        span = stack.pop()
        out.append(span)
        stack.extend(children.get(span["span_id"], []))
    return out


def _kind(span: SpanRecord, at_top: bool) -> str:
    attrs = span["attributes"]
    operation = str(attrs.get("gen_ai.operation.name", "")).lower()
    openinference = str(attrs.get("openinference.span.kind", "")).upper()
    if operation == "invoke_agent" or openinference == "AGENT":
        return "agent"
    if openinference == "CHAIN" and at_top:
        return "agent"
    if openinference == "RETRIEVER" or operation == "retrieval" or any(
            k.startswith("retrieval.documents.") for k in attrs):
        return "retriever"
    if openinference == "TOOL" or operation == "execute_tool":
        return "tool"
    if openinference == "LLM" or operation in _LLM_OPERATIONS:
        return "llm"
    if openinference or operation:
        return "other"
    events = [e["name"] for e in span.get("events") or ()]
    if any(key.startswith(("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion",
                           "llm.input_messages", "llm.output_messages")) for key in attrs) or any(
            name in _INPUT_EVENTS or name in {"gen_ai.choice", "gen_ai.content.prompt", "gen_ai.content.completion"}
            for name in events):
        return "llm"
    return "other"


# -- one turn ----------------------------------------------------------------------------------------------------


def _turn(root: SpanRecord, kind: str, members: list[SpanRecord], kinds: Mapping[str, str]) -> dict[str, Any] | None:
    llms = [s for s in members if kinds[s["span_id"]] == "llm"]
    if kind == "llm":
        llms = [root, *llms]
    last_llm = max(llms, key=lambda s: s["end"]) if llms else None
    first_llm = min(llms, key=lambda s: s["start"]) if llms else None

    root_in, root_out, root_system = _io(root)
    input_messages = root_in or (_io(first_llm)[0] if first_llm is not None else [])
    output_messages = root_out or (_io(last_llm)[1] if last_llm is not None else [])
    system = root_system or (_io(last_llm)[2] if last_llm is not None else "")
    if not system:
        system = "\n".join(m["content"] for m in input_messages if m["role"] == "system" and m["content"])
    output = "\n".join(m["content"] for m in output_messages if m["role"] == "assistant" and m["content"])
    if not input_messages and not output:
        return None

    attrs, resource = root["attributes"], root.get("resource") or {}
    everyone = [root, *members]
    turn: dict[str, Any] = {
        "trace_id": root["trace_id"],
        "span_id": root["span_id"],
        "input": [{"role": m["role"], "content": m["content"]} for m in input_messages],
        "output": output,
        "started_at": _iso(root["start"]),
    }
    if root["end"]:
        turn["ended_at"] = _iso(root["end"])
    if system:
        turn["system"] = system
    agent = _first(everyone, "gen_ai.agent.name", "agent.name")
    service = resource.get("service.name")
    if not agent and isinstance(service, str) and not service.startswith("unknown_service"):
        agent = service
    optional = {
        "agent": agent,
        "session_id": _first(everyone, "gen_ai.conversation.id", "session.id"),
        "environment": resource.get("deployment.environment.name") or resource.get("deployment.environment"),
        "project": resource.get("vigil.project"),
        "reference": _first(everyone, REFERENCE_ATTRIBUTE),
    }
    origin = _first(everyone, ORIGIN_ATTRIBUTE)
    if origin in ORIGINS:
        optional["origin"] = origin
    if last_llm is not None:
        llm_attrs = last_llm["attributes"]
        optional["model"] = (llm_attrs.get("gen_ai.response.model") or llm_attrs.get("gen_ai.request.model")
                             or llm_attrs.get("llm.model_name"))
        usage = _usage(llm_attrs)
        if usage:
            turn["usage"] = usage
    turn.update({key: str(value) for key, value in optional.items() if value})

    contexts = [doc for span in everyone for doc in _documents(span["attributes"])]
    if contexts:
        turn["contexts"] = contexts
    tools = [_tool_call(s) for s in members if kinds[s["span_id"]] == "tool"]
    if not tools:
        tools = [call for m in output_messages for call in m["tool_calls"]]
        tools += [call for s in llms if s is not last_llm and s is not root for call in _tool_calls_of(s)]
    if tools:
        turn["tool_calls"] = tools

    metadata = {"span_name": root["name"]}
    source = last_llm["attributes"] if last_llm is not None else attrs
    for name, key in (("operation", "gen_ai.operation.name"), ("provider", "gen_ai.provider.name"),
                      ("system", "gen_ai.system"), ("response_id", "gen_ai.response.id"),
                      ("span_kind", "openinference.span.kind")):
        value = attrs.get(key, source.get(key))
        if value is not None:
            metadata[name] = str(value)
    metadata["spans"] = str(len(everyone))
    turn["metadata"] = metadata
    return turn


def _first(spans: list[SpanRecord], *keys: str) -> Any:
    for span in spans:
        for key in keys:
            value = span["attributes"].get(key)
            if value not in (None, ""):
                return value
    return None


def _tool_calls_of(span: SpanRecord) -> list[dict[str, Any]]:
    return [call for m in _io(span)[1] for call in m["tool_calls"]]


# -- messages, whichever convention ------------------------------------------------------------------------------

Msg = dict[str, Any]  # {"role", "content", "tool_calls"}


def _io(span: SpanRecord) -> tuple[list[Msg], list[Msg], str]:
    """(input messages, output messages, system instructions) of one span."""
    attrs = span["attributes"]
    system = _system_instructions(attrs.get("gen_ai.system_instructions"))
    inputs = _json_messages(attrs, "gen_ai.input.messages", "user") or _json_messages(attrs, "gen_ai.prompt", "user")
    outputs = (_json_messages(attrs, "gen_ai.output.messages", "assistant")
               or _json_messages(attrs, "gen_ai.completion", "assistant"))
    if not inputs:
        inputs = _flat_indexed(attrs, "gen_ai.prompt", "user")
    if not outputs:
        outputs = _flat_indexed(attrs, "gen_ai.completion", "assistant")
    if not inputs or not outputs:
        event_in, event_out = _event_messages(span.get("events") or ())
        inputs, outputs = inputs or event_in, outputs or event_out
    if not inputs:
        inputs = _openinference_messages(attrs, "llm.input_messages", "user")
    if not outputs:
        outputs = _openinference_messages(attrs, "llm.output_messages", "assistant")
    if not inputs and attrs.get("input.value") not in (None, ""):
        inputs = _value_messages(attrs["input.value"], "user")
    if not outputs and attrs.get("output.value") not in (None, ""):
        outputs = _value_messages(attrs["output.value"], "assistant")
    if not system:
        system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


def _json_messages(attrs: Mapping[str, Any], key: str, role: str) -> list[Msg]:
    raw = attrs.get(key)
    if raw in (None, ""):
        return []
    parsed = _json(raw)
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return [_msg(role, str(raw))]
    return [_message(m, role) for m in parsed]


def _flat_indexed(attrs: Mapping[str, Any], prefix: str, role: str) -> list[Msg]:
    """``gen_ai.prompt.0.role`` / ``gen_ai.prompt.0.content`` as some instrumentations write them."""
    groups = _indexed(attrs, prefix)
    return [_msg(_role(g.get("role"), role), _text(g.get("content", ""))) for g in groups]


def _openinference_messages(attrs: Mapping[str, Any], prefix: str, role: str) -> list[Msg]:
    out = []
    for group in _indexed(attrs, prefix):
        content = group.get("message.content")
        if content is None:
            parts = _indexed(group, "message.contents")
            content = "\n".join(_text(p["message_content.text"]) for p in parts if "message_content.text" in p)
        calls = []
        for call in _indexed(group, "message.tool_calls"):
            arguments = _json(call.get("tool_call.function.arguments"))
            calls.append({"name": str(call.get("tool_call.function.name", "")),
                          "arguments": arguments if isinstance(arguments, dict) else {}})
        out.append(_msg(_role(group.get("message.role"), role), _text(content), calls))
    return out


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` keys grouped by N (in N order), each group keyed by ``rest``."""
    groups: dict[int, dict[str, Any]] = {}
    head = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(head):
            continue
        index, _, rest = key[len(head):].partition(".")
        if index.isdigit() and rest:
            groups.setdefault(int(index), {})[rest] = value
    return [groups[i] for i in sorted(groups)]


def _event_messages(events: Iterable[SpanEvent]) -> tuple[list[Msg], list[Msg]]:
    """The older GenAI events, recorded as span events, in time order."""
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    for event in sorted(events, key=lambda e: e.get("time", 0)):
        name, attrs = event["name"], event.get("attributes") or {}
        body = _json(attrs.get("gen_ai.event.content"))
        body = body if isinstance(body, dict) else {}
        if name in _INPUT_EVENTS:
            message = {"role": attrs.get("role", _INPUT_EVENTS[name]),
                       "content": attrs.get("content", body.get("content", "")),
                       "tool_calls": _json(attrs.get("tool_calls", body.get("tool_calls")))}
            inputs.append(_message(message, _INPUT_EVENTS[name]))
        elif name == "gen_ai.choice":
            message = _json(attrs.get("message", body.get("message")))
            if not isinstance(message, dict):
                message = {"content": attrs.get("content", body.get("content", ""))}
            outputs.append(_message({"role": "assistant", **message}, "assistant"))
        elif name == "gen_ai.content.prompt" and "gen_ai.prompt" in attrs:
            inputs.extend(_json_messages(attrs, "gen_ai.prompt", "user"))
        elif name == "gen_ai.content.completion" and "gen_ai.completion" in attrs:
            outputs.extend(_json_messages(attrs, "gen_ai.completion", "assistant"))
    return inputs, outputs


def _value_messages(value: Any, role: str) -> list[Msg]:
    """OpenInference ``input.value`` / ``output.value``: text, or JSON holding messages or a text field."""
    parsed = _json(value)
    if isinstance(parsed, dict):
        for key in ("messages", "input", "question", "query", "output", "answer", "content", "text", "result"):
            inner = parsed.get(key)
            if isinstance(inner, list) and inner and all(isinstance(m, dict) for m in inner):
                return [_message(m, role) for m in inner]
            if isinstance(inner, str):
                return [_msg(role, inner)]
    if isinstance(parsed, list) and parsed and all(isinstance(m, dict) and "role" in m for m in parsed):
        return [_message(m, role) for m in parsed]
    return [_msg(role, _text(value))]


def _message(message: Any, role: str) -> Msg:
    """A GenAI message (``parts`` or ``content``, OpenAI-style ``tool_calls``) as {role, content, tool_calls}."""
    if not isinstance(message, dict):
        return _msg(role, _text(message))
    texts, calls = [], []
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    for part in message.get("parts") or (content if isinstance(content, list) else []):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "tool_call":
            arguments = _json(part.get("arguments"))
            calls.append({"name": str(part.get("name", "")), "arguments": arguments if isinstance(arguments, dict) else {}})
        elif kind == "tool_call_response":
            texts.append(_text(part.get("response", part.get("result", ""))))
        elif "content" in part or "text" in part:
            texts.append(_text(part.get("content", part.get("text"))))
    openai_calls = message.get("tool_calls")
    for call in openai_calls if isinstance(openai_calls, list) else []:
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            arguments = _json(function.get("arguments"))
            calls.append({"name": str(function.get("name", "")),
                          "arguments": arguments if isinstance(arguments, dict) else {}})
    return _msg(_role(message.get("role"), role), "\n".join(texts), calls)


def _msg(role: str, content: str, tool_calls: list[dict[str, Any]] | None = None) -> Msg:
    return {"role": role, "content": content, "tool_calls": tool_calls or []}


def _system_instructions(raw: Any) -> str:
    parsed = _json(raw)
    if isinstance(parsed, list):
        return "\n".join(_text(p.get("content", p.get("text", ""))) if isinstance(p, dict) else str(p) for p in parsed)
    if isinstance(parsed, dict):
        return _text(parsed.get("content", parsed.get("text", "")))
    return parsed if isinstance(parsed, str) else ""


# -- contexts, tools, usage --------------------------------------------------------------------------------------


def _documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    docs = []
    for group in _indexed(attrs, "retrieval.documents"):
        docs.append(_document({"content": group.get("document.content"), "id": group.get("document.id"),
                               "score": group.get("document.score")}))
    semconv = _json(attrs.get("gen_ai.retrieval.documents"))
    if isinstance(semconv, list):
        docs.extend(_document(doc) for doc in semconv)
    return [doc for doc in docs if doc["text"]]


def _document(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {"text": _text(doc)}
    content = doc.get("content", doc.get("text"))
    out: dict[str, Any] = {"text": "" if content is None else _text(content)}
    if doc.get("id") is not None:
        out["id"] = str(doc["id"])
    score = doc.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        out["score"] = float(score)
    return out


def _tool_call(span: SpanRecord) -> dict[str, Any]:
    attrs = span["attributes"]
    name = attrs.get("gen_ai.tool.name") or attrs.get("tool.name") or span["name"]
    arguments = _json(attrs.get("gen_ai.tool.call.arguments", attrs.get("tool.parameters", attrs.get("input.value"))))
    result = attrs.get("gen_ai.tool.call.result", attrs.get("output.value"))
    call: dict[str, Any] = {"name": str(name), "arguments": arguments if isinstance(arguments, dict) else {}}
    if result is not None:
        call["result"] = _text(result)
    return call


def _usage(attrs: Mapping[str, Any]) -> dict[str, int]:
    prompt = _first_of(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
    completion = _first_of(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                           "llm.token_count.completion")
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {key: int(value) for key, value in usage.items() if isinstance(value, (int, float)) and value >= 0}


def _first_of(attrs: Mapping[str, Any], *keys: str) -> Any:
    return next((attrs[key] for key in keys if key in attrs), None)


def _role(value: Any, default: str) -> str:
    return _ROLES.get(str(value).lower(), "user") if value else default


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _json(value: Any) -> Any:
    if not isinstance(value, str) or not value[:1] in ("[", "{", '"'):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _iso(nanoseconds: int) -> str:
    return datetime.fromtimestamp(nanoseconds / 1e9, UTC).isoformat()
