"""Whole traces become turns: the one place where spans (OTLP over ``vigil intake``, or the in-process
``producers.GenAISpanProcessor``) are read as agent turns. What each span *says* (its kind, messages, documents, tool
call, agent and session) is read by the conventions' modules (``vigil.schemas.conventions``); this module decides
which spans make one turn and what the turn is.

Input: the spans of one trace as plain records (``SpanRecord``: hex ids, nanosecond times, flat attributes, span
events, resource attributes). Output: turn dicts shaped like ``schemas.Turn`` (validated later, by the worker).

**One turn per agent run, whatever the parent.** The roots, first rule that finds any:

1. *agent roots*: an agent span (GenAI ``invoke_agent``, OpenInference ``AGENT``, OpenLLMetry ``workflow`` /
   ``agent``, or an OpenInference ``CHAIN`` at the top of the trace) with no agent above it;
2. *container roots*: the topmost plain server or consumer span (an HTTP request, an RPC, a queue message), framework
   chain (OpenInference ``CHAIN``) or OpenLLMetry ``task`` with LLM calls under it;
3. *waiting roots*: spans whose parent has not arrived (a slow root is exported last) are grouped by that parent,
   which becomes the turn's span id, so when the root arrives the trace assembles again under the same turn id;
4. otherwise, LLM calls with no LLM above them, taken in start order under their common parent: a call whose output
   is only tool calls is a *step* of the next call that answers (its tool calls and the tool spans beside it join
   that turn), and a step that no call answers in this trace (an app whose every call is its own trace) is not a
   turn: ``Assembly.steps`` counts it.

Everything under a root belongs to its turn. Question: the root's own input, else the first LLM call's input (the
conversation of the answering call when it extends the first's, so the assistant's tool calls and ``tool_call_id``
are kept). Answer: the root's own output, else the output of the last LLM call that answers (not only tool calls).
The last LLM call gives the model and usage; the system prompt comes from the root, else the answering call.
Retriever spans give the contexts, in start order; tool spans give the tool calls in start order, each with its
error (span status ``ERROR``, ``error.type``), else the tool calls the LLM calls asked for, with results from the
tool messages that answer them (by ``tool_call_id``). A turn whose LLM calls carry no text at all (content capture
off) is still a turn, marked ``metadata["vigil.content"] = "missing"`` with the setting that turns it on
(``vigil.content_setting``): the worker records it and leaves it unscored, naming the setting.

The turn keeps the root's trace id and span id: assembling the same trace again, with spans that arrived late, gives
the same turn id, so its row and its scores are replaced, not duplicated.

Agent name, session and metadata: the conventions' (``gen_ai.agent.name``, ``agent.name``, OpenLLMetry's agent entity
name; ``gen_ai.conversation.id``, ``session.id``, ``traceloop.association.properties.session_id``), else the
resource's ``service.name``; environment: the resource's ``deployment.environment[.name]``; project: the resource's
``vigil.project``; reference answer (ground truth for ``rag_correctness``: replayed or test traffic knows one, live
traffic seldom does): ``vigil.reference`` on any of the turn's spans; origin: ``vigil.origin`` on any of the turn's
spans (an agent sets it from vigil's ``X-Vigil-Origin`` header: ``vigil.producers.origin_of``), so vigil's own
traffic is never sampled.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from vigil.schemas import conventions
from vigil.schemas.conventions.genai import INPUT_EVENTS
from vigil.schemas.trace import ORIGIN_ATTRIBUTE, ORIGINS

__all__ = ["BOOKKEEPING_METADATA", "CONTENT_EVENTS", "CONTENT_METADATA", "DETAILS_EVENT", "RESOURCE_KEYS",
           "SETTING_METADATA", "Assembly", "SpanEvent", "SpanRecord", "assemble", "assembly", "attach_logs",
           "is_bookkeeping", "is_genai", "log_record", "waiting_for_parent"]

# The resource attributes assembly reads; a receiver may keep only these.
RESOURCE_KEYS = frozenset({"service.name", "deployment.environment.name", "deployment.environment", "vigil.project"})

# vigil's own bookkeeping in a turn's metadata: how the turn was assembled (``_metadata`` below), not what the traffic
# is. Never a segment an alert blames or a comparison splits by; with every ``vigil.`` key, the one list of them.
BOOKKEEPING_METADATA = frozenset({"spans", "span_name", "operation", "span_kind", "response_id"})


def is_bookkeeping(key: str) -> bool:
    """A metadata key vigil wrote about its own work (``BOOKKEEPING_METADATA``, any ``vigil.`` key)."""
    return key in BOOKKEEPING_METADATA or key.startswith("vigil.")


class SpanEvent(TypedDict):
    name: str
    time: int
    attributes: dict[str, Any]


class SpanStatus(TypedDict):
    code: int  # OTLP: 0 unset, 1 ok, 2 error
    message: NotRequired[str]


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
    kind: NotRequired[int]  # OTLP span kind (2 server, 5 consumer: a plain request span can be a turn's root)
    status: NotRequired[SpanStatus]  # kept when it is an error
    scope: NotRequired[str]  # the instrumentation scope's name (which library wrote it)
    parent_remote: NotRequired[bool]  # the parent is in another process (OTLP span flags): never waited for


REFERENCE_ATTRIBUTE = "vigil.reference"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"  # a call's inputs, outputs and instructions, as one event
CONTENT_METADATA = "vigil.content"  # "missing": the instrumentation did not capture message content
SETTING_METADATA = "vigil.content_setting"  # the setting that turns capture on, for the library that wrote the turn
# The GenAI events assembly reads (as span events, or as log records sent to the intake's /v1/logs).
CONTENT_EVENTS = frozenset({*INPUT_EVENTS, "gen_ai.choice", "gen_ai.content.prompt", "gen_ai.content.completion",
                            DETAILS_EVENT})
_GENAI_PREFIXES = ("gen_ai.", "llm.", "input.value", "output.value", "retrieval.", "openinference.", "tool.",
                   "traceloop.")
_CONTAINERS = ("server", "chain", "step")


def is_genai(attributes: Mapping[str, Any], event_names: Iterable[str] = ()) -> bool:
    """Whether a span carries anything this module reads (cheap: key prefixes and event names only)."""
    return any(key.startswith(_GENAI_PREFIXES) for key in attributes) or any(
        name.startswith("gen_ai.") for name in event_names)


@dataclass
class Assembly:
    """What one trace's spans make: its turns, and the tool-call-only LLM calls no call in the trace answers."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # span ids
    used: set[str] = field(default_factory=set)  # the span ids of every turn's root and members


def assemble(spans: Iterable[SpanRecord]) -> list[dict[str, Any]]:
    """The turns in one trace's spans (``assembly(spans).turns``)."""
    return assembly(spans).turns


def assembly(spans: Iterable[SpanRecord]) -> Assembly:
    """The turns and the unanswered steps in one trace's spans (a span id seen twice counts once: the last copy
    wins). Log records (``log_record``) are attached to their spans first (``attach_logs``)."""
    trace = _Trace(spans)
    out = Assembly()
    for root, members in trace.groups(out.steps):
        out.used.update([root["span_id"], *(m["span_id"] for m in members)])
        turn = trace.turn(root, members, out.steps)
        if turn is not None:
            out.turns.append(turn)
    out.turns.sort(key=lambda t: t["started_at"])
    return out


def waiting_for_parent(spans: Iterable[SpanRecord]) -> bool:
    """Whether a span's parent, in this process (not a remote caller), has not arrived: the trace is unfinished."""
    spans = list(spans)
    ids = {s["span_id"] for s in spans if not s.get("log")}
    return any(s.get("parent_id") and s["parent_id"] not in ids and not s.get("parent_remote")
               for s in spans if not s.get("log"))


def log_record(trace_id: str, span_id: str, event: SpanEvent, resource: dict[str, Any],
               scope: str = "") -> SpanRecord:
    """A GenAI event that came as an OpenTelemetry log record (the GenAI conventions' events: message content in
    ``gen_ai.user.message`` / ``gen_ai.choice`` ..., or all of a call's in ``DETAILS_EVENT``), kept with its trace's
    spans: a span-shaped record marked ``log`` that ``assemble`` attaches to its span."""
    record: SpanRecord = {"trace_id": trace_id, "span_id": span_id, "parent_id": None, "name": event["name"],
                          "start": event["time"], "end": event["time"], "attributes": {}, "events": [event],
                          "resource": resource, "log": True}
    if scope:
        record["scope"] = scope
    return record
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



# -- the tree ----------------------------------------------------------------------------------------------------


class _Trace:
    """One trace's spans as a tree, each span's kind and messages read once."""

    def __init__(self, spans: Iterable[SpanRecord]) -> None:
        by_id: dict[str, SpanRecord] = {}
        logs: list[SpanRecord] = []
        for span in spans:
            if span.get("log"):
                logs.append(span)
            else:
                by_id[span["span_id"]] = span
        self.by_id = attach_logs(by_id, logs)
        self.children: dict[str | None, list[SpanRecord]] = defaultdict(list)
        for span in self.by_id.values():
            parent = span.get("parent_id")
            self.children[parent if parent in self.by_id else None].append(span)
        for siblings in self.children.values():
            siblings.sort(key=lambda s: (s["start"], s["end"]))
        self.kinds = {}
        for span_id, span in self.by_id.items():
            found = conventions.kind(span)
            if found == "chain" and span.get("parent_id") not in self.by_id:
                found = "agent"  # a framework's chain at the top of the trace is the run
            self.kinds[span_id] = found
        self._io: dict[str, conventions.Io] = {}
        self._has_llm: dict[str, bool] | None = None

    def kind(self, span: SpanRecord) -> str:
        return self.kinds.get(span["span_id"], "virtual")

    def io(self, span: SpanRecord) -> conventions.Io:
        if span["span_id"] not in self.by_id:
            return [], [], ""
        if span["span_id"] not in self._io:
            self._io[span["span_id"]] = conventions.io(span)
        return self._io[span["span_id"]]

    def descendants(self, span: SpanRecord) -> list[SpanRecord]:
        out, stack = [], list(self.children.get(span["span_id"], []))
        while stack:
            child = stack.pop()
            out.append(child)
            stack.extend(self.children.get(child["span_id"], []))
        return out

    def has_llm(self, span: SpanRecord) -> bool:
        """Whether the span is an LLM call or has one below it (one pass over the tree, the first time)."""
        if self._has_llm is None:
            order, stack = [], list(self.children.get(None, []))
            while stack:
                node = stack.pop()
                order.append(node)
                stack.extend(self.children.get(node["span_id"], []))
            self._has_llm = {}
            for node in reversed(order):  # children before their parents
                self._has_llm[node["span_id"]] = self.kind(node) == "llm" or any(
                    self._has_llm[c["span_id"]] for c in self.children.get(node["span_id"], []))
        return self._has_llm.get(span["span_id"], False)

    def topmost(self, wanted) -> list[SpanRecord]:
        """The spans ``wanted(span)`` holds for with no such span above them (walked from the trace's top)."""
        found, stack = [], list(self.children.get(None, []))
        while stack:
            span = stack.pop()
            if wanted(span):
                found.append(span)
                continue
            stack.extend(self.children.get(span["span_id"], []))
        return found

    # -- which spans make a turn -------------------------------------------------------------------------------

    def groups(self, steps: list[str]) -> list[tuple[SpanRecord, list[SpanRecord]]]:
        """(root, members) per turn, by the module's rules 1-4; unanswered steps are added to ``steps``."""
        agents = self.topmost(lambda s: self.kind(s) == "agent")
        if agents:
            return [(root, self.descendants(root)) for root in agents]
        containers = self.topmost(lambda s: self.kind(s) in _CONTAINERS and self.has_llm(s))
        if containers:
            return [(root, self.descendants(root)) for root in containers]
        out: list[tuple[SpanRecord, list[SpanRecord]]] = []
        waiting: dict[str, list[SpanRecord]] = defaultdict(list)
        for top in self.children.get(None, []):
            if top.get("parent_id") and not top.get("log") and self.has_llm(top):
                waiting[top["parent_id"]].append(top)
        for parent_id, tops in waiting.items():
            members = [m for top in tops for m in (top, *self.descendants(top))]
            out.append((self._stand_in(parent_id, members), members))
        grouped = {s["span_id"] for _, members in out for s in members}
        llms = [s for s in self.topmost(lambda s: self.kind(s) == "llm") if s["span_id"] not in grouped]
        by_parent: dict[str | None, list[SpanRecord]] = defaultdict(list)
        for llm in llms:
            parent = llm.get("parent_id")
            by_parent[parent if parent in self.by_id else None].append(llm)
        for parent, calls in by_parent.items():
            out.extend(self._sequence(parent, sorted(calls, key=lambda s: (s["start"], s["end"])), steps))
        return out

    def _sequence(self, parent: str | None, calls: list[SpanRecord],
                  steps: list[str]) -> list[tuple[SpanRecord, list[SpanRecord]]]:
        """Rule 4: each call that answers is a turn, with the steps before it and the spans beside them."""
        beside = [s for s in self.children.get(parent, []) if self.kind(s) != "llm"] if parent else []
        out, pending = [], []
        for call in calls:
            if self.is_step(call):
                pending.append(call)
                continue
            joined = [s for s in beside if s["start"] <= call["start"]]
            beside = [s for s in beside if s not in joined]
            members = [m for s in (*pending, *joined) for m in (s, *self.descendants(s))]
            out.append((call, members + self.descendants(call)))
            pending = []
        steps.extend(s["span_id"] for s in pending)
        return out

    def _stand_in(self, span_id: str, members: list[SpanRecord]) -> SpanRecord:
        """The root that has not arrived, as far as its children tell."""
        first = min(members, key=lambda s: s["start"])
        return {"trace_id": first["trace_id"], "span_id": span_id, "parent_id": None, "name": "",
                "start": first["start"], "end": max(s["end"] for s in members), "attributes": {},
                "resource": first.get("resource") or {}}

    def is_step(self, llm: SpanRecord) -> bool:
        """An LLM call whose output is only tool calls: a step of the turn that answers, never an answer."""
        outputs = self.io(llm)[1]
        return bool(outputs) and all(m["tool_calls"] and not m["content"] for m in outputs
                                     if m["role"] == "assistant") and any(m["role"] == "assistant" for m in outputs)

    # -- one turn ----------------------------------------------------------------------------------------------

    def turn(self, root: SpanRecord, members: list[SpanRecord], steps: list[str]) -> dict[str, Any] | None:
        members = sorted(members, key=lambda s: (s["start"], s["end"]))
        llms = [s for s in ([root] if self.kind(root) == "llm" else []) + members if self.kind(s) == "llm"]
        llms.sort(key=lambda s: (s["start"], s["end"]))
        answering = [s for s in llms if not self.is_step(s)]
        last_answer = max(answering, key=lambda s: s["end"]) if answering else None
        root_in, root_out, root_system = self.io(root) if self.kind(root) != "llm" else ([], [], "")
        if last_answer is None and not root_out:
            steps.extend(s["span_id"] for s in llms)  # only steps so far: the answer has not arrived (or never will)
            return None
        input_messages = root_in or self._conversation(llms, last_answer)
        output_messages = root_out or (self.io(last_answer)[1] if last_answer is not None else [])
        system = root_system or (self.io(last_answer)[2] if last_answer is not None else "")
        output = "\n".join(m["content"] for m in output_messages if m["role"] == "assistant" and m["content"])
        if not input_messages and not output and not llms:
            return None
        everyone = [root, *members]
        turn: dict[str, Any] = {
            "trace_id": root["trace_id"],
            "span_id": root["span_id"],
            "input": [_wire_message(m) for m in input_messages],
            "output": output,
            "started_at": _iso(root["start"]),
        }
        if root["end"]:
            turn["ended_at"] = _iso(root["end"])
        if system:
            turn["system"] = system
        metadata = self._metadata(root, everyone, llms)
        if not output and not any(m["content"] for m in input_messages):
            turn["input"] = [{"role": "user", "content": ""}]
            metadata[CONTENT_METADATA] = "missing"
            metadata[SETTING_METADATA] = conventions.content_setting(llms[0] if llms else root)
        turn.update(self._who(root, everyone))
        if llms:
            last = max(llms, key=lambda s: s["end"])
            attrs = last["attributes"]
            model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or attrs.get(
                "llm.model_name")
            if model:
                turn["model"] = str(model)
            usage = _usage(attrs)
            if usage:
                turn["usage"] = usage
        contexts = [doc for span in everyone for doc in conventions.documents(span["attributes"])]
        if contexts:
            turn["contexts"] = contexts
        tools = self._tool_calls(members, llms, input_messages)
        if tools:
            turn["tool_calls"] = tools
        turn["metadata"] = metadata
        return turn

    def _conversation(self, llms: list[SpanRecord], last_answer: SpanRecord | None) -> list[conventions.Msg]:
        """The first call's input; the answering call's when it extends it (so the tool round trip is kept)."""
        if not llms:
            return []
        first = self.io(llms[0])[0]
        if last_answer is None:
            return first
        last = self.io(last_answer)[0]
        if len(last) >= len(first) and all(a["role"] == b["role"] and a["content"] == b["content"]
                                           for a, b in zip(first, last, strict=False)):
            return last
        return first

    def _tool_calls(self, members: list[SpanRecord], llms: list[SpanRecord],
                    conversation: list[conventions.Msg]) -> list[dict[str, Any]]:
        """The tool spans' calls in start order; else the calls the LLM calls asked for (and the conversation holds
        since its last user message), with the results the tool messages give them."""
        spans = [conventions.tool(s) for s in members if self.kind(s) == "tool"]
        if spans:
            return spans
        asked: list[dict[str, Any]] = []
        last_user = max((i for i, m in enumerate(conversation) if m["role"] == "user"), default=-1)
        for message in conversation[last_user + 1:]:
            asked.extend(dict(call) for call in message["tool_calls"])
        for llm in llms:
            for message in self.io(llm)[1]:
                asked.extend(dict(call) for call in message["tool_calls"])
        results = {m["tool_call_id"]: m["content"] for llm in llms for m in self.io(llm)[0]
                   if m["role"] == "tool" and m.get("tool_call_id")}
        calls, seen = [], set()
        for call in asked:
            key = call.get("id") or json.dumps([call["name"], call["arguments"]], sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            if call.get("id") in results:
                call["result"] = results[call["id"]]
            calls.append(call)
        return calls

    def _who(self, root: SpanRecord, everyone: list[SpanRecord]) -> dict[str, str]:
        resource = next((s["resource"] for s in everyone if s.get("resource")), {})  # a bare root keeps none
        found: dict[str, Any] = {"agent": None, "session_id": None}
        for span in everyone:
            said = conventions.identity(span["attributes"])
            for key, value in found.items():
                if value is None and said[key]:
                    found[key] = said[key]
        service = resource.get("service.name")
        if not found["agent"] and isinstance(service, str) and not service.startswith("unknown_service"):
            found["agent"] = service
        found.update({
            "environment": resource.get("deployment.environment.name") or resource.get("deployment.environment"),
            "project": resource.get("vigil.project"),
            "reference": _first(everyone, REFERENCE_ATTRIBUTE),
        })
        origin = _first(everyone, ORIGIN_ATTRIBUTE)
        if origin in ORIGINS:
            found["origin"] = origin
        return {key: str(value) for key, value in found.items() if value}

    def _metadata(self, root: SpanRecord, everyone: list[SpanRecord], llms: list[SpanRecord]) -> dict[str, str]:
        metadata: dict[str, str] = {}
        for span in reversed(everyone):  # the root's say wins
            metadata.update(conventions.identity(span["attributes"])["metadata"])
        if root["name"]:
            metadata["span_name"] = root["name"]
        attrs = root["attributes"]
        source = max(llms, key=lambda s: s["end"])["attributes"] if llms else attrs
        for name, key in (("operation", "gen_ai.operation.name"), ("provider", "gen_ai.provider.name"),
                          ("system", "gen_ai.system"), ("response_id", "gen_ai.response.id"),
                          ("span_kind", "openinference.span.kind")):
            value = attrs.get(key, source.get(key))
            if value is not None:
                metadata[name] = str(value)
        metadata["spans"] = str(len(everyone) - (root["span_id"] not in self.by_id))
        return metadata


def _wire_message(message: conventions.Msg) -> dict[str, Any]:
    """A message as ``schemas.Message``: role and content, the assistant's tool calls and a tool message's id."""
    out: dict[str, Any] = {"role": message["role"], "content": message["content"]}
    if message["tool_calls"]:
        out["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _first(spans: list[SpanRecord], *keys: str) -> Any:
    for span in spans:
        for key in keys:
            value = span["attributes"].get(key)
            if value not in (None, ""):
                return value
    return None


def _usage(attrs: Mapping[str, Any]) -> dict[str, int]:
    prompt = _first_of(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
    completion = _first_of(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                           "llm.token_count.completion")
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {key: int(value) for key, value in usage.items() if isinstance(value, (int, float)) and value >= 0}


def _first_of(attrs: Mapping[str, Any], *keys: str) -> Any:
    return next((attrs[key] for key in keys if key in attrs), None)


def _iso(nanoseconds: int) -> str:
    return datetime.fromtimestamp(nanoseconds / 1e9, UTC).isoformat()
