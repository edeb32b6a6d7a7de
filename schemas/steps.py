"""A run whose model calls are traces of their own: an application with no span of its own around its tool loop,
traced only by its model client's instrumentation (LiteLLM's ``otel`` callback: every ``completion()`` is a root),
exports the call that asks for a tool and the call that is sent the tool's result as two traces. The first makes no
turn (``Assembly.steps``: it answered nothing, a *step left open*); the second is the turn. Both are one run.

The rule, over traces each assembled by ``vigil.schemas.spans``:

- **A step left open says what it was sent and what it asked for**: the conversation of its model call (the input
  messages) and the tool calls of its answer (names and arguments), its ``Step.key``; with its usage and when it
  started.
- **A run is one application's**: the key is the conversation as one service (``service.name``) sent it, as a model
  call's twin is (``call_key``). The same conversation and tool calls sent by two applications of a project (one
  scripted question asked through two frameworks, a test corpus replayed) are two runs' steps, and a key's bound
  (``MAX_PER_KEY`` in the worker) counts one application's steps: another's never push a run's own out.
- **A turn whose conversation continues a step of another trace continues that step's run.** After the turn's last
  user words, each assistant message of tool calls is a step of the run; one that no model call of the turn's own
  trace asked for (``asked_here``) was asked in another trace, by a call that was sent the conversation before that
  message and asked for those calls: the turn's ``wanted`` keys. The conversation is the evidence, not the tool calls'
  ids alone: LiteLLM exports the asking call's tool calls without their ids (they travel only in the next call's
  input), and a whole conversation followed by the same calls is stronger evidence than an id.
- **The latest such step, started before the turn started, that no other turn took** joins it (``pick``): the same
  question asked twice by one application leaves two steps with one key, and each run takes its own. A step joins
  at most one turn; the turn that took it takes it again when its trace is assembled again (late spans), so the
  join is decided at the turn's first assembly.
- **The run's usage is summed over its calls**: the turn's own, plus each joined step's once; the turn names the
  steps' traces in ``metadata["vigil.continues"]``. Its tools are the union
  of its calls' already: the calls a joined step asked for are in the turn's conversation (that is what matched),
  and the turn's tool calls are read from it. Its question, answer and start stay the turn's (the started-at of the
  answering call: a step's earlier start is not read back).
- **Per project**: a step is its project's (the sender's key); a turn joins only its own project's steps.
- **What is not joined**: a step whose trace is assembled after the turn that continues it (the turn is stored with
  its own usage; the step stays a counted step), a step forgotten (expired or evicted: ``vigil.worker.assembly.steps``),
  a turn whose conversation states no user words, and a step whose call exported no tool call at all.

**A tool message answers the tool call whose id it names.** An instrumentation may drop the assistant message that
asked for tools from the conversation it writes (OpenLIT writes no assistant message that has no text: LlamaIndex's
workflow agent, traced only by OpenLIT's model client, sends each model call as a trace of its own), so the call sent
a tool's result states only the tool message: its call id and the result. The call that asked, in a trace of its own,
states the tool's name and arguments, and that id, in its output. Tool call ids are made to tie a result to its call:

- **A step left open keeps the calls it asked with their ids** (``Step.calls``: name, arguments, id), under each
  call's ``id_key`` (the service, the id): a run is one application's, as for the conversation's key.
- **A turn's run names calls it does not state** (``unasked``): the tool messages after its last user words whose id
  no call of the turn states (no assistant message of its conversation, no tool span, no model call of its own trace
  asked for it). Each is the call a step of its project and service asked with that id; of several, chosen as a step
  is (``pick``: the one the turn took already, else the latest that started before the turn and no other turn took).
- **The turn takes the call** (``give_calls``): its name and arguments, its id, and the tool message's text as its
  result (``conventions.result_text``); its error as any call read from a conversation (none of its own: a failed tool
  span in a trace of its own gives it one, ``tell``). The turn's calls are in the order their tool messages were sent
  (a call no tool message answers keeps its place after the one before it); the turn names the asking calls' traces
  in ``metadata["vigil.tool_calls_from"]``, and their usage is the run's (each step once, with the steps its
  conversation continues, in ``metadata["vigil.continues"]``).
- **Not named**: a tool message before the run's user words (an earlier run's), an id no kept step of the project and
  service asked (another project's step never: the id is looked up only among the turn's own project's), a step
  forgotten, expired or taken by another turn, or whose trace is assembled after the turn's first assembly.

**One model call written by two instrumentations, each in a trace of its own, is one call.** An instrumentation
that never makes its span current (OpenLLMetry JS's LangChain handler: a callback opens each span with no parent)
writes a model call's span as a trace of its own, and the model client's instrumentation writes the same call's span
as another: two turns of the same words and the same answer. The rule within a trace (``vigil.schemas.spans``: an
LLM span beside another at the same time, sent the same conversation, written by another instrumentation) holds
across traces:

- **A trace that is one model call** (``lone``): its only turn's root is an LLM span with no parent, the turn holds
  no other GenAI span (no agent, tool, retriever or other LLM call), states user words and answered (assistant text).
- **Two such traces are one call** when they belong to one project (the sender's key) and one service
  (``service.name``), were written by two instrumentations (their scopes, both stated, differ), were sent the same
  conversation (its roles, and the words of its user and system messages: each layer writes the assistant's tool
  calls and the tool messages its own way, as within a trace) and gave the same answer text, at the same time (their
  times overlap): their ``Call.key`` (service, conversation, answer) is one.
- **The one around the other is the wrapper** and makes no turn: it started first (together: ended last), as within
  a trace; the other saw the wire (the tool calls' ids, its own usage) and is the run's turn. The wrapper's trace is
  counted ``joined`` (to the call it is), never silent.
- **One call is written once by each instrumentation**: a call stands for at most one call of each other
  instrumentation (its entry's ``took``: ``decide``), so two users who ask the same words at once through both layers make two turns;
  calls of one instrumentation never stand for each other (concurrent samples of one prompt are calls of their own).
- **Decided once, at a trace's first assembly; a stored turn is never removed.** A call whose twin was already
  decided (a trace assembled in an earlier sweep) yields to it, wrapper or not: the turn stored stays, and the later
  trace is the one counted ``joined``. A trace assembled again (late spans) decides as it did; a trace whose turn was
  stored before its call was known never yields.
- **What is not one call**: a call inside a run (its trace holds more than the call), a failed call (no answer),
  calls of one instrumentation, of another service or project, at other times, or a call forgotten (expired or
  evicted with the steps: ``vigil.worker.assembly.steps``).

``once`` is run before the steps rule, so a wrapper's turn takes no step.

**A tool that failed in a trace of its own failed in the run that was told so.** The same instrumentations write a
tool's call as a trace of its own too; a run's turn then reads its tool calls from its model calls' conversation (the
call asked, the tool message sent back), which states a tool's error only as the text the model was sent. Across
traces, as within one (``vigil.schemas.spans``: a tool span paired with the model's call by its tool and arguments,
its error from its status or ``exception`` event):

- **A failed tool call in a trace of its own** (``failure``): the trace made no turn and holds no LLM call, its one
  top span is a tool span that failed (``conventions.error``), stating the call's arguments; kept with what it
  said of its error (the error, its status message, its ``exception`` event's message) under its ``failure_key``
  (service, arguments).
- **It is the call of a turn of its project and service** (``failed_here``) whose trace holds no tool span of its own,
  whose conversation holds a call of those arguments with no error, of its tool (or the span names no tool any call
  of the turn names: LangChain.js names a tool span by its class), of its id when the span states one, **whose tool
  message states what the span said of its error** (the model was told of this failure), and that ended before the
  turn's answering call started. Of several, the one the turn took already, else the latest no other turn took
  (the same call failing the same way in two runs: each run takes its own).
- The call's error is the span's; the turn names the tool spans' traces in ``metadata["vigil.tool_errors_from"]``.
  Not joined: a span whose trace is assembled after the turn (the stored turn is not scored again), a span
  forgotten (expired or evicted with the steps), a span that succeeded (the tool message already says its result).

Pure: ``left`` reads a trace's open steps (with the calls they asked), ``wanted`` a turn's keys, ``unasked`` the ids
its tool messages name that it does not state, ``give_calls`` gives it the kept calls of those ids, ``fitting`` and ``pick`` choose among the steps
of a key;
``keep`` and ``take`` apply it with a dict for the worker's state, ``join`` to the traces of a file (a test,
``vigil explain-trace``); ``lone`` reads the call a trace is, ``decide`` settles a call among the calls of its key,
``once`` applies it to the traces of a file; ``failure`` reads the failed tool call a trace is, ``failed_here``
and ``evidence`` which calls of a turn it may be, ``tell`` gives a turn the failures of a pool (``join``: a file).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vigil.schemas import conventions
from vigil.schemas.conventions import sent, without_stack
from vigil.schemas.links import states_user_words
from vigil.schemas.trace import MAX_SPANS

__all__ = ["CALLS_METADATA", "CONTINUES_METADATA", "FAILURES_METADATA", "Call", "Failure", "Joined", "Step", "add_usage",
           "asked_here", "call_key", "decide", "drop", "evidence", "failed_here", "failure", "failure_key", "fitting",
           "give", "give_calls", "id_key", "inner_first", "join", "keep", "key", "left", "lone", "once", "pick",
           "service", "start_ns", "take", "tell", "unasked", "wanted"]

CONTINUES_METADATA = "vigil.continues"  # the traces of the steps a turn continues, comma-separated
FAILURES_METADATA = "vigil.tool_errors_from"  # the traces of the failed tool calls a turn's calls are, comma-separated
CALLS_METADATA = "vigil.tool_calls_from"  # the traces of the model calls that asked for calls a turn names by id only


@dataclass(frozen=True)
class Step:
    """A step left open: its key (what it was sent and asked for), its trace, when it started (ns: an end can come
    after the next call started, as a streamed call's span ends when its instrumentation has read the stream), its
    usage, and the calls it asked that have an id (``{"name", "arguments", "id"}`` each)."""

    key: str
    trace_id: str
    start: int
    prompt_tokens: int
    completion_tokens: int
    calls: tuple[dict[str, Any], ...] = ()


def _message(m: Mapping[str, Any]) -> list[Any]:
    calls = [[c.get("name"), c.get("arguments"), c.get("id")] for c in m.get("tool_calls") or ()]
    return [m.get("role"), m.get("content") or "", calls, m.get("tool_call_id")]


def _line(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n"


def _sealed(conversation: Any, calls: Iterable[Mapping[str, Any]]) -> str:
    """The key: ``conversation`` (a hash of the messages so far) followed by the calls asked."""
    conversation.update(_line([[c.get("name"), c.get("arguments")] for c in calls]))
    return conversation.hexdigest()[:32]


def key(messages: Iterable[Mapping[str, Any]], calls: Iterable[Mapping[str, Any]], service: str) -> str:
    """The key of a model call of ``service`` sent ``messages`` that asked for ``calls`` (names and arguments; ids
    left out)."""
    conversation = hashlib.sha256(_line(["service", service]))
    for m in messages:
        conversation.update(_line(_message(m)))
    return _sealed(conversation, calls)


def _asked(outputs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [c for m in outputs if m["role"] == "assistant" for c in m["tool_calls"]]


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def left(spans: Iterable[Mapping[str, Any]], step_ids: Iterable[str]) -> list[Step]:
    """The steps left open in a trace (``step_ids``: ``Assembly.steps``) that asked for tool calls."""
    by_id = {s["span_id"]: s for s in spans}
    sender = service(by_id.values())
    out = []
    for span_id in step_ids:
        span = by_id.get(span_id)
        if span is None:
            continue
        inputs, outputs, _ = conventions.io(span)
        calls = _asked(outputs)
        if not calls:
            continue
        prompt, completion = conventions.usage(span["attributes"])
        named = tuple({"name": str(c.get("name") or ""), "id": c["id"],
                       "arguments": c["arguments"] if isinstance(c.get("arguments"), dict) else {}}
                      for c in calls if isinstance(c.get("id"), str) and c["id"])
        out.append(Step(key(inputs, calls, sender), span["trace_id"], int(span["start"]), _count(prompt),
                        _count(completion), named))
    return out


def id_key(service: str, call_id: str) -> str:
    """The key of a tool call a model call of ``service`` asked with the id ``call_id``."""
    return hashlib.sha256(_line(["id", service, call_id])).hexdigest()[:32]


def unasked(turn: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The tool messages of a turn's run (after its last user words) whose call id no call of the turn states, nor
    any assistant message of its conversation: (the id, the tool message's text), once each, in conversation order."""
    messages = list(turn.get("input") or ())
    users = [i for i, m in enumerate(messages) if m.get("role") == "user" and m.get("content")]
    if not users or not any(m.get("role") == "tool" for m in messages[users[-1]:]):
        return []
    stated = {c.get("id") for c in turn.get("tool_calls") or ()} | {
        c.get("id") for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()}
    out: dict[str, str] = {}
    for m in messages[users[-1] + 1:]:
        found = m.get("tool_call_id")
        if m.get("role") == "tool" and isinstance(found, str) and found and found not in stated and found not in out:
            out[found] = conventions.result_text(m.get("content") or "")
    return list(out.items())


def give_calls(turn: dict[str, Any], results: Mapping[str, str], found: Iterable[Mapping[str, Any]]) -> list[str]:
    """A turn's calls named only by its tool messages' ids (``results``: ``unasked``, by id), given the kept calls of
    those ids (``found``: ``{"name", "arguments", "id", "trace"}`` each), each with its tool message's text as its
    result, the turn's calls in the order their tool messages were sent; returns the traces that asked, which the turn
    names in ``metadata["vigil.tool_calls_from"]``."""
    found = [f for f in found if f["id"] in results]
    if not found:
        return []
    calls = list(turn.get("tool_calls") or ()) + [
        {"name": f["name"], "arguments": dict(f["arguments"]), "id": f["id"], "result": results[f["id"]]}
        for f in found]
    sent = {m.get("tool_call_id"): i for i, m in enumerate(turn.get("input") or ()) if m.get("role") == "tool"}
    places, last = [], -1
    for c in calls:  # a call no tool message answers keeps its place after the one before it
        last = sent.get(c.get("id"), last)
        places.append(last)
    turn["tool_calls"] = [c for _, c in sorted(zip(places, calls, strict=True), key=lambda pair: pair[0])]
    traces = list(dict.fromkeys(f["trace"] for f in found))
    turn.setdefault("metadata", {})[CALLS_METADATA] = ",".join(traces)
    return traces


def asked_here(spans: Iterable[Mapping[str, Any]]) -> set[str]:
    """The keys of every model call of a trace that asked for tool calls: steps the trace holds itself."""
    spans = list(spans)
    sender = service(spans)
    out = set()
    for span in spans:
        if conventions.kind(span) != "llm":
            continue
        inputs, outputs, _ = conventions.io(span)
        if calls := _asked(outputs):
            out.add(key(inputs, calls, sender))
    return out


def wanted(turn: Mapping[str, Any], here: set[str] | None = None, *, sender: str) -> list[str]:
    """The keys of the steps a turn's conversation continues that its own trace did not ask (``here``:
    ``asked_here``), in conversation order: the assistant messages of tool calls after its last user words; ``sender``
    the service of the turn's trace (``service``)."""
    messages = list(turn.get("input") or ())
    users = [i for i, m in enumerate(messages) if m.get("role") == "user" and m.get("content")]
    if not users or not any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages[users[-1]:]):
        return []
    out = []
    conversation = hashlib.sha256(_line(["service", sender]))  # the conversation so far, one message at a time
    for i, m in enumerate(messages):
        if i > users[-1] and m.get("role") == "assistant" and m.get("tool_calls"):
            found = _sealed(conversation.copy(), m["tool_calls"])
            if here is None or found not in here:
                out.append(found)
        conversation.update(_line(_message(m)))
    return out


def start_ns(turn: Mapping[str, Any]) -> int:
    """When a turn started, in nanoseconds (its ``started_at``)."""
    return int(datetime.fromisoformat(turn["started_at"]).timestamp() * 1e9)


def fitting(candidates: Iterable[Mapping[str, Any]], taker: str, start: int) -> list[Mapping[str, Any]]:
    """Of a key's steps (``{"trace", "start", "taken"}`` each), those a turn (``taker``: its trace, started at
    ``start`` ns) may join: the one it took already, else those that started before it and no other took."""
    candidates = list(candidates)
    mine = [c for c in candidates if c.get("taken") == taker]
    return mine[:1] or [c for c in candidates if not c.get("taken") and c["start"] < start and c["trace"] != taker]


def pick(candidates: Iterable[Mapping[str, Any]], taker: str, start: int) -> Mapping[str, Any] | None:
    """Of a key's steps, the one a turn joins (``fitting``): the one it took already, else the latest."""
    fits = fitting(candidates, taker, start)
    return max(fits, key=lambda c: (c.get("taken") == taker, c["start"])) if fits else None


def add_usage(turn: dict[str, Any], steps: Iterable[Step | Mapping[str, Any]]) -> str:
    """Add the joined steps' usage to a turn's, each step once (a step that asked two calls the turn names by id is
    joined for each); returns why, in words (for ``vigil explain-trace``)."""
    steps = list(steps)
    get = (lambda s, k: s[k]) if steps and isinstance(steps[0], Mapping) else getattr
    once: dict[tuple[str, int], Any] = {}
    for step in steps:
        once.setdefault((get(step, "trace_id"), get(step, "start")), step)
    steps = list(once.values())
    usage = dict(turn.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0})
    usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + sum(get(s, "prompt_tokens") for s in steps)
    usage["completion_tokens"] = usage.get("completion_tokens", 0) + sum(get(s, "completion_tokens") for s in steps)
    turn["usage"] = usage
    metadata = turn.setdefault("metadata", {})
    earlier = [t for t in (metadata.get(CONTINUES_METADATA) or "").split(",") if t]
    traces = ", ".join(dict.fromkeys([*earlier, *(get(s, "trace_id") for s in steps)]))
    metadata[CONTINUES_METADATA] = traces.replace(" ", "")
    return (f"it continues a run whose earlier model calls are traces of their own ({traces}): after its user words "
            "it holds the tool calls those calls asked for (sent the same conversation before them, or named by id in "
            "its tool messages), so their usage is the run's")


def keep(pool: dict[str, list[dict[str, Any]]], trace: str, spans: list[dict[str, Any]], result: Any,
         named: dict[str, list[dict[str, Any]]] | None = None) -> None:
    """Add a trace's open steps (``result``: its assembly) to ``pool`` (key -> its steps, as the worker keeps them),
    and the calls they asked with an id to ``named`` (``id_key`` -> the calls of that id)."""
    sender = service(spans) if named is not None else ""
    for step in left(spans, result.steps):
        entry = {**step.__dict__, "trace": trace, "taken": ""}
        pool.setdefault(step.key, []).append(entry)
        for call in step.calls if named is not None else ():
            named.setdefault(id_key(sender, call["id"]), []).append({
                **call, "trace": trace, "trace_id": trace, "start": step.start, "prompt_tokens": step.prompt_tokens,
                "completion_tokens": step.completion_tokens, "taken": ""})


def take(pool: dict[str, list[dict[str, Any]]], trace: str, spans: list[dict[str, Any]], result: Any,
         named: Mapping[str, list[dict[str, Any]]] | None = None,
         origins: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """Join a trace's turns (``result``: its assembly, changed in place) to the steps of ``pool`` they continue, and
    give them the calls of ``named`` their tool messages name by id (``keep``), by the module's rule; returns why each
    joined turn's usage is the run's, by span id, and adds to ``origins`` (by span id) the trace each given call's id
    was asked in."""
    why = {}
    here = None
    sender = service(spans)
    for turn in result.turns:
        joined = []
        for k in (k for k in wanted(turn, sender=sender) if k in pool):
            here = asked_here(spans) if here is None else here  # only when a step of the pool may be taken
            if k in here:
                continue
            found = pick(pool.get(k, ()), trace, start_ns(turn))
            if found is not None:
                found["taken"] = trace
                joined.append(found)
        ids = unasked(turn) if named else []
        given = []
        for call_id, _ in ids:
            found = pick(named.get(id_key(sender, call_id), ()), trace, start_ns(turn))
            if found is not None:
                found["taken"] = trace
                given.append(found)
        if given:
            give_calls(turn, dict(ids), given)
            if origins is not None:
                origins.setdefault(turn["span_id"], {}).update({f["id"]: f["trace"] for f in given})
            joined += given  # a step that asked several of them counts once (``add_usage``)
        if joined:
            why[turn["span_id"]] = add_usage(turn, joined)
    return why


@dataclass(frozen=True)
class Joined:
    """What the rules decided over the traces of a file (``join``), for ``vigil explain-trace``: why each joined
    turn's usage is the run's (``usage``, by its span id), the call each trace that made no turn is (``calls``, by
    that trace: the call's trace and span), the failures a turn's calls are (``told``, by its span id: each
    call's index, the failure's trace and span), and the trace that asked each call a turn names only by its id
    (``named``, by its span id: call id -> trace)."""

    usage: dict[str, str]
    calls: dict[str, tuple[str, str]]
    told: dict[str, list[tuple[int, str, str]]]
    named: dict[str, dict[str, str]] = field(default_factory=dict)


def join(traces: Mapping[str, list[dict[str, Any]]], results: Mapping[str, Any]) -> Joined:
    """The rule over the traces of a file (``results``: each trace's assembly, changed in place): one model call
    written twice made one turn (``once``), every open step and failure kept, then the turns joined and told, in the
    order the traces started; returns what it decided."""
    calls = once(traces, results)
    order = sorted(traces, key=lambda t: min((s["start"] for s in traces[t]), default=0))
    pool: dict[str, list[dict[str, Any]]] = {}
    named: dict[str, list[dict[str, Any]]] = {}
    failures: dict[str, list[dict[str, Any]]] = {}
    for trace in order:
        keep(pool, trace, traces[trace], results[trace], named)
        if (found := failure(traces[trace], results[trace])) is not None:
            failures.setdefault(found.key, []).append({**found.__dict__, "taken": ""})
    why: dict[str, str] = {}
    told: dict[str, list[tuple[int, str, str]]] = {}
    origins: dict[str, dict[str, str]] = {}
    for trace in order:
        why.update(take(pool, trace, traces[trace], results[trace], named, origins))
        for turn in results[trace].turns:
            if given := tell(turn, service(traces[trace]), failures, trace):
                told[turn["span_id"]] = [(index, entry["trace_id"], entry["span_id"]) for index, entry in given]
    return Joined(why, calls, told, origins)


# -- one model call written by two instrumentations ---------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A trace that is one model call that answered (``lone``): its key (``call_key``), its trace and span, the
    instrumentation that wrote it (its scope) and when it ran (ns)."""

    key: str
    trace_id: str
    span_id: str
    scope: str
    start: int
    end: int


def call_key(service: str, turn: Mapping[str, Any]) -> str:
    """What two layers of one model call both say: the service, the conversation sent (``conventions.sent``: its
    roles, and the words of its user and system messages) and the answer."""
    digest = hashlib.sha256(_line(["service", service]))
    for role, words in sent(turn.get("input") or ()):
        digest.update(_line([role, words]))
    digest.update(_line(["answer", turn.get("output") or ""]))
    return digest.hexdigest()[:32]


def lone(spans: Iterable[Mapping[str, Any]], result: Any) -> Call | None:
    """The model call a trace is (``result``: its assembly), or ``None``: its only turn's root is an LLM span with no
    parent and a stated scope, the turn holds no other GenAI span, states user words and answered."""
    if len(result.turns) != 1 or result.joined:
        return None
    turn = result.turns[0]
    if not turn.get("output") or not states_user_words(turn):
        return None
    skeleton = turn.get("spans") or ()
    kinds = [s.get("kind") for s in skeleton]
    if len(kinds) >= MAX_SPANS or kinds.count("llm") != 1 or any(k not in ("llm", "other") for k in kinds) or next(
            (s.get("kind") for s in skeleton if s.get("span_id") == turn["span_id"]), None) != "llm":
        return None
    root = next((s for s in spans if s["span_id"] == turn["span_id"] and not s.get("log")), None)
    if root is None or root.get("parent_id") or root.get("joined") or not root.get("scope"):
        return None
    service = str((root.get("resource") or {}).get("service.name") or "")
    return Call(call_key(service, turn), root["trace_id"], root["span_id"], str(root["scope"]), int(root["start"]),
                int(root["end"]))


def inner_first(calls: Iterable[Call]) -> list[Call]:
    """Calls in the order they are decided: the one that started last first (together: the one that ended first),
    so a wrapper finds the call it wraps decided before it."""
    return sorted(calls, key=lambda c: (-c.start, c.end, c.trace_id))


def decide(entries: list[dict[str, Any]], call: Call, *, fixed: bool = False) -> tuple[str, str] | None:
    """Settle ``call`` among the calls of its key (``entries``, latest start first, each ``{"trace", "span", "scope",
    "start", "end", "yielded", "to", "took"}``, changed in place): the (trace, span) of the call it is one with, or
    ``None`` (its turn is its own). A call decided before decides as it did; ``fixed`` (its turn is stored): none."""
    for entry in entries:
        if entry["trace"] == call.trace_id:
            return (entry["yielded"], entry["to"]) if entry["yielded"] else None
    found = None
    if not fixed:
        found = next((e for e in entries if not e["yielded"] and e["scope"] != call.scope and call.scope not in e["took"]
                      and e["start"] <= call.end and call.start <= e["end"]), None)
    if found is not None:
        found["took"].append(call.scope)
    entries.append({"trace": call.trace_id, "span": call.span_id, "scope": call.scope, "start": call.start,
                    "end": call.end, "yielded": found["trace"] if found else "", "to": found["span"] if found else "",
                    "took": []})
    entries.sort(key=lambda e: -e["start"])
    return (found["trace"], found["span"]) if found else None


def drop(result: Any) -> None:
    """A trace's assembly once its call is another trace's turn: no turn (the spans it read are still its own)."""
    result.turns = []
    result.chains = {}
    result.why = {}


def once(traces: Mapping[str, list[dict[str, Any]]], results: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The rule over the traces of a file (``results``: each trace's assembly, changed in place): each trace that is
    one model call written twice, by the wrapper, makes no turn; returns, by such trace, the (trace, span) of the
    call it is."""
    pool: dict[str, list[dict[str, Any]]] = {}
    out = {}
    for call in inner_first(c for t in traces if (c := lone(traces[t], results[t])) is not None):
        found = decide(pool.setdefault(call.key, []), call)
        if found is not None:
            drop(results[call.trace_id])
            out[call.trace_id] = found
    return out


# -- a tool that failed in a trace of its own ---------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A tool call that failed in a trace of its own (``failure``): its key (``failure_key``), its trace and span, the
    tool its span names, the call id it states (``""``: none), its error, what it said of the error (the texts a
    tool message may quote), when it ran (ns)."""

    key: str
    trace_id: str
    span_id: str
    name: str
    call_id: str
    error: str
    said: tuple[str, ...]
    start: int
    end: int


def failure_key(service: str, arguments: Any) -> str:
    """What a failed tool span and the model's call of it both say: the service and the call's arguments."""
    return hashlib.sha256(_line(["tool", service, arguments])).hexdigest()[:32]


def service(spans: Iterable[Mapping[str, Any]]) -> str:
    """The service that sent a trace: the first ``service.name`` its spans' resources state ("" when none does; a span
    the intake kept no resource of has only the project it stamps)."""
    return next((name for s in spans if isinstance(name := (s.get("resource") or {}).get("service.name"), str)
                 and name), "")


def failure(spans: list[Mapping[str, Any]], result: Any) -> Failure | None:
    """The failed tool call a trace is (``result``: its assembly), or ``None``: the trace made no turn and holds no
    LLM call, and its one top span is a tool span that failed, stating its arguments."""
    if result.turns or result.steps or not result.no_turn.startswith("no LLM call"):
        return None
    tops = [s for s in spans if not s.get("log") and not s.get("parent_id")]
    if len(tops) != 1 or conventions.kind(tops[0]) != "tool":
        return None
    span = tops[0]
    call = conventions.tool(span)
    if not call.get("error") or not isinstance(call.get("arguments"), dict) or not call["arguments"]:
        return None
    raised = [e.get("attributes") or {} for e in span.get("events") or () if e.get("name") == "exception"]
    said = [call["error"], (span.get("status") or {}).get("message"), *(r.get("exception.message") for r in raised)]
    said = tuple(dict.fromkeys(without_stack(str(t)).strip()[:1000] for t in said if t and str(t).strip()))
    return Failure(failure_key(service(spans), call["arguments"]), span["trace_id"], span["span_id"],
                   str(call.get("name") or ""), str(call.get("id") or ""), str(call["error"])[:1000], said,
                   int(span["start"]), int(span["end"]))


def failed_here(turn: Mapping[str, Any], service: str) -> list[tuple[int, str]]:
    """The calls of a turn (index, ``failure_key``) that may have failed in a trace of their own: the turn's trace
    holds no tool span (its calls are read from its model calls' conversation), and the call has arguments, no
    error, and a tool message's text."""
    if any(s.get("kind") == "tool" for s in turn.get("spans") or ()):
        return []
    return [(i, failure_key(service, c["arguments"])) for i, c in enumerate(turn.get("tool_calls") or ())
            if not c.get("error") and isinstance(c.get("arguments"), dict) and c["arguments"]
            and isinstance(c.get("result"), str)]


def evidence(turn: Mapping[str, Any], index: int, entry: Mapping[str, Any], start: int) -> bool:
    """Whether a kept failure (``entry``: a ``Failure``'s fields, its end in the unit of ``start``) is the turn's
    call at ``index``: it ended before the turn (started at ``start``) started, it names the call's tool (or no tool
    any call of the turn names) and its id (when it states one), and the call's tool message states what it said."""
    calls = turn.get("tool_calls") or ()
    call = calls[index]
    named = entry["name"] == call.get("name") or entry["name"] not in {c.get("name") for c in calls}
    return (entry["end"] <= start and named and (not entry["call_id"] or entry["call_id"] == call.get("id"))
            and any(text in call["result"] for text in entry["said"]))


def tell(turn: dict[str, Any], service: str, pool: Mapping[str, list[dict[str, Any]]], taker: str,
         ) -> list[tuple[int, Mapping[str, Any]]]:
    """Give a turn (of trace ``taker``) the errors of the failures of ``pool`` (key -> kept failures, each with its
    ``taken``) its calls are, by the module's rule; returns each call given an error (its index) and its failure."""
    start, given = start_ns(turn), []
    for index, k in failed_here(turn, service):
        fits = [e for e in pool.get(k, ()) if evidence(turn, index, e, start) and e["taken"] in ("", taker)
                and all(e is not g for _, g in given)]
        if fits:
            entry = max(fits, key=lambda e: (e["taken"] == taker, e["start"]))
            entry["taken"] = taker
            given.append((index, entry))
    give(turn, given)
    return given


def give(turn: dict[str, Any], given: Iterable[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """Each call of a turn (by index) the error of the failure it is (``tell``); returns the failures' traces, which
    the turn names in ``metadata["vigil.tool_errors_from"]``."""
    traces = []
    for index, entry in given:
        turn["tool_calls"][index]["error"] = entry["error"]
        traces.append(entry["trace_id"])
    if traces:
        turn.setdefault("metadata", {})[FAILURES_METADATA] = ",".join(traces)
    return traces
