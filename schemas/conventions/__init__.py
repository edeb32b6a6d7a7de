"""The span conventions vigil reads, one module each, and the one place that says which wins: OpenLLMetry /
Traceloop (``openllmetry``), OpenInference (``openinference``, LangChain's, LlamaIndex's, smolagents', CrewAI's and the
OpenAI Agents SDK's included), the Vercel AI SDK (``vercel``), pydantic-ai (``pydantic_ai``), Haystack's own tracer
(``haystack``), Firebase Genkit's own tracing (``genkit``), the Langfuse SDK's observations (``langfuse``), MLflow
Tracing (``mlflow``), Griptape's own observability (``griptape``), the OpenTelemetry GenAI conventions (``genai``),
Pydantic Logfire's OpenAI Agents SDK spans (``logfire``: the SDK's own records as attributes), Laminar's
``@observe`` spans (``laminar``), AgentOps' decorators' spans (``agentops``) and openlit (``openlit``). Each module's docstring has its table: which attributes and events mean what.
``schemas.spans`` builds turns from what these functions say of each span.

**A registry of small mappers in priority order, ending in a fallback by meaning.** A span's kind is the first
mapper's that claims it (``MAPPERS``: OpenLLMetry, OpenInference, Vercel, pydantic-ai, Haystack, Genkit, Langfuse,
MLflow, Griptape, GenAI, Logfire, Laminar, AgentOps); a span no mapper claims is read by what it says: one that
names a model (``gen_ai.request.model``, ``llm.model_name``, ``ai.model.id`` ...) is an LLM call, one that names a
tool is a tool call, a plain server or consumer span is ``server``, one named as the GenAI conventions name an
agent's or a tool's span (``invoke_agent <agent>``, ``invoke_workflow <name>``, ``execute_tool <tool>``) is that span
(OpenLIT's CrewAI spans that failed keep nothing but their name and error), anything else ``other``. So a framework
nobody listed still lands somewhere sensible, and ``explain_kind`` says which mapper decided and on which attribute.
Messages: openlit's when it wrote the span, else each mapper in turn fills what the ones before left empty (Vercel,
pydantic-ai, Haystack, Genkit, GenAI, OpenLLMetry, OpenInference, Langfuse, MLflow, Logfire); ``io_sources`` says which.

**A tool call is filled as a span's messages are**: the first convention that reads a tool span gives the call, and
each after it fills what the ones before left empty (its arguments, id and result): an instrumentation that writes
its own kind beside the GenAI conventions' call attributes (OpenLLMetry's OpenAI Agents spans: ``traceloop.span.kind``
``tool`` with ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments`` and ``.result``) says the call in both.

**A final-answer tool is the answer.** A model that ends its run by calling a tool (``final_answer``,
``final_result``, ReAct's ``finish``: ``_parse.is_final_tool``) answered: that call becomes the assistant's text (its
argument, when it carries one), never a tool call. **So is a call of the function the request forced**: a request
whose ``tool_choice`` names the one function the model must call asked for that function's arguments, the form the
application takes its answer in (function calling as structured output: Instructor's default mode, LangChain's
``with_structured_output(method="function_calling")``); read where a convention records the request's parameters
(OpenInference's ``llm.invocation_parameters``: ``_parse.forced_answer``).

**A tool's name is the tool's, not the span's.** A tool span is named by the attribute its convention gives
(``tool.name``, ``gen_ai.tool.name`` ...), whichever convention writes it; one that names its tool only in its span
name is read by what the name says (``_parse.span_tool_name``): ``execute_tool <tool>``, or ``<tool>.__call__`` / ``<tool>.run`` where an
instrumentation named the span after the method it wrapped (the tool is the object whose method ran).

**A span that says it failed, failed** (``error``): by its status, ``error.type`` or ``exception`` event, and also by
what it reports when its status says OK: a finish reason ``error``, an error object as its output, a tool span's
own flag (Haystack's ``haystack.tool.error``), an agent turn that resolved failed (Genkit's ``finishReason``
``failed``), an observation whose level is ``ERROR`` (Langfuse's). **A span whose status is OK did not fail by the
exceptions it recorded**: OpenTelemetry's ``Ok`` is set by whoever validated that the operation completed, and is
final, so an ``exception`` event beside it is an exception the operation handled or raised on purpose (LangGraph's
``GraphInterrupt``, which ``interrupt()`` raises to pause the graph for a human, recorded by OpenInference on the
tool's and the node's spans, each ended OK); what such a span reports still counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import (
    agentops,
    genai,
    genkit,
    griptape,
    haystack,
    laminar,
    langfuse,
    logfire,
    mlflow,
    openinference,
    openlit,
    openllmetry,
    pydantic_ai,
    vercel,
)
from ._parse import (
    Io,
    Msg,
    call_arguments,
    hand_in,
    is_final_tool,
    joined_keys,
    json_value,
    key_marks,
    keys_start,
    result_text,
    says_nothing,
    sent,
    span_tool_name,
    text,
    without_stack,
)

__all__ = ["MAPPERS", "Gates", "Io", "Msg", "content_setting", "decided_kind", "documents", "error", "explain_kind",
           "gates", "identity", "io", "io_sources", "is_final_tool", "json_value", "kind", "model", "result_text", "sent",
           "stated_usage", "tool", "usage"]

_SERVER_KINDS = (2, 5)  # OTLP SPAN_KIND_SERVER, SPAN_KIND_CONSUMER: a request or a message handled
# (name, the attribute(s) it decides a kind on, or a function of the attributes naming the one it decided on, its kind
# function of (attributes, event names, span name)), in priority order
MAPPERS = (
    ("openllmetry", openllmetry.decided_by, lambda attrs, events, name: openllmetry.kind(attrs)),
    ("openinference", "openinference.span.kind", lambda attrs, events, name: openinference.kind(attrs)),
    ("vercel", vercel.KIND_KEY, lambda attrs, events, name: vercel.kind(attrs)),
    ("pydantic_ai", pydantic_ai.KIND_KEY, lambda attrs, events, name: pydantic_ai.kind(attrs)),
    ("haystack", haystack.KIND_KEYS, lambda attrs, events, name: haystack.kind(attrs, name)),
    ("genkit", genkit.KIND_KEY, lambda attrs, events, name: genkit.kind(attrs)),
    ("langfuse", langfuse.KIND_KEY, lambda attrs, events, name: langfuse.kind(attrs)),
    ("mlflow", mlflow.KIND_KEY, lambda attrs, events, name: mlflow.kind(attrs)),
    ("griptape", griptape.TAGS, lambda attrs, events, name: griptape.kind(attrs, name)),
    ("genai", "gen_ai.operation.name", lambda attrs, events, name: genai.kind(attrs, events)),
    ("logfire", logfire.KIND_KEYS, lambda attrs, events, name: logfire.kind(attrs)),
    ("laminar", laminar.KIND_KEY, lambda attrs, events, name: laminar.kind(attrs)),
    ("agentops", agentops.KIND_KEY, lambda attrs, events, name: agentops.kind(attrs)),
)
# the model a call names, the one that answered before the one asked for
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "ai.response.model", "ai.model.id")
_TOOL_KEYS = ("gen_ai.tool.name", "tool.name", "ai.toolCall.name")
_USAGE_KEYS = (("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
               ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),
               ("llm.token_count.prompt", "llm.token_count.completion"))


_HAYSTACK_LLM = haystack.LLM_SPAN  # the span name Haystack's mapper claims by
_BEFORE_GENAI = (openllmetry, openinference, vercel, pydantic_ai, haystack, genkit, langfuse, mlflow, griptape)
# the keys by which the mappers before the GenAI conventions' claim a span: without one, none of them does; of a span
# that states a GenAI operation, pydantic-ai's claims none (its formats 2-6 are the GenAI conventions': its ``kind``)
_CLAIM_KEYS = frozenset(key for convention in _BEFORE_GENAI for key in convention.CLAIM_KEYS)
_OPERATION_CLAIM_KEYS = frozenset(key for convention in _BEFORE_GENAI if convention is not pydantic_ai
                                  for key in convention.CLAIM_KEYS)
_OPERATION = "gen_ai.operation.name"


def kind(span: Mapping[str, Any]) -> str:
    """``agent``, ``chain``, ``step``, ``server``, ``llm``, ``tool``, ``retriever`` or ``other`` (``explain_kind``'s
    answer, without the explanation)."""
    return decided_kind(span)[0]


def decided_kind(span: Mapping[str, Any]) -> tuple[str, int]:
    """``kind(span)`` and the position in ``MAPPERS`` of the mapper that decided it (``len(MAPPERS)``: the fallback).
    Every mapper before it claimed nothing: ``io_sources`` asks no reader whose convention's kind is its gate.
    ``MAPPERS`` in order, unrolled: this runs for every span, and a loop over ``MAPPERS`` costs assembly 4% more
    instructions (the lambdas' calls). A span with no key any mapper before the GenAI conventions' claims by (their
    ``CLAIM_KEYS``; of a span that states a GenAI operation, pydantic-ai's claims by none: a GenAI tool span's
    ``gen_ai.tool.name``), and no name Haystack's or Griptape's claims by, is asked of the GenAI conventions' and the
    mappers after it only: found in one set lookup (most spans of the common instrumentations)."""
    attrs = span["attributes"]
    name = span["name"]
    claims = _OPERATION_CLAIM_KEYS if _OPERATION in attrs else _CLAIM_KEYS
    if not claims.isdisjoint(attrs) or name == _HAYSTACK_LLM or name.endswith("()"):
        found = openllmetry.kind(attrs)
        if found:
            return found, 0
        found = openinference.kind(attrs)
        if found:
            return found, 1
        found = vercel.kind(attrs)
        if found:
            return found, 2
        found = pydantic_ai.kind(attrs)
        if found:
            return found, 3
        found = haystack.kind(attrs, name)
        if found:
            return found, 4
        found = genkit.kind(attrs)
        if found:
            return found, 5
        found = langfuse.kind(attrs)
        if found:
            return found, 6
        found = mlflow.kind(attrs)
        if found:
            return found, 7
        found = griptape.kind(attrs, name)
        if found:
            return found, 8
    events = span.get("events")
    found = genai.kind(attrs, [e["name"] for e in events] if events else ())
    if found:
        return found, 9
    found = logfire.kind(attrs)
    if found:
        return found, 10
    found = laminar.kind(attrs)
    if found:
        return found, 11
    found = agentops.kind(attrs)
    if found:
        return found, 12
    return _by_meaning(span)[0], len(MAPPERS)


def explain_kind(span: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, the mapper that decided, the attribute it read): ``fallback`` when no mapper claimed the span."""
    attrs = span["attributes"]
    events = [e["name"] for e in span.get("events") or ()]
    for name, keys, mapper in MAPPERS:
        found = mapper(attrs, events, span["name"])
        if found:
            said = keys(attrs) if callable(keys) else next(
                (k for k in ((keys,) if isinstance(keys, str) else keys) if k in attrs), None)
            return found, name, said or ("its span name" if name in ("haystack", "griptape")
                                         else "message attributes or events")
    return _by_meaning(span)


def _by_meaning(span: Mapping[str, Any]) -> tuple[str, str, str]:
    """The kind of a span no mapper claims, read by what it says (the module's fallback)."""
    attrs = span["attributes"]
    for model in _MODEL_KEYS:  # loops, not generators: every span no mapper claims (an HTTP or a database span) is asked
        if attrs.get(model) not in (None, ""):
            return "llm", "fallback", model
    for named_tool in _TOOL_KEYS:
        if attrs.get(named_tool) not in (None, ""):
            return "tool", "fallback", named_tool
    if span.get("kind") in _SERVER_KINDS:
        return "server", "fallback", "span kind server/consumer"
    operation, _, named = span["name"].partition(" ")
    if named and genai.OPERATIONS.get(operation) in ("agent", "tool"):
        return genai.OPERATIONS[operation], "fallback", "its span name"
    return "other", "fallback", ""


def io(span: Mapping[str, Any]) -> Io:
    """(input messages, output messages, system instructions) of one span, whichever convention wrote them."""
    return io_sources(span)[0]


# The readers of a span's messages in the order they fill what the ones before left empty, each with whether it can
# give system instructions (OpenLLMetry's entity input/output and OpenInference's messages carry none, so once the
# messages are filled they are not asked: what they would say is dropped anyway), and the mapper that gates it. A
# reader that reads only spans its convention's ``kind`` claims (the gate names its mapper) says nothing of a span a
# mapper before that one decided (``decided_kind``), and is not asked; the GenAI conventions', pydantic-ai's and
# OpenInference's read spans of any kind (no gate). A reader whose convention names the keys it reads (``IO_KEYS``:
# the GenAI conventions', pydantic-ai's, OpenInference's, Logfire's) says nothing of a span with none of them and, for
# the GenAI conventions', no event: it is not asked of one (``gates``), whatever its gate. Langfuse's, whose keys only
# its SDK writes, last: the spans of the common conventions are filled before it is asked.
_READERS = (("vercel", vercel.io, True, "vercel"), ("pydantic_ai", pydantic_ai.io, True, None),
            ("haystack", haystack.io, True, "haystack"), ("genkit", genkit.io, True, "genkit"),
            ("genai", genai.io, True, None), ("openllmetry", openllmetry.io, False, "openllmetry"),
            ("openinference", openinference.io, False, None), ("langfuse", langfuse.io, True, "langfuse"),
            ("mlflow", mlflow.io, True, "mlflow"), ("logfire", logfire.io, True, "logfire"))
_OPENLIT = (("openlit", openlit.io, False, None), *_READERS)  # asked first of a span openlit wrote (``claims``)
_READ_EVENTS = frozenset({"genai"})  # the keyed readers that also read a span's events
_DECIDER = {name: position for position, (name, _keys, _mapper) in enumerate(MAPPERS)}
# the keys without which a reader reads nothing, by its name (``gates``): the keyed readers' ``IO_KEYS``, and
# openlit's ``CLAIM_KEYS``, without which it claims no span (``claims``), so its reader is asked of none
_KEYED_BY = {"pydantic_ai": pydantic_ai.IO_KEYS, "genai": genai.IO_KEYS, "openinference": openinference.IO_KEYS,
             "logfire": logfire.IO_KEYS, "openlit": openlit.CLAIM_KEYS}


def _asked(readers: tuple, decided: int, keyed: frozenset[str]) -> tuple[tuple[str, Any, bool], ...]:
    return tuple((name, reader, system) for name, reader, system, gate in readers
                 if (name not in _KEYED_BY or name in keyed) and (gate is None or _DECIDER[gate] >= decided))


# The readers asked of a span, by the mapper that decided its kind (its position; ``None``: not known, every reader
# asked), by whether openlit wrote it, and by the keyed readers it has a key of (``gates``, with the GenAI reader for
# a span with events): every such set of them, chosen once for all, so a span's readers are three lookups.
_KEY_SETS = [frozenset(name for bit, name in enumerate(_KEYED_BY) if mask >> bit & 1)
             for mask in range(1 << len(_KEYED_BY))]
_ASKED = {decided: tuple({keyed: _asked(readers, decided, keyed) for keyed in _KEY_SETS} for readers in
                         (_READERS, _OPENLIT)) for decided in range(len(MAPPERS) + 1)}
_ASKED[None] = _ASKED[0]


def io_sources(span: Mapping[str, Any], decided: int | None = None,
               opened: Gates | None = None) -> tuple[Io, dict[str, str]]:
    """``io(span)`` and which module gave each of its parts (``inputs``, ``outputs``, ``system``). ``decided``: the
    mapper that decided the span's kind (``decided_kind``), when the caller knows it; ``opened``: its ``gates``."""
    sources: dict[str, str] = {}
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    system = ""
    keyed = (gates(span["attributes"]) if opened is None else opened)[2]  # the keyed readers the span has a key of
    if span.get("events"):
        keyed = keyed | _READ_EVENTS
    claimed = "openlit" in keyed and openlit.claims(span)  # (a span with no key of its claims: not asked)
    for name, reader, gives_system in _ASKED[decided][1 if claimed else 0][keyed]:
        if inputs and outputs and (system or not gives_system):
            continue
        more_in, more_out, more_system = reader(span)
        if more_in and not inputs:
            inputs, sources["inputs"] = more_in, name
        if more_out and not outputs:
            outputs, sources["outputs"] = more_out, name
        if more_system and not system:
            system, sources["system"] = more_system, name
    if not system and inputs:  # the system messages' words (a loop: a comprehension costs more than a few messages)
        said = []
        for m in inputs:
            if m["role"] == "system" and m["content"]:
                said.append(m["content"])
        system = "\n".join(said)
    # nothing to hand in where no reader gave messages (many spans that are no model call): no call
    return (hand_in(inputs) if inputs else [], hand_in(outputs) if outputs else [], system), sources


# the conventions that state a call's model or usage other than by an attribute of their own, in the order they are asked
_MODEL_READERS = (haystack.model, genkit.model, langfuse.model, mlflow.model)
_USAGE_READERS = (vercel.usage, haystack.usage, genkit.usage, langfuse.usage, mlflow.usage, logfire.usage)


def model(attrs: Mapping[str, Any]) -> Any:
    """The model a call names (the one that answered before the one asked for), whichever convention wrote it:
    an attribute, else what Haystack's tracer says its replies came from, else the model action Genkit ran, else the
    model a Langfuse generation or an MLflow span names (``None`` when silent)."""
    found = None
    for key in _MODEL_KEYS:  # a loop, not a generator: this runs for every turn
        if attrs.get(key) not in (None, ""):
            found = attrs[key]
            break
    for reader in _MODEL_READERS:
        if found is not None:
            break
        found = reader(attrs)
    return found


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(input tokens, output tokens) one LLM call states, whichever convention wrote them (``None`` when silent)."""
    for prompt, completion in _USAGE_KEYS:
        if prompt in attrs or completion in attrs:
            return attrs.get(prompt), attrs.get(completion)
    for reader in _USAGE_READERS:
        found = reader(attrs)
        if found != (None, None):
            return found
    return None, None


def stated_usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(input tokens, output tokens) a run's root states for the whole run (pydantic-ai's aggregated usage, else the
    usage attributes on the root itself)."""
    found = pydantic_ai.usage(attrs)
    return found if found != (None, None) else usage(attrs)


def _keys(*groups: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """A convention's keys (its ``DOCUMENT_KEYS``, ``WHO_KEYS``, ``IO_KEYS`` ...) as (keys, prefixes): an entry that
    ends in ``.`` opens a group of keys (``traceloop.association.properties.*``), any other is one key, read as it
    stands."""
    entries = [key for group in groups for key in group]
    return frozenset(k for k in entries if not k.endswith(".")), key_marks(*(k for k in entries if k.endswith(".")))


_DOCUMENTS = (openinference, genai, openllmetry, genkit, mlflow)  # the document readers, in the order their say comes
_DOCUMENT_KEYS = tuple(_keys(convention.DOCUMENT_KEYS) for convention in _DOCUMENTS)  # each one's, as ``_DOCUMENTS``


def documents(attrs: Mapping[str, Any], opened: Gates | None = None) -> list[dict[str, Any]]:
    """The retrieved documents a span holds, as ``ContextDoc`` fields (documents without text are left out), each
    convention's in ``_DOCUMENTS``' order. A convention reads none of a span with none of the keys it reads (its
    ``DOCUMENT_KEYS``), so only the conventions whose keys the span has are asked (``gates``): most spans ask none, a
    retriever's one."""
    asked = (gates(attrs) if opened is None else opened)[1]
    if not asked:
        return []
    docs: list[Any] = []
    for convention in asked:
        docs += convention.documents(attrs)
    return [doc for doc in map(_document, docs) if doc["text"]] if docs else []


# the conventions that read a tool span's call, in the order the first names it and the others fill what it left empty,
# each with the mapper whose kind gates it, as ``_READERS``: a reader that reads only the tool spans its convention's
# ``kind`` claims is not asked of a span a mapper before that one decided. Every reader is gated by its keys too: it
# reads nothing of a span with none of its convention's ``TOOL_KEYS``, and is not asked of one (``gates``)
_TOOL_READERS = ((openllmetry, "openllmetry"), (openinference, None), (vercel, "vercel"), (pydantic_ai, None),
                 (haystack, "haystack"), (genkit, "genkit"), (langfuse, "langfuse"), (mlflow, "mlflow"),
                 (griptape, "griptape"), (genai, None), (logfire, None), (laminar, "laminar"), (agentops, "agentops"))


def tool(span: Mapping[str, Any], decided: int | None = None,
         error_of: Callable[[Mapping[str, Any]], str | None] | None = None,
         opened: Gates | None = None) -> dict[str, Any]:
    """The tool call a tool span made, with its error when the span says it failed. Arguments no convention names
    are the span's own ``input`` (and its ``output`` the result). ``decided``: the mapper that decided the span's kind
    (``decided_kind``), when the caller knows it; ``error_of``: how the caller reads a span's ``error`` (once per
    span), when it keeps them; ``opened``: its ``gates``, when the caller has them."""
    call: dict[str, Any] | None = None
    least = decided or 0  # the mapper that decided the span: readers gated by one before it are not asked
    for reader, gate in (gates(span["attributes"]) if opened is None else opened)[3]:
        if gate < least:
            continue
        said = reader(span)
        if said is None:
            continue
        if call is None:
            call = said
            continue
        if call["name"] == span["name"] and said["name"] != span["name"]:
            call["name"] = said["name"]  # an attribute names the tool: the span's name does not
        for part in ("arguments", "id", "result"):
            if call.get(part) in (None, "", {}) and said.get(part) not in (None, "", {}):
                call[part] = said[part]
    if call is None:
        call = {"name": span["name"], "arguments": {}}
    if call["name"] == span["name"]:  # no attribute named the tool: its span name does
        call["name"] = span_tool_name(span["name"])
    attrs = span["attributes"]
    if not call["arguments"] and isinstance(given := call_arguments(json_value(attrs.get("input"))), dict):
        call["arguments"] = given  # no convention named them: the span's own input is the call's
    if call.get("result") is None and attrs.get("output") is not None:
        call["result"] = result_text(attrs["output"])
    if says_nothing(call.get("result")):  # an object's identity, printed before it yielded anything: no result
        del call["result"]
    found = (error_of or error)(span)
    if found:
        call["error"] = found
    return call


_WHO = (genai, openllmetry, openinference, vercel, genkit, langfuse, mlflow, logfire, laminar)  # in the order their say wins
_WHO_KEYS = tuple(_keys(convention.WHO_KEYS) for convention in _WHO)  # each one's, as ``_WHO``
_IO = {name: _keys(keys) for name, keys in _KEYED_BY.items()}  # the keyed message readers' keys, by name
# each tool reader's ``TOOL_KEYS``, its ``tool`` and the position of the mapper that gates it (none: past every one)
_TOOL = tuple((_keys(convention.TOOL_KEYS), convention.tool, len(MAPPERS) if gate is None else _DECIDER[gate])
              for convention, gate in _TOOL_READERS)
# what a span's keys open (``gates``), by the keys in their order: instrumentations write a few key sets over and over
Gates = tuple[tuple[Any, ...], tuple[Any, ...], frozenset[str], tuple[tuple[Any, int], ...]]  # the identity and the
# document readers a span has a key of, the names of the keyed message readers (``io_sources``: ``_KEYED_BY``) it has a
# key of, and the tool readers it has a key of (``tool``), each with the position of the mapper that gates it
_OPENED: dict[tuple[str, ...], Gates] = {}
_OPENED_MAX = 4096  # key sets remembered; past it, forgotten at once and learnt again
_OPENED_TEXT_MAX = 4096  # characters of a key set's keys, together, past which it is not remembered: whoever sends
# spans sets their keys, and a cache of long ones would hold memory no sender should set (4096 x 4096 at most)


def gates(attrs: Mapping[str, Any]) -> Gates:
    """The identity readers a span has a key of (each convention's ``WHO_KEYS``, in ``_WHO``'s order), the document
    readers it has a key of (``DOCUMENT_KEYS``, in ``_DOCUMENTS``' order), the keyed message readers it has a key of
    (``IO_KEYS``, and openlit's ``CLAIM_KEYS``: ``_KEYED_BY``, by name) and the tool readers it has a key of
    (``TOOL_KEYS``, in ``_TOOL_READERS``' order): the keys looked up, then the prefixes (``_keys``), the keys joined
    once for all. A function of the keys alone, so remembered by them (key sets of a few thousand characters at most):
    most spans' answer is one lookup, not a pass over their keys. A caller that asks ``identity``, ``documents``, ``io_sources`` or ``tool`` of one span hands them
    this, asked once."""
    keys = tuple(attrs)
    found = _OPENED.get(keys)
    if found is None:
        joined = joined_keys(attrs)
        found = (tuple(convention for convention, (exact, prefixes) in zip(_WHO, _WHO_KEYS, strict=True)
                       if not exact.isdisjoint(keys) or keys_start(attrs, prefixes, joined)),
                 tuple(convention for convention, (exact, prefixes) in zip(_DOCUMENTS, _DOCUMENT_KEYS, strict=True)
                       if not exact.isdisjoint(keys) or keys_start(attrs, prefixes, joined)),
                 frozenset(name for name, (exact, prefixes) in _IO.items()
                           if not exact.isdisjoint(keys) or keys_start(attrs, prefixes, joined)),
                 tuple((reader, gate) for (exact, prefixes), reader, gate in _TOOL
                       if not exact.isdisjoint(keys) or keys_start(attrs, prefixes, joined)))
        if len(joined) <= _OPENED_TEXT_MAX:
            if len(_OPENED) >= _OPENED_MAX:
                _OPENED.clear()
            _OPENED[keys] = found
    return found


def identity(attrs: Mapping[str, Any], opened: Gates | None = None) -> dict[str, Any]:
    """Agent name, session id and metadata a span states (``None`` / empty where it states nothing); the agent's id
    (``gen_ai.agent.id``) names it only when no convention states its name. A convention states nothing of a span
    with none of the keys it reads (its ``WHO_KEYS``), so only the conventions whose keys the span has are asked
    (``gates``): most spans of a run (its LLM calls, tools and retrievers) ask none, an agent's span one or two."""
    asked = (gates(attrs) if opened is None else opened)[0]
    if not asked:
        return {"agent": None, "session_id": None, "metadata": {}}
    agent = session = None
    metadata: dict[str, Any] = {}
    for convention in asked:
        found = convention.identity(attrs)
        if agent is None and found.get("agent") not in (None, ""):
            agent = text(found["agent"])
        if session is None and found.get("session_id") not in (None, ""):
            session = text(found["session_id"])
        if found.get("metadata"):  # the earlier convention's say wins
            metadata = {**found["metadata"], **metadata}
    if agent is None and attrs.get(genai.AGENT_ID) not in (None, ""):
        agent = text(attrs[genai.AGENT_ID])  # nothing names the agent: its id stands for it
    return {"agent": agent, "session_id": session, "metadata": metadata}


def content_setting(span: Mapping[str, Any]) -> str:
    """The instrumentation setting that turns message content capture on, for the library that wrote ``span``."""
    scope = str(span.get("scope") or "")
    if scope == logfire.SCOPE:
        return logfire.SETTING
    if vercel.kind(span["attributes"]) or scope == "ai":
        return vercel.SETTING
    if pydantic_ai.kind(span["attributes"]) or scope.startswith("pydantic-ai"):
        return pydantic_ai.SETTING
    if scope.startswith("openinference") or openinference.kind(span["attributes"]):
        return openinference.SETTING
    if openlit.claims(span) or scope.startswith("openlit"):
        return openlit.SETTING
    if haystack.wrote(span):
        return haystack.SETTING
    if genkit.kind(span["attributes"]) or scope == "genkit-tracer":
        return genkit.SETTING
    if langfuse.kind(span["attributes"]) or scope == "langfuse-sdk":
        return langfuse.SETTING
    if mlflow.kind(span["attributes"]) or scope == "mlflow.tracing.provider":
        return mlflow.SETTING
    if griptape.kind(span["attributes"], span["name"]):
        return griptape.SETTING
    if scope.startswith("opentelemetry.instrumentation.openai.v") or any(
            k.startswith("traceloop.") for k in span["attributes"]):
        return openllmetry.SETTING
    return next((setting for prefix, setting in genai.SCOPE_SETTINGS if scope.startswith(prefix)), genai.SETTING)


def error(span: Mapping[str, Any]) -> str | None:
    """Why a span failed, or ``None``: its status ``ERROR`` (with its message), ``error.type``, or an ``exception``
    event (``exception.type``: ``exception.message``; not on a span whose status is OK), whichever says most. **A
    span that says it failed in what it reports failed, whatever its status**: an output that is an error object
    (``{"type": "error", "error": {"name", "message"}}``: a streamed error part, an API's error body) fails with its text, a model call whose
    finish reason is ``error`` (the GenAI conventions' ``gen_ai.response.finish_reasons`` or an output message's own, the Vercel AI SDK's
    ``ai.response.finishReason``) stopped in error, and a tool span flagged failed by its convention (Haystack's
    ``haystack.tool.error``) failed with the error its output names. A failed status with no message says why in
    its convention's own error record where it keeps one (Logfire's ``error``: the OpenAI Agents SDK's
    ``SpanError``). The text is the error's, not the stack written after it (``_parse.without_stack``)."""
    status = span.get("status")
    code = status.get("code") if status else None
    attrs = span["attributes"]
    error_type = attrs.get("error.type")
    events = span.get("events")
    raised = next((e.get("attributes") or {} for e in events if e.get("name") == "exception"), None) if (
        events and code != 1) else None  # an exception recorded by a span that ended OK: not a failure
    if code != 2 and error_type in (None, "") and raised is None:
        return _reported_error(attrs)
    # Logfire's status says only that it failed
    message = (status.get("message") if status else None) or logfire.error(attrs) or ""
    if raised is not None:
        said = ": ".join(str(raised[k]) for k in ("exception.type", "exception.message") if raised.get(k))
        if said and (not message or message in said):
            message = said
    message = without_stack(message)
    if error_type not in (None, "") and str(error_type) not in message:
        message = f"{error_type}: {message}" if message else str(error_type)
    return message or "error"


def _reported_error(attrs: Mapping[str, Any]) -> str | None:
    """The error a span reports in what it says rather than in its status (``error``), or ``None``. Cheap when it
    says none (it runs for every span of every turn): the output (``output.value``, ``output``) is parsed only when
    it opens as an object naming ``"error"``; the finish reason is the GenAI one, else the Vercel AI SDK's, else
    OpenInference's, else an output message's own (the GenAI conventions' ``OutputMessage.finish_reason``: an agent
    span of opentelemetry-instrumentation-genai-agno states a failed run so, its text the error's), read only when the
    messages name ``"error"``; a convention's failure flag is one lookup."""
    if haystack.ERROR_KEY in attrs:
        return haystack.error(attrs)
    if genkit.KIND_KEY in attrs:
        return genkit.error(attrs)
    if langfuse.LEVEL_KEY in attrs:
        return langfuse.error(attrs)
    value = attrs.get("output.value") or attrs.get("output")
    if value.__class__ is str and value.startswith("{") and value.find('"error"', 0, 48) != -1:
        record = json_value(value)
        said = record.get("error") if isinstance(record, dict) and record.get("type") == "error" else None
        if isinstance(said, dict):
            return ": ".join(text(said[k]) for k in ("name", "message") if said.get(k) not in (None, "")) or text(said)
        if said not in (None, ""):
            return text(said)
    reasons = (attrs.get("gen_ai.response.finish_reasons") or attrs.get("ai.response.finishReason")
               or attrs.get("llm.finish_reason"))
    # text that holds neither the word nor an escape cannot parse to "error": not parsed (most model calls' "stop")
    if reasons is not None:
        if reasons.__class__ is str and ("error" in reasons or "\\" in reasons):
            reasons = json_value(reasons)
        if reasons == "error" or (isinstance(reasons, (list, tuple)) and "error" in reasons):
            return "the model call stopped with finish reason 'error'"
    said = attrs.get("gen_ai.output.messages")
    if said.__class__ is str and '"error"' in said:  # parsed only when it names "error"
        for message in json_value(said) if said[:1] == "[" else ():
            if isinstance(message, dict) and message.get("finish_reason") == "error":
                words = " ".join(text(p.get("content")) for p in message.get("parts") or () if isinstance(p, dict)
                                 and p.get("type") == "text").strip()
                return f"stopped with finish reason 'error': {words}" if words else "stopped with finish reason 'error'"
    return None


def _document(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {"text": text(doc)}
    content = doc["content"] if "content" in doc else doc.get("text")
    out: dict[str, Any] = {"text": content if isinstance(content, str) else text(content)}
    found = doc.get("id")
    if found is not None and found != "":
        out["id"] = found if found.__class__ is str else str(found)
    score = doc.get("score")
    if score.__class__ is float:  # most scores: the test below, answered at once
        out["score"] = score
        return out
    if isinstance(score, str):
        try:
            score = float(score)
        except ValueError:
            score = None
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        out["score"] = float(score)
    return out
