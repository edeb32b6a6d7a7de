"""Whole traces become turns: the one place where spans (OTLP over ``vigil intake``, or the in-process
``producers.GenAISpanProcessor``) are read as agent turns. What each span *says* (its kind, messages, documents, tool
call, agent and session) is read by the conventions' modules (``vigil.schemas.conventions``); this module decides
which spans make one turn and what the turn is.

Input: the spans of one trace as plain records (``SpanRecord``: hex ids, nanosecond times, flat attributes, span
events, resource attributes). Output: turn dicts shaped like ``schemas.Turn`` (validated later, by the worker).

**One turn per agent run, whatever the parent.** The runs, first rule that finds any:

1. *agent roots*: an agent span (GenAI ``invoke_agent``, OpenInference ``AGENT``, OpenLLMetry ``workflow`` /
   ``agent``, the Vercel AI SDK's ``generateText`` ..., or a framework's chain at the top of the trace) with no agent
   above it and an LLM call under it (or that failed, or states its answer itself and the user words it was asked);
2. *container roots*: the topmost plain server or consumer span (an HTTP request, an RPC, a queue message), framework
   chain (OpenInference ``CHAIN``) or OpenLLMetry ``task`` with LLM calls under it;
3. *waiting roots*: spans whose parent has not arrived (a slow root is exported last) are grouped by that parent,
   which becomes the turn's span id, so when the root arrives the trace assembles again under the same turn id.
   Those are the pieces of one run: its LLM calls and the spans beside them. A top that holds LLM calls under it (a
   span around a run: an unclaimed ``Agent.run``) is read where it stands, by rule 4, as it will be when its parent
   arrives; and so are tops that answer different user words (the container rule below): the parent may be a
   process-wide span that holds every run of the application and is exported when the application stops;
4. otherwise, LLM calls with no LLM above them, taken in start order under their common parent: a call whose output
   is only tool calls is a *step* of the next call that answers (its tool calls and the tool spans beside it join
   that turn); a step no call under its parent answers joins the call that was sent its tool calls' results (by
   tool call id), whatever span each sits in (a framework's tracer that gives each agent step a span of its own);
   and a step that no call answers in this trace (an app whose every call is its own trace) is not a turn:
   ``Assembly.steps`` counts it. **A call whose response was recorded apart is one call**: a call that states no
   output and did not fail, sent the conversation a later call beside it states an output for, is that call's request
   (a streamed call whose span ended when the stream was handed back, its response written as a record of its own
   when the stream was read: Logfire's ``streaming response …``); it joins the run as a step does, never a turn or a
   step of its own.

**A span whose children are several agent runs is a container, not a run** (a conversation, an OpenAI Agents
``trace(group_id=...)``, a session wrapper): it makes no LLM call of its own, and the runs under it answer different
user words. Each run is then a turn, and the runs are turns of one session (the container's session id, else the
trace id). Agents under one another that answer the same words (a hand-off, a delegate) are one run, and so are an
agent's own steps: agent spans that name the agent the span above them names (OpenLIT's smolagents ``step_N``).
**A hand-over keeps the request**: an agent run that did not fail and whose last model call asked for tools (it
ended on a call, a transfer, not on an answer), followed by a run whose first model call was sent the user words that
run was asked, handed that request on: the two are one run of the user's request, rooted at the first, whichever agent
answers (Google ADK's ``sub_agents`` transfer: the agents' spans side by side under its ``invoke_workflow`` span,
which is exported last; AutoGen's ``Swarm``). **A span that states the request is its run**: agent runs under a span
that states the user's words, each sent words that hold them (the framework wraps the request in what it tells each
agent: a Strands ``Swarm``'s ``Context:\nUser Request: …`` to the agent it starts and to each one handed to), answer
that one request: one run, rooted at that span, not a container.

**A trace with no LLM call is no turn** (an index build, an embedding batch, an ingestion job): ``Assembly.no_turn``
says why a trace made none, for the funnel and the log line. **A resume asked nothing**: an agent span with no LLM
call under it is a run by the answer it states only when it states the user words it was asked too; one that states
an answer and no user words answered no request of its own, it handed back the state of a run made before (LangGraph's
``invoke(Command(resume=…))`` after a human reviewed the paused run's answer, a graph whose resumed node calls no
model: its input the command, its output the thread's messages), and makes no turn.

**Work a run started in a trace of its own is that run's** (``vigil.schemas.links``): a trace whose runs state no
user words, linked (an OTel span link) to one span of another trace, joins the run that holds that span. ``Assembly.link``
says which span a trace's work would join; spans marked ``joined`` (``links.graft``) are assembled as that trace's
runs (by these rules) and added to the run that holds the span their link names, their top spans under it: the run
keeps its question, takes its last answer in time (the joined work's, or its failure, unless a call of its own answered
after that work), and its tool calls, contexts and usage.

**The LLM calls are the ground truth** for what the user said and what the model answered. An LLM span with another
LLM span under it is one model call seen by two layers (a framework's generator component around the model client's
request; or beside it at the same time with the same conversation, written by another instrumentation that never
made its span current): the conversation, the tool calls the model asked for, its answer and the model's name are read
from the inner one, which saw the wire (the tool calls' ids, the tool messages' text, the reply's text), and its tokens
count once. A wrapper's answer stands only where no inner call states one: a layer's own account of the reply can be
its packaging (OpenLLMetry's Haystack instrumentation writes the key of the generator's ``{"replies": [...]}``,
``replies``, as the assistant's content).

- *question*: the user's own words, the last user message with text in the run's conversation. A message made only
  of tool results is a tool message whatever role it carries (``conventions._parse.message``). **The user spoke to
  the entry agent**: where the answering call is another agent's than the run's first call (the agent each names,
  ``gen_ai.agent.name``, else the agent span above it names) and continues its conversation, user text beyond the
  first call's conversation was written in the run, by the framework, to the agent handed to: its account of what the
  agents before it did. A model call's conversation holds only its own agent's replies, so another agent's tool calls,
  results and text reach it as user messages (Google ADK's ``For context: [triage] called tool `transfer_to_agent` …``);
  the turn's input leaves them out, and what they retell is the run's tool calls and answer.
- *the root's input and output* count only when they are evidence of those words: text, a message list, an object
  with a known key (``question``, ``input``, ``task`` ...), a message among its arguments (``new_message``). A framework's state, keyword arguments or a Python repr
  say nothing (the conventions return no message for them). What a root states it was asked counts the same way
  wherever its convention states it (its input, or the tasks a crew's kickoff names: ``crew_tasks``). The root's user
  text counts only where the LLM calls' user words contain it (a framework wraps them: ``New task:\n…``, a prompt
  template such as ``Current Task: <task>\n\nThis is the expected criteria…``: the template loses to the words it
  wraps) or they carry none; a root that states nothing is spoken for by the first agent span under it that does,
  where the LLM calls wrap its words (OpenLIT's CrewAI crew span around its agent's). Else the LLM calls are read:
  the conversation of the first call, or of the answering call when it extends the first's (so the assistant's tool
  calls and ``tool_call_id`` are kept).
- *answer*: the run's final assistant text: the last assistant message with text of the root's output, else of the
  last LLM call that answers (has assistant text; a step asks only for tools, a failed call says nothing). **A run
  that answered nothing and did not fail has not answered yet**: a root whose output holds no assistant text (the
  conversation so far, ending on the model's tool calls), in a run none of whose calls answered, states no answer,
  and the run's calls are steps, not a turn (``Assembly.steps``), as rule 4's unanswered steps are: a run paused for
  a human (LangGraph's ``interrupt()`` ends the graph's ``invoke`` with the model's tool call unanswered, the state
  as its output) goes on in the trace of its resume, whose model call is sent that call's result, and
  ``vigil.schemas.steps`` joins the two: one turn, its usage both traces'. A root's
  text that holds the answering call's text and more wraps it, and loses to it as a template loses to the user's
  words (OpenLIT's streamed LangGraph run states every chunk of the stream joined, the tool results' among
  them), where that call is the run's last model call: a later call whose reply no span recorded (a stream handed
  back unread: LlamaIndex's workflow agent through MLflow) may have said the root's text, quoting a tool's result
  that holds the earlier call's (an agent's query-engine tool, its own model call under it). A model that hands in its answer through a final-answer tool (``final_answer``, ``final_result``)
  answered: that is the text.
- *tool calls*: the tool spans' calls (no tool above them in the run with no agent run or model call between; a
  final-answer tool is none), in start order,
  each named by its tool (``conventions.tool``: the convention's name attribute, else what the span name says), with
  the call's own arguments (the LLM's tool call it ran, else the span's input unwrapped from a Python call's ``args``
  / ``kwargs`` packaging; never the tool's parameter schema), paired with the LLM's tool calls by name and
  arguments (their ids, and the model's arguments where a span holds a bare value: also when the LLM's calls carry
  no ids; a span that names no tool the model asked for by the arguments alone, when one call no span names has
  them; a Griptape tool span, which names only its tool, with the model's call of one of its activities), results
  (a serialized tool message is its content; a framework's record of running the tool, its outcome, the result it
  holds, and its error the call's: ``conventions._parse.outcome``; a span that states none and did not fail, the tool message for its
  call's id; a span that states its call's id but no arguments, the arguments the model's call of that id gives), and errors from the span status, an ``exception``
  event (``exception.type``: ``exception.message``) or ``error.type``; with no tool spans, the calls the LLM calls
  asked for, with the results the tool messages give them (by ``tool_call_id``). **A run whose model calls are not
  traced states its calls in the conversation it reports**: with no LLM call and no tool span in the run, its calls
  are the assistant's tool calls in the conversation the run's root, else the nearest span above it, reports as its
  input or output and that ends in the run's answer (the framework's record of the run's exchange with the model),
  each with the result of the tool message answering its id (MLflow's CrewAI autolog traces neither the model calls
  nor the tools of CrewAI's native OpenAI provider; the ``Task.execute_sync`` span above the agent's run returns the
  ``TaskOutput``, whose ``messages`` are that exchange). **A tool message the framework
  says failed is the call's error**: where a call has no error from a span and its framework's own message says the
  call failed (Haystack's ``ToolCallResult.error``, in the conversation a pipeline returned: Haystack catches a
  tool's exception and sends the model its text), that message's text is the call's error. **Two spans of one call are one
  call**: spans of the same tool under a tool span (an instrumentation's span around the framework's own) give the
  call what they say beside it (its id, result, error). **A tool that runs an agent is a delegation**: a tool span
  with an agent run or a model call between it and a tool span under it (pydantic-ai's agent delegation, an agent
  offered as a tool) is a call of the run, and so is each call the delegated agent's model made under it: one user
  request is one run, whichever agent's model called the tool. **A call the model made and was answered is a call**:
  one of the LLM's tool calls that no tool span records, answered by a tool message for its id (the OpenAI Agents
  SDK answers a ``transfer_to_<agent>`` handoff itself, and most of its instrumentations write no span for it), is a
  call of the run beside the spans' calls, its result that message (not a final-answer tool), where each span's call
  is one the model asked for by id (an unpaired span may be that call's record). **A tool span inside a model call
  that records only the request is the call's output**, not a run: no result and no error, under the LLM span that
  asked for it (AgentOps' OpenAI instrumentation writes each tool call of a response as such a span,
  ``tool_call.<name>``, beside the application's own ``@tool`` span that ran it); a tool that ran inside the call (a
  streamed call's tools, Google ADK's) states what it returned or raised. **A span that records nothing of a call the model made is
  bookkeeping**, not a call: no arguments, result or error, and neither its id nor its tool among the calls the LLM
  calls asked for, when they say which (Google ADK's ``execute_tool (merged tools)`` beside the spans of a parallel
  step's calls).
- *usage*: the run's, each model call's once as the span nearest the wire states it (the LLM span with none under
  it, else the nearest wrapper around it that states any), summed; else the root's stated totals; never one
  wrapper's zeros. The model is the last LLM call's; the system prompt the root's, else the answering call's.
- *contexts*: retriever spans' documents, in start order, **each document once** (the same text and id): a retriever
  span inside another states the documents it hands up (LlamaIndex's ``retrieve`` around its ``_retrieve``, each a
  span of OpenLLMetry's), not a second retrieval.

**A failed run is a turn.** A run that ends in error without an answer (its root failed, or a span in it did and no
call answered) is a turn with no output, ``metadata["vigil.run"] = "failed"`` and the error's text in
``metadata["vigil.error"]`` (the root's error, followed by the last error under it when that says more): the worker
records it, counts it per agent and never scores it. A root's own output when no LLM call answered is no answer
when the root failed or the run's last model call did, whatever the root's status: no model said it, the text is the
failure's (Agno ends a run whose model failed with the error's text as its output; OpenLIT's span of that run ends OK).
Where the root states no error, the run's is one under it that says why: an error that says only that a span failed
(a status with no message: an HTTP client's span under the model call) loses to one that names it. A span failed when it says so in
what it reports, whatever its status (``conventions.error``: a model call's finish reason ``error``, an error object as
its output): a run whose model call failed and whose agent span never came (an instrumentation may export none for a
failed run) is still a failed run, its LLM call waiting for that parent (rule 3) with the user's words and no answer.

A turn whose LLM calls carry no text at all (content capture off) is still a turn, marked
``metadata["vigil.content"] = "missing"`` with the setting that turns it on (``vigil.content_setting``): the worker
records it and leaves it unscored, naming the setting. So is a turn whose LLM calls carry no text though its root
states the answer, when no span states the user's words (the calls' messages sent as log records that never reached
the intake): an answer judged against no question would be a confident wrong score. Its answer is kept.

The turn keeps the root's trace id and span id: assembling the same trace again, with spans that arrived late, gives
the same turn id, so its row and its scores are replaced, not duplicated.

Agent name, session and metadata: the conventions' (``gen_ai.agent.name``, ``agent.name``, OpenLLMetry's agent entity
name, ``ai.telemetry.functionId``, Langfuse's ``langfuse.trace.name``; ``gen_ai.conversation.id``, ``session.id``,
``traceloop.association.properties.session_id``, ``ai.telemetry.metadata.sessionId``, the ``group_id`` of an OpenAI
Agents SDK trace as Logfire writes it), else the resource's
``service.name``; a conversation id that is a model call's response id (the Responses API's ``previous_response_id``)
is no session by itself: ``Assembly.chains`` holds what each run says of it, and ``vigil.schemas.chains.join``
decides the session across traces; environment: the resource's ``deployment.environment[.name]``; project: the resource's
``vigil.project``; reference answer (ground truth for ``rag_correctness``: replayed or test traffic knows one, live
traffic seldom does): ``vigil.reference`` on any of the turn's spans; origin: ``vigil.origin`` on any of the turn's
spans (an agent sets it from vigil's ``X-Vigil-Origin`` header: ``vigil.producers.origin_of``), so vigil's own
traffic is never sampled.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from operator import itemgetter
from typing import Any, NotRequired, TypedDict

from vigil.schemas import chains as _chains
from vigil.schemas import conventions
from vigil.schemas import links as _links
from vigil.schemas.conventions.genai import INPUT_EVENTS
from vigil.schemas.trace import (
    MAX_SPANS,
    ORIGIN_ATTRIBUTE,
    ORIGINS,
    RELEASE_KEY,
    RELEASE_RESOURCE,
)

__all__ = ["BOOKKEEPING_METADATA", "CONTENT_EVENTS", "CONTENT_METADATA", "DETAILS_EVENT", "ERROR_METADATA", "PROJECT_RESOURCE",
           "RESOURCE_KEYS", "RUN_METADATA", "SETTING_METADATA", "Assembly", "SpanEvent", "SpanRecord", "assemble",
           "assembly", "attach_logs", "event_key", "is_bookkeeping", "is_genai", "log_record", "waiting_for_parent"]

PROJECT_RESOURCE = "vigil.project"  # the project a span is of: the sender's key's (the intake sets it), else its own
# The resource attributes assembly reads; a receiver may keep only these.
RESOURCE_KEYS = frozenset({"service.name", "service.version", "deployment.environment.name", "deployment.environment",
                           PROJECT_RESOURCE})

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


class SpanLink(TypedDict):
    trace_id: str
    span_id: str


class Joined(TypedDict):
    trace_id: str  # the trace the span came from
    under: str  # the span of this trace its trace's link names: its top spans hang under it


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
    links: NotRequired[list[SpanLink]]  # the spans of other traces it is linked to (``vigil.schemas.links``)
    links_more: NotRequired[bool]  # it had more links than the decoder keeps
    joined: NotRequired[Joined]  # a span of another trace whose work joins a run of this one (``links.graft``)


REFERENCE_ATTRIBUTE = "vigil.reference"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"  # a call's inputs, outputs and instructions, as one event
RUN_METADATA = "vigil.run"  # "failed": the run ended in error without an answer
ERROR_METADATA = "vigil.error"  # the failed run's error text
CONTENT_METADATA = "vigil.content"  # "missing": the instrumentation did not capture message content
SETTING_METADATA = "vigil.content_setting"  # the setting that turns capture on, for the library that wrote the turn
# The GenAI events assembly reads (as span events, or as log records sent to the intake's /v1/logs).
CONTENT_EVENTS = frozenset({*INPUT_EVENTS, "gen_ai.choice", "gen_ai.content.prompt", "gen_ai.content.completion",
                            DETAILS_EVENT})
_GENAI_PREFIXES = ("gen_ai.", "llm.", "input.value", "output.value", "retrieval.", "openinference.", "tool.",
                   "traceloop.", "ai.", "pydantic_ai.", "all_messages_events", "agent_name",
                   *conventions.haystack.KIND_KEYS,  # Haystack's agent runs and tool calls, not its every span
                   *conventions.genkit.KEEP_KEYS,  # Genkit's actions and chat turns, not its every step
                   *conventions.langfuse.KEEP_KEYS,  # Langfuse's observations
                   *conventions.mlflow.KEEP_KEYS,  # MLflow's traced spans
                   *conventions.logfire.KEEP_KEYS,  # the OpenAI Agents SDK's traces as Logfire writes them
                   *conventions.laminar.KEEP_KEYS,  # Laminar's spans
                   *conventions.agentops.KEEP_KEYS)  # AgentOps' decorators' spans
_CONTAINERS = ("server", "chain", "step")
_BY_TIME = itemgetter("start", "end")  # spans in start order, the shorter first
_SAYS_NOTHING = "error"  # conventions.error's text for a span that failed and says nothing more
_BY_START = itemgetter("start", "span_id")
_END = itemgetter("end")
_INPUT = itemgetter(0)  # a span's input messages, of its ``io``
_SPAN_ID = itemgetter("span_id")
_STARTED = itemgetter("started_at")


def is_genai(attributes: Mapping[str, Any], event_names: Iterable[str] = ()) -> bool:
    """Whether a span carries anything this module reads (cheap: key prefixes and event names, and Griptape's
    ``tags``, whose values say what its spans are)."""
    return any(key.startswith(_GENAI_PREFIXES) for key in attributes) or any(
        name.startswith("gen_ai.") for name in event_names) or conventions.griptape.tagged(attributes) is not None


@dataclass
class Assembly:
    """What one trace's spans make: its turns, the tool-call-only LLM calls no call in the trace answers, and, when
    the trace made no turn, why (``no_turn``)."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # span ids
    used: set[str] = field(default_factory=set)  # the span ids of every turn's root and members
    no_turn: str = ""  # why a trace with spans made no turn and no step ("" when it made one)
    why: dict[str, str] = field(default_factory=dict)  # a turn's span id -> which rule made its root the run
    read: dict[str, dict[str, str]] = field(default_factory=dict)  # a turn's span id -> where its parts were read
    chains: dict[str, _chains.Chain] = field(default_factory=dict)  # a turn's span id -> its response ids and
    # the conversation ids its spans state, for the session rule across traces (``chains.join``)
    link: tuple[str, str] | None = None  # the span of another trace whose run this trace's work joins (``links``)
    joined: dict[str, list[str]] = field(default_factory=dict)  # a turn's span id -> the traces whose work joined it

    def __init__(self) -> None:  # one per trace: the fields' defaults as literals, not a call of each factory
        self.turns = []
        self.steps = []
        self.used = set()
        self.no_turn = ""
        self.why = {}
        self.read = {}
        self.chains = {}
        self.link = None
        self.joined = {}


def assemble(spans: Iterable[SpanRecord]) -> list[dict[str, Any]]:
    """The turns in one trace's spans (``assembly(spans).turns``)."""
    return assembly(spans).turns


def assembly(spans: Iterable[SpanRecord], *, explain: bool = False) -> Assembly:
    """The turns and the unanswered steps in one trace's spans (a span id seen twice counts once: the last copy
    wins). Log records (``log_record``) are attached to their spans first (``attach_logs``). ``explain``: also say
    where each turn's parts were read (``Assembly.read``, for ``vigil explain-trace``)."""
    trace = _Trace(spans)
    trace.explain = explain
    out = Assembly()
    groups = trace.groups(out.steps)
    if trace.grafts:
        groups += trace.graft(groups)
    made = []
    used = out.used
    for group in groups:
        used.add(group.root["span_id"])
        used.update(map(_SPAN_ID, group.members))
        turn = trace.turn(group, out.steps)
        if turn is not None:
            out.turns.append(turn)
            made.append(group)
            out.why[turn["span_id"]] = group.why
            out.read[turn["span_id"]] = trace.read.get(turn["span_id"], {})
            if group.joined:
                out.joined[turn["span_id"]] = list(dict.fromkeys(g.root["trace_id"] for g in group.joined))
            if "session_id" in turn and (chain := trace.chains.get(turn["span_id"])) is not None:
                out.chains[turn["span_id"]] = chain
    if len(out.turns) > 1:
        out.turns.sort(key=_STARTED)
    if trace.linked and out.turns:
        out.link = _links.target(trace.trace_id, out.turns, trace.above(made))
    if not out.turns and not out.steps and any(is_genai(s["attributes"], (e["name"] for e in s.get("events") or ()))
                                               for s in trace.by_id.values()):
        out.no_turn = trace.why_no_turn()
    return out


def waiting_for_parent(spans: Iterable[SpanRecord]) -> bool:
    """Whether a span's parent, in this process (not a remote caller), has not arrived: the trace is unfinished. A
    span joined from another trace (``links``) waited in its own trace, when that one was assembled."""
    spans = list(spans)
    ids = {s["span_id"] for s in spans if not s.get("log")}
    return any(s.get("parent_id") and s["parent_id"] not in ids and not s.get("parent_remote")
               for s in spans if not s.get("log") and not s.get("joined"))


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
def event_key(event: SpanEvent) -> tuple[str, Any, str]:
    """What makes two events one: an event delivered twice (by a span and a log record, or by two log records) has
    the same name, time and attributes."""
    return event["name"], event.get("time"), json.dumps(event.get("attributes"), sort_keys=True, default=str)


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
            key = event_key(event)
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
        grafts: dict[str, list[SpanRecord]] = {}  # spans of traces whose work joins a run here, by trace
        linked = False  # a span here is linked to another trace
        for span in spans:
            if span.get("joined"):
                grafts.setdefault(span["joined"]["trace_id"], []).append(span)
            elif span.get("log"):
                logs.append(span)
            else:
                by_id[span["span_id"]] = span
                if span.get("links"):
                    linked = True
        self.grafts, self.linked = grafts, linked
        self.by_id = by_id = attach_logs(by_id, logs) if logs else by_id
        self.children: dict[str | None, list[SpanRecord]] = {}  # a span's children (None: the top spans)
        self.decider: dict[str, int] = {}  # which mapper decided a span's kind
        self.stated: dict[str, str] = {}  # its kind as its convention states it
        self.kinds: dict[str, str] = {}  # its kind here: a framework's chain at the top of the trace is the run
        children, decider, stated_of, kinds = self.children, self.decider, self.stated, self.kinds
        decided_kind = conventions.decided_kind
        unsorted = False  # a span has two children or more
        for span_id, span in by_id.items():  # one pass: each span's place in the tree and its kind
            parent = span.get("parent_id")
            stated, decider[span_id] = decided_kind(span)
            stated_of[span_id] = stated
            if parent in by_id:
                kinds[span_id] = stated
            else:  # on top
                parent = None
                kinds[span_id] = "agent" if stated == "chain" else stated
            siblings = children.get(parent)
            if siblings is None:
                children[parent] = [span]
            else:
                siblings.append(span)
                unsorted = True
        if unsorted:
            for siblings in children.values():
                if len(siblings) > 1:
                    siblings.sort(key=_BY_TIME)
        self._errors: dict[str, str | None] = {}
        self._io: dict[str, tuple[conventions.Io, dict[str, str]]] = {}
        self.read: dict[str, dict[str, str]] = {}
        self.explain = False
        self._identity: dict[str, dict[str, Any]] = {}
        self._gates: dict[str, conventions.Gates] = {}  # what each span's keys open (``io_sources``, ``_said``)
        self._has_llm: dict[str, bool] = {}
        self._answers: dict[str, bool] = {}
        self._steps: dict[str, bool] = {}
        self.chains: dict[str, _chains.Chain | None] = {}  # what each run with a session says of its conversation

    @property
    def trace_id(self) -> str:
        """The trace's id: its first span's (asked only of a trace linked to another)."""
        return next(iter(self.by_id.values()))["trace_id"] if self.by_id else ""

    def kind(self, span: SpanRecord) -> str:
        return self.kinds.get(span["span_id"], "virtual")

    def io(self, span: SpanRecord) -> conventions.Io:
        found = self._io.get(span["span_id"])
        return (found if found is not None else self.io_sources(span))[0]

    def error(self, span: SpanRecord) -> str | None:
        """Why a span failed, or ``None`` (``conventions.error``, once per span)."""
        span_id = span["span_id"]
        if span_id in self._errors:
            return self._errors[span_id]
        found = self._errors[span_id] = conventions.error(span)
        return found

    def identity(self, span: SpanRecord, opened: conventions.Gates | None = None) -> dict[str, Any]:
        """The agent, session and metadata a span states (once per span); ``opened``: its ``conventions.gates``."""
        found = self._identity.get(span["span_id"])
        if found is None:
            found = self._identity[span["span_id"]] = conventions.identity(span["attributes"], opened)
        return found

    def above(self, groups: list[_Group]) -> list[SpanRecord]:
        """The runs' roots and the spans above them (whose links say what started the runs: ``links.target``)."""
        out: dict[str, SpanRecord] = {}
        for group in groups:
            span: SpanRecord | None = group.root
            while span is not None and span["span_id"] not in out:
                out[span["span_id"]] = span
                span = self.by_id.get(span.get("parent_id") or "")
        return list(out.values())

    def graft(self, groups: list[_Group]) -> list[_Group]:
        """Each joined trace's runs (``links``: spans marked ``joined``) added to the run that holds the span its link
        names, its top spans under that span; returns the runs of joined traces no run here holds, as runs of their
        own (their turns keep their own trace id)."""
        pending = dict(self.grafts)
        own: list[_Group] = []
        while pending:
            ready = [t for t, spans in pending.items() if spans[0]["joined"]["under"] in self.by_id]
            for trace_id in ready or list(pending):  # none ready: whatever is left has nothing to hang under
                spans = pending.pop(trace_id)
                under = spans[0]["joined"]["under"]
                sub = _Trace({**{k: v for k, v in s.items() if k != "joined"}, "trace_id": trace_id}
                             for s in spans if s["span_id"] not in self.by_id)  # a span id here is this trace's
                sub.explain = self.explain
                runs = sub.groups([])
                host = self._holder(under, groups) if under in self.by_id else None
                self._adopt(sub, under if host is not None else None)
                if host is None:
                    own += runs
                    continue
                joined = {s["span_id"]: s for run in runs for s in (run.root, *run.members)}  # the runs and
                joined.update((s["span_id"], s) for s in sub.above(runs))  # the spans between them and the link
                host.members += [s for s in joined.values() if s["span_id"] in self.by_id]
                host.joined += runs
        return own

    def _holder(self, span_id: str, groups: list[_Group]) -> _Group | None:
        """The run that holds a span: the run whose spans include it, else the last to start before it of the runs
        under its nearest ancestor that has any."""
        for group in groups:
            if group.root["span_id"] == span_id or any(m["span_id"] == span_id for m in group.members):
                return group
        lineage: dict[str, list[_Group]] = defaultdict(list)  # a span -> the runs under it
        for group in groups:
            node, seen = self.by_id.get(group.root.get("parent_id") or ""), 0
            while node is not None and seen < 10_000:
                lineage[node["span_id"]].append(group)
                node, seen = self.by_id.get(node.get("parent_id") or ""), seen + 1
        node, seen = self.by_id.get(span_id), 0
        start = node["start"] if node else 0
        while node is not None and seen < 10_000:
            runs = lineage.get(node["span_id"])
            if runs:
                before = [g for g in runs if g.root["start"] <= start]
                return max(before, key=lambda g: g.root["start"]) if before else min(runs, key=lambda g: g.root["start"])
            node, seen = self.by_id.get(node.get("parent_id") or ""), seen + 1
        return None

    def _adopt(self, sub: _Trace, under: str | None) -> None:
        """A joined trace's spans and what was read of them, as spans of this trace: its top spans under ``under``."""
        for span_id, span in sub.by_id.items():
            if under is not None and span.get("parent_id") not in sub.by_id:
                span["parent_id"] = under  # a copy made for the graft
                self.children.setdefault(under, []).append(span)
            self.by_id[span_id] = span
        for parent, children in sub.children.items():
            if parent is not None:
                self.children[parent] = children
        self.kinds.update(sub.kinds)
        self.stated.update(sub.stated)
        self.decider.update(sub.decider)
        self._errors.update(sub._errors)
        self._io.update(sub._io)
        self._identity.update(sub._identity)
        self._answers.update(sub._answers)
        self._steps.update(sub._steps)

    def io_sources(self, span: SpanRecord) -> tuple[conventions.Io, dict[str, str]]:
        """A span's messages and which module read each part (once per span)."""
        span_id = span["span_id"]
        found = self._io.get(span_id)
        if found is None:
            if span_id not in self.by_id:
                return ([], [], ""), {}
            opened = self._gates[span_id] = conventions.gates(span["attributes"])  # kept for ``_said``
            found = self._io[span_id] = conventions.io_sources(span, self.decider.get(span_id), opened)
        return found

    def descendants(self, span: SpanRecord) -> list[SpanRecord]:
        children = self.children
        below = children.get(span["span_id"])
        if not below:
            return []
        out, stack = [], list(below)
        while stack:
            child = stack.pop()
            out.append(child)
            below = children.get(child["span_id"])
            if below:
                stack.extend(below)
        return out

    def has_llm(self, span: SpanRecord) -> bool:
        """Whether the span is an LLM call or has one below it: its subtree walked down until one is found (asked
        only of spans walked to from the trace's top: a span in a cycle of parents is in no tree, and none is below
        them). Each answer is kept, and a span found to have none says so of every span below it."""
        found = self._has_llm
        span_id = span["span_id"]
        has = found.get(span_id)
        if has is None:
            kinds, children = self.kinds, self.children
            has = kinds.get(span_id) == "llm"
            if not has:
                walked, stack = [span_id], list(children.get(span_id, ()))
                while stack:
                    node_id = stack.pop()["span_id"]
                    known = found.get(node_id)
                    if known is None:
                        if kinds.get(node_id) == "llm":
                            has = True
                            break
                        walked.append(node_id)
                        below = children.get(node_id)
                        if below:
                            stack.extend(below)
                    elif known:
                        has = True
                        break
                if not has:
                    for node_id in walked:
                        found[node_id] = False
            found[span_id] = has
        return has

    def topmost(self, wanted, under: str | None = None) -> list[SpanRecord]:
        """The spans ``wanted(span)`` holds for with no such span above them, walked from the trace's top (or from
        below the span ``under``)."""
        children = self.children
        found, stack = [], list(children.get(under, ()))
        while stack:
            span = stack.pop()
            if wanted(span):
                found.append(span)
                continue
            below = children.get(span["span_id"])
            if below:
                stack.extend(below)
        return found

    def _topmost_of(self, kind: str, under: str | None = None) -> list[SpanRecord]:
        """``topmost`` of the spans of one kind."""
        children, kinds = self.children, self.kinds
        found, stack = [], list(children.get(under, ()))
        while stack:
            span = stack.pop()
            span_id = span["span_id"]
            if kinds.get(span_id) == kind:
                found.append(span)
                continue
            below = children.get(span_id)
            if below:
                stack.extend(below)
        return found

    # -- which spans make a turn -------------------------------------------------------------------------------

    def groups(self, steps: list[str]) -> list[_Group]:
        """One group per run, by the module's rules 1-4; unanswered steps are added to ``steps``."""
        of = self.kinds
        kinds = set(of.values())  # a rule whose kind of root no span has finds none: no walk
        agents = self.topmost(lambda s: of.get(s["span_id"]) == "agent" and (
            self.has_llm(s) or self._explicit_failure(s) or self._answers_itself(s))) if "agent" in kinds else []
        if len(agents) == 1:  # one run: it hands its request to no other
            return self._runs(agents[0])
        if agents:  # runs beside each other that hand one request on are one (their parent may not have arrived)
            return [group for runs in self._handed_on(sorted(agents, key=_BY_TIME)) for group in self._request(runs)]
        containers = self.topmost(lambda s: of.get(s["span_id"]) in _CONTAINERS and self.has_llm(s)) if not (
            kinds.isdisjoint(_CONTAINERS)) else []
        if containers:
            return [_Group(root, self.descendants(root), f"the topmost {self.kind(root)} span with LLM calls under it")
                    for root in containers]
        out: list[_Group] = []
        waiting: dict[str, list[SpanRecord]] = {}
        for top in self.children.get(None, ()):
            if top.get("parent_id") and not top.get("log") and of.get(top["span_id"]) == "llm":
                # a span around LLM calls is read by rule 4 where it stands
                waiting.setdefault(top["parent_id"], []).append(top)
        for parent_id, tops in waiting.items():
            if len(tops) >= 2 and len({self.question_of(top) for top in tops}) == len(tops):
                continue  # a container's runs, not one run: rule 4 reads them
            members = [m for top in tops for m in (top, *self.descendants(top))]
            out.append(_Group(self._stand_in(parent_id, members), members,
                              "the parent of the trace's top spans, not arrived yet"))
        llms = self._topmost_of("llm")
        if out:
            grouped = {s["span_id"] for group in out for s in group.members}
            llms = [s for s in llms if s["span_id"] not in grouped]
        by_parent: dict[str | None, list[SpanRecord]] = {}
        by_id = self.by_id
        for llm in llms:
            parent = llm.get("parent_id")
            by_parent.setdefault(parent if parent in by_id else None, []).append(llm)
        unanswered: list[str] = []
        for parent, calls in by_parent.items():
            if len(calls) > 1:
                calls.sort(key=_BY_TIME)
            self._sequence(parent, calls, out, unanswered)
        if unanswered:
            steps.extend(self._join_steps(out, unanswered))
        return out

    def _join_steps(self, groups: list[_Group], unanswered: list[str]) -> list[str]:
        """Steps no call under their parent answers join the run whose LLM calls were sent their tool calls' results
        (by tool call id): the conversation says they are one run, whatever span each step sits in. The steps that
        join none."""
        if not groups:  # no run to join (a trace of steps alone: an app whose every call is its own trace)
            return unanswered
        sent = {m["tool_call_id"]: group for group in groups for span in (group.root, *group.members)
                if self.kind(span) == "llm" for m in self.io(span)[0] if m["role"] == "tool" and m.get("tool_call_id")}
        if not sent:  # no run was sent a tool call's result: no step joins one
            return unanswered
        left = []
        for step_id in unanswered:
            step = self.by_id[step_id]
            asked = [call.get("id") for m in self.io(step)[1] for call in m["tool_calls"]]
            home = next((sent[i] for i in asked if i in sent), None)
            if home is None:
                left.append(step_id)
                continue
            grouped = {s["span_id"] for group in groups for s in (group.root, *group.members)}
            beside = [s for s in self.children.get(step.get("parent_id"), [])
                      if s["span_id"] != step_id and self.kind(s) != "llm" and s["span_id"] not in grouped]
            home.members.extend(m for s in (step, *beside) for m in (s, *self.descendants(s)))
        return left

    def _explicit_failure(self, span: SpanRecord) -> bool:
        """An agent span that says it is one (not a chain promoted for being on top) and failed: a failed run."""
        return self.stated.get(span["span_id"]) == "agent" and self.error(span) is not None

    def _answers_itself(self, span: SpanRecord) -> bool:
        """An agent span that states the answer itself (an agent that sets the attributes by hand), and the user
        words it was asked: a run (*a resume asked nothing*)."""
        sent, said, _ = self.io(span)
        return any(m["content"] for m in said) and any(m["role"] == "user" and m["content"] for m in sent)

    def _runs(self, root: SpanRecord, container: SpanRecord | None = None) -> list[_Group]:
        """``root`` as one run, or, when it is a container (several runs under it answering different words and no
        LLM call of its own), each of its runs."""
        has_llm = self.has_llm  # an agent span with no LLM call under it has no agent span with one under it
        inner = [agent for agent in self._topmost_of("agent", root["span_id"]) if has_llm(agent)]
        if len(inner) >= 2 and not self._calls_llm_itself(root, inner) and not self._own_steps(root, inner):
            requests = self._handed_on(sorted(inner, key=_BY_TIME))
            questions = [self.question_of(runs[0]) for runs in requests]
            if len(requests) >= 2 and len(set(questions)) == len(requests) and not self._wraps_its_words(root, questions):
                return [group for runs in requests for group in self._request(runs, root)]
        why = self._why_run(root)
        if container is not None:
            why = (f"an agent run inside container {container['name']!r} ({container['span_id']}), whose runs "
                   "answer different user words")
        return [_Group(root, self.descendants(root), why, container)]

    def _wraps_its_words(self, root: SpanRecord, questions: list[str]) -> bool:
        """Runs whose words each hold the user words their root states were asked those words, each wrapped in what
        the framework tells its agent (*a span that states the request is its run*)."""
        stated = [m["content"] for m in self.io(root)[0] if m["role"] == "user" and isinstance(m["content"], str)
                  and m["content"].strip()]
        return bool(stated) and all(isinstance(q, str) and stated[-1].strip() in q for q in questions)

    def _handed_on(self, runs: list[SpanRecord]) -> list[list[SpanRecord]]:
        """The agent runs of each user request, in order: a run that the one before it handed its request on to
        joins it (``_hands_over``)."""
        requests: list[list[SpanRecord]] = []
        for run in runs:
            if requests and self._hands_over(requests[-1][-1], run):
                requests[-1].append(run)
            else:
                requests.append([run])
        return requests

    def _request(self, runs: list[SpanRecord], container: SpanRecord | None = None) -> list[_Group]:
        """The runs of one request as one run, rooted at the first (the entry agent's); one run by ``_runs``."""
        first, *rest = runs
        if not rest:
            return self._runs(first, container)
        members = [m for run in runs for m in (run, *self.descendants(run)) if m is not first]
        where = f" inside container {container['name']!r} ({container['span_id']})" if container is not None else ""
        return [_Group(first, members, f"agent runs of one request, handed over{where}", container)]

    def _why_run(self, root: SpanRecord) -> str:
        """Which rule made the topmost agent span ``root`` a run, for the explanation."""
        if self.has_llm(root):
            return "the topmost agent span with an LLM call under it"
        if self._answers_itself(root):
            return "the topmost agent span, which states its answer (no LLM call is traced under it)"
        if self._explicit_failure(root):
            return "the topmost agent span, which failed (no LLM call under it)"
        return "the topmost agent span"

    def _hands_over(self, before: SpanRecord, run: SpanRecord) -> bool:
        """An agent run whose last model call asked for tools and that did not fail (it ended on a call, a transfer,
        not on an answer), followed by a run whose first model call was sent the user words that run was asked: the
        request handed on, one run (*a hand-over keeps the request*)."""
        asked = [s for s in (before, *self.descendants(before)) if self.kind(s) == "llm"]
        then = sorted((s for s in (run, *self.descendants(run)) if self.kind(s) == "llm"), key=_BY_TIME)
        if not asked or not then or self.error(before) is not None:
            return False
        last = max(asked, key=_BY_TIME)
        if self.error(last) is not None or not any(m["tool_calls"] for m in self.io(last)[1]):
            return False
        words = self.question_of(before)
        return any(m["role"] == "user" and m["content"] == words for m in self.io(then[0])[0])

    def _own_steps(self, root: SpanRecord, runs: list[SpanRecord]) -> bool:
        """Agent spans that name the agent their root names are that agent's steps, never runs it contains."""
        name = self.identity(root)["agent"]
        return name is not None and all(self.identity(r)["agent"] == name for r in runs)

    def _calls_llm_itself(self, root: SpanRecord, runs: list[SpanRecord]) -> bool:
        inside = {m["span_id"] for run in runs for m in (run, *self.descendants(run))}
        return any(self.kind(s) == "llm" and s["span_id"] not in inside for s in self.descendants(root))

    def question_of(self, run: SpanRecord) -> str:
        """The last user words in the conversation of a run's first LLM call (the run's root itself, when it is one)."""
        llms = sorted((s for s in (run, *self.descendants(run)) if self.kind(s) == "llm"), key=lambda s: s["start"])
        for call in llms:
            users = [m["content"] for m in self.io(call)[0] if m["role"] == "user" and m["content"]]
            if users:
                return users[-1]
        return run["span_id"]  # no words to compare: a run of its own


    def why_no_turn(self) -> str:
        """Why this trace's spans made no turn, in words for a log line."""
        kinds = list(self.stated.values())
        if "llm" not in kinds:
            known = sorted({k for k in kinds if k not in ("other", "server", "virtual")})
            if known:
                return f"no LLM call (its spans: {', '.join(known)})"
            prefixes = sorted({key.split(".")[0] + ".*" for s in self.by_id.values() for key in s["attributes"]})
            if prefixes:
                return f"no span in a known convention (attributes {', '.join(prefixes[:6])})"
            return "no LLM call"
        return "its LLM calls answered nothing and nothing failed"

    def _sequence(self, parent: str | None, calls: list[SpanRecord], out: list[_Group], steps: list[str]) -> None:
        """Rule 4: each call that answers is a turn (added to ``out``), with the steps before it and the spans beside
        them; the steps no call after them answers are added to ``steps``."""
        kinds = self.kinds
        beside = [s for s in self.children.get(parent, ()) if kinds.get(s["span_id"]) != "llm"] if parent else []
        pending = []
        last = len(calls) - 1
        for at, call in enumerate(calls):
            if self.is_step(call) or (at < last and self._answered_apart(call, calls[at + 1:])):
                pending.append(call)
                continue
            members = []
            if beside:
                joined = [s for s in beside if s["start"] <= call["start"]]
                beside = [s for s in beside if s not in joined]
                pending += joined
            for s in pending:
                members.append(s)
                members += self.descendants(s)
            out.append(_Group(call, members + self.descendants(call), "an LLM call that answers, with no agent or "
                              "container above it (the tool steps before it join it)"))
            pending = []
        for s in pending:
            steps.append(s["span_id"])

    def _answered_apart(self, call: SpanRecord, later: list[SpanRecord]) -> bool:
        """A call that states no output and did not fail, sent the conversation a later call beside it states an
        output for: that call's request, whose response was recorded apart (rule 4)."""
        if self.io(call)[1] or self.error(call) is not None:
            return False
        sent = conventions.sent(self.io(call)[0])
        return sent != () and any(self.io(s)[1] and conventions.sent(self.io(s)[0]) == sent for s in later)

    def _stand_in(self, span_id: str, members: list[SpanRecord]) -> SpanRecord:
        """The root that has not arrived, as far as its children tell."""
        first = min(members, key=lambda s: s["start"])
        return {"trace_id": first["trace_id"], "span_id": span_id, "parent_id": None, "name": "",
                "start": first["start"], "end": max(s["end"] for s in members), "attributes": {},
                "resource": first.get("resource") or {}}

    def is_step(self, llm: SpanRecord) -> bool:
        """An LLM call whose output is only tool calls: a step of the turn that answers, never an answer (once per
        span)."""
        found = self._steps.get(llm["span_id"])
        if found is None:
            found = False  # an assistant message, and every one only tool calls
            for m in self.io(llm)[1]:
                if m["role"] == "assistant":
                    found = bool(m["tool_calls"]) and not m["content"]
                    if not found:
                        break
            self._steps[llm["span_id"]] = found
        return found

    # -- one turn ----------------------------------------------------------------------------------------------

    def turn(self, group: _Group, steps: list[str]) -> dict[str, Any] | None:
        root = group.root
        kinds, io = self.kinds, self.io
        members = sorted(group.members, key=_BY_TIME) if len(group.members) > 1 else group.members  # read, not changed
        llms: list[SpanRecord] = []
        tools: list[SpanRecord] = []
        agents: list[SpanRecord] = []  # the run's spans of each kind, in start order, sorted out in one pass
        for s in members:
            kind = kinds.get(s["span_id"])
            if kind == "llm":
                llms.append(s)
            elif kind == "tool":
                tools.append(s)
            elif kind == "agent":
                agents.append(s)
        said_llms = llms  # the LLM calls root first, then in start order (``chains.read``)
        root_llm = kinds.get(root["span_id"]) == "llm"
        if root_llm:
            said_llms = [root, *llms]
            llms = sorted(said_llms, key=_BY_TIME) if llms else said_llms
        calls = self._innermost(llms)  # one per model call: an LLM span around another is its wrapper
        answers = self.answers
        answered = []
        for s in calls:
            if answers(s):
                answered.append(s)
        # what the model answered is the inner call's, which saw the wire; a wrapper's only where no inner call's is
        answering = answered or [s for s in llms if answers(s)]
        last_answer = (answering[0] if len(answering) == 1 else max(answering, key=_END)) if answering else None
        root_in, root_out, root_system = io(root) if not root_llm else ([], [], "")
        if not root_in and agents:
            root_in = self._agent_input(agents, llms)
        if root_in and not self._words_of(root_in, llms):
            root_in = []  # not evidence of the user's words: the LLM calls say what was asked
        if last_answer is None and root_out and (
                self.error(root) is not None or (llms and self.error(llms[-1]) is not None)):
            root_out = []  # no call answered and the run failed: the root's output is its error's text, not an answer
        if last_answer is None and root_out and not _assistant_text(root_out):
            root_out = []  # the conversation so far, ending on the model's tool calls: no answer (a paused run)
        if root_out and last_answer is not None and last_answer["end"] >= max(s["end"] for s in calls) and _wraps(
                _assistant_text(root_out), _assistant_text(self.io(last_answer)[1])):
            root_out = []  # the root's answer wraps the model's: the words it wraps are the answer
        failure = None
        if last_answer is None and not root_out:
            failure = self._failure(root, members)
            # content capture off: no call carries any text; the last call that is no step stands for the answer
            silent = llms and not any(m["content"] for s in llms for m in (*self.io(s)[0], *self.io(s)[1]))
            if failure is None and silent and (non_steps := [s for s in llms if not self.is_step(s)]):
                last_answer = non_steps[-1]
            elif failure is None:
                steps.extend(s["span_id"] for s in llms)  # only steps so far: the answer has not arrived (or never)
                return None
        said = [io(s) for s in calls]  # each call's messages, read once here for the passes below
        conversation, asked_in = self._conversation(calls, said, last_answer if answered else None)  # the last to
        # answer
        conversation = self._handed_request(calls, said, conversation, asked_in)
        input_messages = root_in or conversation
        _, answer_out, answer_system = io(last_answer) if last_answer is not None else ((), [], "")
        output_messages = root_out or answer_out
        system = root_system or answer_system or (io(llms[-1])[2] if llms else "")
        output = _assistant_text(output_messages)
        if group.joined:  # work the run started in traces of their own: their last answer is the run's
            output, failure, joined_answer = self._joined_answer(group, output, failure, answering)
            last_answer = joined_answer or last_answer
        if not input_messages and not output and not llms and failure is None:
            return None
        everyone = [root, *members]
        resource, who, sessions, metadatas, contexts = self._said(everyone)
        turn: dict[str, Any] = {
            "trace_id": root["trace_id"],
            "span_id": root["span_id"],
            "input": _wire(input_messages) or [{"role": "user", "content": ""}],
            "output": output,
            "started_at": _iso(root["start"]),
        }
        if root["end"] or group.joined:
            end = root["end"]
            for joined in group.joined:
                end = max(end, joined.root["end"])
            turn["ended_at"] = _iso(end)
        if system:
            turn["system"] = system
        last_call = (calls[0] if len(calls) == 1 else max(calls, key=_END)) if calls else None  # the model and
        # response as the wire said them
        metadata = self._metadata(root, metadatas, len(everyone), last_call, resource)
        if failure is not None:
            metadata[RUN_METADATA] = "failed"
            metadata[ERROR_METADATA] = failure
        elif not _user_text(input_messages) and not (
                output and (answered or any(m["content"] for m in conversation))):  # nothing said, or only by a root
            turn["input"] = [{"role": "user", "content": ""}]
            metadata[CONTENT_METADATA] = "missing"
            metadata[SETTING_METADATA] = conventions.content_setting(llms[0] if llms else root)
        self._who(turn, who, resource)
        if group.container is not None and "session_id" not in turn:
            turn["session_id"] = str(conventions.identity(group.container["attributes"])["session_id"]
                                     or root["trace_id"])
        if last_call is not None:
            model = conventions.model(last_call["attributes"])
            if model:
                turn["model"] = str(model)
        usage = self._usage(root, llms, calls)
        if usage:
            turn["usage"] = usage
        if contexts:
            turn["contexts"] = list(contexts.values())
        reported = self._reported(root, output) if not llms and not tools else None  # no model call, no tool traced
        tool_calls = self._failed_by_word(self._tool_calls(tools, said, reported[2] if reported else input_messages),
                                          root, said, reported[2] if reported else [])
        if tool_calls:
            turn["tool_calls"] = tool_calls
        turn["metadata"] = metadata
        turn["spans"] = self._skeleton(everyone)
        if "session_id" in turn:
            self.chains[root["span_id"]] = _chains.read(sessions, said_llms)
        if self.explain:
            self.read[root["span_id"]] = {
                "question": self._where(root if root_in else asked_in, "inputs"),
                "answer": self._where(root if root_out and not group.joined else last_answer, "outputs"),
                "tool calls": ("tool spans" if tools
                               else f"the conversation in the {reported[1]} of {self._where(reported[0], reported[1])}"
                               if reported else "the LLM calls' tool calls"),
                "usage": "summed over the LLM calls, else the root's stated totals"}
        return turn

    def _joined_answer(self, group: _Group, output: str, failure: str | None, answering: list[SpanRecord],
                       ) -> tuple[str, str | None, SpanRecord | None]:
        """The answer of a run joined by work it started in other traces (``links``): **the run's last answer in
        time**, its own or that work's. The work's is the last answer of the joined run that ended last, or, when
        that run ended in error without one, no answer and its error; the run's own (``output``, ``failure``) stands
        when one of its own LLM calls (``answering``, less the work's) answered after the work was done. Also the
        span the answer was read from (``None``: the run's own)."""
        last = max(group.joined, key=lambda g: (g.root["end"], g.root["start"]))
        turn = self.turn(last, [])
        if turn is None:
            return output, failure, None
        work = {s["span_id"] for g in group.joined for s in (g.root, *g.members)}
        own_end = max((s["end"] for s in answering if s["span_id"] not in work), default=None)
        metadata = turn.get("metadata") or {}
        if metadata.get(RUN_METADATA) == "failed":
            if own_end is not None and own_end > last.root["end"]:
                return output, failure, None
            return "", str(metadata.get(ERROR_METADATA) or ""), None
        if not turn["output"]:
            return output, failure, None
        said = [s for s in (last.root, *last.members) if self.kind(s) == "llm" and self.answers(s)]
        span = max(said, key=_END) if said else last.root
        if own_end is not None and own_end > span["end"]:
            return output, failure, None
        return turn["output"], None, span

    def _skeleton(self, everyone: list[SpanRecord]) -> list[dict[str, Any]]:
        """The turn's spans for its page (``schemas.trace.SpanSummary``), earliest first, at most ``MAX_SPANS``."""
        ordered = sorted(everyone, key=_BY_START) if len(everyone) > 1 else everyone
        if len(ordered) > MAX_SPANS:
            del ordered[MAX_SPANS:]
        first = ordered[0]["start"] if ordered else 0  # the earliest: no span starts before it
        out = []
        kinds, errors, error_of = self.kinds, self._errors, self.error
        for span in ordered:
            span_id, start, end, name = span["span_id"], span["start"], span["end"], span["name"]
            summary: dict[str, Any] = {
                "span_id": span_id, "name": name[:256] if name.__class__ is str else str(name or "")[:256],
                "kind": kinds.get(span_id, "virtual"), "start_ms": (start - first) / 1e6,
                "duration_ms": (end - start) / 1e6 if end and end > start else 0.0}  # no end: no duration
            if parent := span.get("parent_id"):
                summary["parent_id"] = parent
            error = errors[span_id] if span_id in errors else error_of(span)
            if error:
                summary["error"] = str(error)[:1000]
            out.append(summary)
        return out

    def _where(self, span: SpanRecord | None, part: str) -> str:
        """Which span and which convention module gave a part of a turn, in words."""
        if span is None or span["span_id"] not in self.by_id:
            return "nothing"
        module = self.io_sources(span)[1].get(part, "none")
        return f"span {span['name']!r} ({span['span_id']}), read by {module}"

    def answers(self, llm: SpanRecord) -> bool:
        """An LLM call whose output has assistant text: an answer (a step asks only for tools, a failed call says
        nothing: the text a call that failed reports is its error's, as OpenInference's BeeAI spans write it; once
        per span)."""
        found = self._answers.get(llm["span_id"])
        if found is None:
            found = False
            for m in self.io(llm)[1]:
                if m["role"] == "assistant" and m["content"]:
                    found = self.error(llm) is None
                    break
            self._answers[llm["span_id"]] = found
        return found

    def _agent_input(self, agents: list[SpanRecord], llms: list[SpanRecord]) -> list[conventions.Msg]:
        """What the run's agent states it was asked, where its root states nothing: the input of the first agent span
        in the run (``agents``, in start order) that states any, when the LLM calls' user words (``_user_words``) wrap
        it (a crew's workflow span around its agent's); where they are the same words, the calls' conversation says
        more."""
        said: list[conventions.Msg] = []
        for s in agents:
            if said := self.io(s)[0]:
                break
        text = _user_text(said).strip()
        return said if text and any(text in words and text != words.strip() for words in self._user_words(llms)) else []

    def _words_of(self, root_in: list[conventions.Msg], llms: list[SpanRecord]) -> bool:
        """Whether a root's input is evidence of the user's words: it has user text, and where the LLM calls carry
        user text (``_user_words``), theirs contains it (a framework wraps the words: ``New task:\n…``, a prompt
        template)."""
        said = _user_text(root_in)
        if not said:
            return False
        asked = self._user_words(llms)
        return not asked or any(said.strip() in words for words in asked)

    def _user_words(self, llms: list[SpanRecord]) -> list[str]:
        """The user words the LLM calls were sent: read only where a root or an agent states words to compare."""
        return [m["content"] for llm in llms for m in self.io(llm)[0] if m["role"] == "user" and m["content"]]

    def _failure(self, root: SpanRecord, members: list[SpanRecord]) -> str | None:
        """Why a run with no answer failed: its root's error, else the last error among its spans; ``None`` when
        nothing failed (its answer has not arrived)."""
        said = self.error(root)
        errors = [e for e in map(self.error, reversed(members)) if e is not None]
        if said is None:  # the run's error is one under it: one that names why, before a bare one
            errors = [e for e in errors if e != _SAYS_NOTHING] or errors
        if said is not None and errors and errors[0] not in said:
            return f"{said}: {errors[0]}"  # the root says the run failed, the span under it why (Agno)
        return said if said is not None else (errors[0] if errors else None)

    def _usage(self, root: SpanRecord, llms: list[SpanRecord], calls: list[SpanRecord]) -> dict[str, int]:
        """The run's tokens: each model call's once, as the span nearest the wire states them (``calls``, the LLM
        spans with none under them; where one states none, the nearest LLM span around it that does: a wrapper of
        the same call), summed; else the root's stated totals; a wrapper's zeros never stand for the calls'. A call
        only the fallback reads as one (a span naming a model that no convention claims) counts only when the calls a
        convention claims state no tokens: beside them it is a record of one of them (AG2's ``record_usage
        model_call`` span, the response's model and its tokens, nothing sent), not a call of its own."""
        decider, mappers = self.decider, len(conventions.MAPPERS)
        claimed = calls
        for call in calls:
            if decider[call["span_id"]] >= mappers:  # the fallback's: the claimed calls are the others
                claimed = [c for c in calls if decider[c["span_id"]] < mappers]
                break
        sums, stated = self._stated(claimed or calls, llms)
        if not stated and claimed and len(claimed) < len(calls):
            sums, stated = self._stated(calls, llms)
        if not stated or sums == (0, 0):
            totals = (conventions.stated_usage(root["attributes"])
                      if root["span_id"] not in {s["span_id"] for s in llms} else (None, None))
            if any(isinstance(v, (int, float)) and v > 0 for v in totals):
                sums = tuple(int(v) if isinstance(v, (int, float)) and v >= 0 else 0 for v in totals)
                stated = True
        return {"prompt_tokens": sums[0], "completion_tokens": sums[1]} if stated else {}

    def _stated(self, calls: list[SpanRecord], llms: list[SpanRecord]) -> tuple[tuple[int, int], bool]:
        """The tokens these calls state, each once (``_usage``; a wrapper around one is among ``llms``), summed, and
        whether any stated some."""
        prompts = completions = 0
        stated = False
        counted: set[str] = set()
        ids: set[str] | None = None  # the LLM spans' ids: read only where a call states no tokens
        usage = conventions.usage
        for call in calls:
            span: SpanRecord | None = call
            while span is not None and span["span_id"] not in counted:
                prompt, completion = usage(span["attributes"])
                prompt, completion = _tokens(prompt), _tokens(completion)
                if prompt is not None or completion is not None:
                    counted.add(span["span_id"])
                    prompts += int(prompt or 0)
                    completions += int(completion or 0)
                    stated = True
                    if prompt or completion:
                        break
                if ids is None:
                    ids = {s["span_id"] for s in llms}
                parent = span.get("parent_id")
                span = self.by_id[parent] if parent in ids else None
        return (prompts, completions), stated

    def _innermost(self, llms: list[SpanRecord]) -> list[SpanRecord]:
        """The LLM calls with no LLM call under them: an LLM span around another is a framework's wrapper of the same
        model call (a generator component around the client's request), and the inner one saw the wire. So are two
        at once (their times overlap), sent the same conversation (``conventions.sent``), written by two
        instrumentations: a wrapper whose span was never made current (a callback-based instrumentation such as
        OpenLLMetry JS's LangChain handler) beside the client's span, not above it; the one that started first
        (together: ended last) is the wrapper (times in milliseconds cannot say more). Calls of one instrumentation
        never stand for each other (concurrent samples of one prompt are calls of their own)."""
        if len(llms) < 2:
            return llms
        by_id, children = self.by_id, self.children
        around: set[str] = set()
        scopes = set()
        parents = set()  # the calls with spans under them: only such a call can be around another
        for span in llms:
            scopes.add(span.get("scope"))
            if span["span_id"] in children:
                parents.add(span["span_id"])
        if parents:
            for span in llms:
                parent, seen = span.get("parent_id"), 0
                while parent in by_id and seen < 10_000:
                    if parent in parents:
                        around.add(parent)
                    parent, seen = by_id[parent].get("parent_id"), seen + 1
        if len(scopes) > 1:
            sent = {s["span_id"]: conventions.sent(self.io(s)[0]) for s in llms}
            for a in llms:
                for b in llms:
                    if (a["start"], -a["end"]) < (b["start"], -b["end"]) and a.get("scope") != b.get("scope") \
                            and b["start"] <= a["end"] and sent[a["span_id"]] == sent[b["span_id"]] != ():
                        around.add(a["span_id"])  # the one that started first (together: ended last) is around
        return [s for s in llms if s["span_id"] not in around] if around else llms

    def _tool_above(self, span: SpanRecord, tool_ids: set[str]) -> bool:
        """A tool span above this one with no agent run or model call between them: the same call, seen twice."""
        parent = span.get("parent_id")
        seen = 0
        while parent in self.by_id and seen < 10_000:
            if parent in tool_ids:
                return True
            if self.kinds.get(parent) in ("agent", "llm"):
                return False
            parent = self.by_id[parent].get("parent_id")
            seen += 1
        return False

    def _delegated(self, span: SpanRecord, tool_id: str) -> bool:
        """An agent run or model call between this tool span and the tool span ``tool_id`` above it: a call the
        delegated agent's model made, not the outer call seen again."""
        return not self._tool_above(span, {tool_id})

    def _conversation(self, llms: list[SpanRecord], said: list[conventions.Io],
                      last_answer: SpanRecord | None) -> tuple[list[conventions.Msg], SpanRecord | None]:
        """The first call's input; the answering call's when it extends it (so the tool round trip is kept); and the
        call it came from (``said``: the calls' messages, as ``io`` reads them)."""
        if not llms:
            return [], None
        if len(llms) == 1:  # one call: its input (an answering call is one of ``llms``)
            return said[0][0], llms[0]
        first = said[0][0]
        if last_answer is None:
            later, last = llms[-1], said[-1][0]
        else:
            later, last = last_answer, self.io(last_answer)[0]
        if len(last) >= len(first) and (last[:len(first)] == first or all(  # the same messages: the same words
                a["role"] == b["role"] and a["content"] == b["content"] for a, b in zip(first, last, strict=False))):
            return last, later
        return first, llms[0]

    def _handed_request(self, calls: list[SpanRecord], said: list[conventions.Io], conversation: list[conventions.Msg],
                        asked_in: SpanRecord | None) -> list[conventions.Msg]:
        """The conversation without the user messages a hand-over wrote (*a hand-over keeps the request*): where the
        answering call is another agent's than the run's first and continues its conversation, the user text beyond
        the first call's is the framework's account of the run so far, not the user's words (``said``: the calls'
        messages)."""
        if asked_in is None or not calls or asked_in is calls[0]:
            return conversation
        sent = len(said[0][0])
        for m in conversation[sent:]:  # the agents are read only where user text beyond the first call's is
            if m["role"] == "user" and m["content"]:
                break
        else:
            return conversation
        entry, answering = self._agent_of(calls[0]), self._agent_of(asked_in)
        if entry is None or answering is None or entry == answering:
            return conversation
        return conversation[:sent] + [m for m in conversation[sent:] if not (m["role"] == "user" and m["content"])]

    def _agent_of(self, call: SpanRecord) -> str | None:
        """The agent a model call is of: the one it names, else the one the nearest agent span above it names."""
        agent = self.identity(call)["agent"]
        parent, seen = call.get("parent_id"), 0
        while agent is None and parent in self.by_id and seen < 10_000:
            span = self.by_id[parent]
            if self.kinds.get(parent) == "agent":
                return self.identity(span)["agent"]
            parent, seen = span.get("parent_id"), seen + 1
        return agent

    def _tool_calls(self, tools: list[SpanRecord], said: list[conventions.Io],
                    conversation: list[conventions.Msg]) -> list[dict[str, Any]]:
        """The tool spans' calls (``tools``: the run's, in start order; ``_span_calls``), their ids paired with the
        LLM's tool calls; else the calls the LLM calls asked for (``said``: their messages, in start order; and the
        conversation holds since its last user message), with the results the tool messages give them
        (``_tool_results``)."""
        asked: list[dict[str, Any]] = []  # the messages' own calls (read once per span): copied before a change
        last_user = len(conversation) - 1
        while last_user >= 0 and conversation[last_user]["role"] != "user":
            last_user -= 1
        for message in conversation[last_user + 1:]:
            asked.extend(message["tool_calls"])
        for _, said_out, _ in said:
            for message in said_out:
                if message["tool_calls"]:
                    asked.extend(message["tool_calls"])
        spans = self._span_calls(tools, asked) if tools else []
        if spans:  # the tool messages' results are read where a call needs one (spans that state theirs need none)
            results = partial(_results_once, [], said, conversation)
            calls = spans
            for call in spans:  # paired unless each span says its call whole
                if not (call.get("id") and call["arguments"] and (call.get("result") is not None or call.get("error"))):
                    calls = _paired(spans, asked, results)
                    break
            return calls + _answered_unrecorded(calls, asked, results) if asked else calls
        if not asked:
            return []
        results = _tool_results(said) if said else _answers([conversation])
        calls, seen = [], set()
        for call in asked:
            key = call.get("id") or _call_key(call)
            if key in seen:
                continue
            seen.add(key)
            call = dict(call)
            if call.get("id") in results:
                call["result"] = results[call["id"]]
            calls.append(call)
        return calls

    def _reported(self, root: SpanRecord, answer: str) -> tuple[SpanRecord, str, list[conventions.Msg]] | None:
        """The conversation a span of the run's request reports (*a run whose model calls are not traced*): the
        root's input or output, else the nearest span's above it, that holds the assistant's tool calls and ends in
        the run's answer; with the span and which part (``None``: no span reports one)."""
        answer = answer.strip()
        span: SpanRecord | None = root
        seen = 0
        while answer and span is not None and seen < 10_000:
            said_in, said_out, _ = self.io(span)
            for part, said in (("outputs", said_out), ("inputs", said_in)):
                if any(m["tool_calls"] for m in said) and _assistant_text(said).strip() == answer:
                    return span, part, said
            span, seen = self.by_id.get(span.get("parent_id") or ""), seen + 1
        return None

    def _failed_by_word(self, calls: list[dict[str, Any]], root: SpanRecord, said: list[conventions.Io],
                        reported: list[conventions.Msg]) -> list[dict[str, Any]]:
        """The calls with the errors their tool messages state, where the framework's message says its call failed
        (``failed``) and nothing else gave the call an error: the message's text (the root's conversation, as a
        pipeline returned it, the LLM calls' input (``said``: their messages), or the conversation the run reports:
        ``_reported``)."""
        if not calls:
            return calls
        failed = {}  # a key test per message: most say nothing of failing
        root_in, root_out, _ = self.io(root)
        sources = [root_in, root_out]
        for said_in, _, _ in said:
            sources.append(said_in)
        sources.append(reported)
        for messages in sources:
            for m in messages:
                if "failed" in m and m["failed"] and m.get("tool_call_id"):
                    failed[m["tool_call_id"]] = m["content"]
        if not failed:
            return calls
        return [{**c, "error": failed[c["id"]]} if c.get("id") in failed and not c.get("error") else c for c in calls]

    def _span_calls(self, tools: list[SpanRecord], asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One call per tool span (``tools``: the run's, in start order) with no tool above it. The tool spans of the
        same tool under it are the same call (an instrumentation's span around the framework's own): the call takes
        what either says (its id, result, error). No final-answer tool; no bookkeeping span: one the model's calls do
        not account for (neither its id nor its tool among what they asked for, when they say) that records nothing of
        a call (no arguments, result or error)."""
        tool_ids = set(map(_SPAN_ID, tools))
        called: set[str] | None = None
        calls = []
        tool, decider, opened_of = conventions.tool, self.decider, self._gates  # gates: kept by ``_said``
        for span in tools:
            if self._tool_above(span, tool_ids):
                continue
            call = tool(span, decider.get(span["span_id"]), self.error, opened_of.get(span["span_id"]))
            if span["span_id"] in self.children:  # the tool spans under it: the same call, where the same tool's
                for inner in (tool(s, decider.get(s["span_id"]), self.error, opened_of.get(s["span_id"]))
                              for s in self.descendants(span)
                              if s["span_id"] in tool_ids and not self._delegated(s, span["span_id"])):
                    if inner["name"] == call["name"]:
                        call = {**inner, **{k: v for k, v in call.items() if v not in (None, "", {})}}
            if conventions.is_final_tool(call["name"]):
                continue
            if "result" not in call and "error" not in call and self.kinds.get(span["parent_id"]) == "llm":
                continue  # the model call's own record of a call it asked for, inside it: a request, not a run
            if asked and not (call["arguments"] or call.get("result") is not None or call.get("error")):
                if called is None:
                    called = {c["name"] for c in asked} | {c["id"] for c in asked if c.get("id")}
                if call["name"] not in called and call.get("id") not in called:
                    continue
            calls.append(call)
        return calls

    def _said(self, everyone: list[SpanRecord]) -> tuple[dict[str, Any], tuple[Any, Any, Any, Any], list[Any],
                                                         list[dict[str, Any]], dict[tuple[str, Any], dict[str, Any]]]:
        """What the turn's spans (root first, then in start order) state, read in one pass: the first resource (a bare
        root keeps none); the agent, session, reference and origin, each the first span's that states one (``_who``);
        every span's conversation id (``chains.read``); the metadata each span states (``_metadata``); and the
        documents, each once (the same text and id), the first span's to state it."""
        identity, documents, gates = self.identity, conventions.documents, conventions.gates  # identity: read once
        opened_of = self._gates  # the gates of the spans whose messages were read (``io_sources``)
        resource: dict[str, Any] | None = None
        agent = session = reference = origin = None
        sessions, metadatas = [], []
        contexts: dict[tuple[str, Any], dict[str, Any]] = {}
        for span in everyone:
            if resource is None and span.get("resource"):
                resource = span["resource"]
            attrs = span["attributes"]
            opened = opened_of.get(span["span_id"])  # what its keys open, for its identity and its documents
            if opened is None:
                opened = opened_of[span["span_id"]] = gates(attrs)  # kept for its tool call (``_span_calls``)
            if not opened[0]:  # no convention's identity keys (most spans of a run): it states no one
                sessions.append(None)
            else:
                said = identity(span, opened)
                if agent is None and said["agent"]:
                    agent = said["agent"]
                stated = said["session_id"]
                sessions.append(stated)
                if session is None and stated:
                    session = stated
                if said["metadata"]:
                    metadatas.append(said["metadata"])
            if reference is None and REFERENCE_ATTRIBUTE in attrs and attrs[REFERENCE_ATTRIBUTE] not in (None, ""):
                reference = attrs[REFERENCE_ATTRIBUTE]
            if origin is None and ORIGIN_ATTRIBUTE in attrs and attrs[ORIGIN_ATTRIBUTE] not in (None, ""):
                origin = attrs[ORIGIN_ATTRIBUTE]
            if opened[1]:  # a document reader's keys (a retriever's span)
                for doc in documents(attrs, opened):
                    contexts.setdefault((doc["text"], doc.get("id")), doc)
        return resource or {}, (agent, session, reference, origin), sessions, metadatas, contexts

    @staticmethod
    def _who(turn: dict[str, Any], who: tuple[Any, Any, Any, Any], resource: dict[str, Any]) -> None:
        """The turn's agent (else the resource's service), session, environment, project, reference and origin, each
        set on ``turn`` where it is said (``who``: the agent, session, reference and origin ``_said`` read)."""
        agent, session, reference, origin = who
        if not agent:
            service = resource.get("service.name")
            if isinstance(service, str) and not service.startswith("unknown_service"):
                agent = service
        if agent:
            turn["agent"] = str(agent)
        if session:
            turn["session_id"] = str(session)
        if resource:
            if value := resource.get("deployment.environment.name") or resource.get("deployment.environment"):
                turn["environment"] = str(value)
            if value := resource.get(PROJECT_RESOURCE):
                turn["project"] = str(value)
        if reference:
            turn["reference"] = str(reference)
        if origin and origin in ORIGINS:
            turn["origin"] = str(origin)

    def _metadata(self, root: SpanRecord, metadatas: list[dict[str, Any]], spans: int, last_call: SpanRecord | None,
                  resource: dict[str, Any]) -> dict[str, str]:
        metadata: dict[str, str] = {}
        if metadatas:  # what spans state of themselves (most runs: none)
            for said in reversed(metadatas):  # the root's say wins
                metadata.update(said)
        if resource.get(RELEASE_RESOURCE) not in (None, "") and RELEASE_KEY not in metadata:
            metadata[RELEASE_KEY] = str(resource[RELEASE_RESOURCE])
        if root["name"]:
            metadata["span_name"] = root["name"]
        attrs = root["attributes"]
        source = last_call["attributes"] if last_call is not None else attrs
        for name, key in (("operation", "gen_ai.operation.name"), ("provider", "gen_ai.provider.name"),
                          ("system", "gen_ai.system"), ("response_id", "gen_ai.response.id"),
                          ("span_kind", "openinference.span.kind")):
            value = attrs[key] if key in attrs else source.get(key)
            if value is not None:
                metadata[name] = str(value)
        metadata["spans"] = str(spans - (root["span_id"] not in self.by_id))
        return metadata


@dataclass
class _Group:
    """One run: its root, the spans under it, which rule chose it, and the container it sits in (if any)."""

    root: SpanRecord
    members: list[SpanRecord]
    why: str
    container: SpanRecord | None = None
    joined: list[_Group] = field(default_factory=list)  # runs of other traces whose work joined it (``links``)


def _answered_unrecorded(calls: list[dict[str, Any]], asked: list[dict[str, Any]],
                         answers: Callable[[], dict[str, str]]) -> list[dict[str, Any]]:
    """The model's calls that were answered (a tool message for their id) though no tool span records them (the
    OpenAI Agents SDK answers a ``transfer_to_<agent>`` call itself, and most of its instrumentations write no span
    for it): calls of the run all the same, with the answer as their result. Not a final-answer tool's, and not one
    a span's call already is (by id, or by name and arguments: a span may keep the Responses API's other id); and
    only where every span's call is one the model asked for by id (a span no call was paired with may be the record
    of that very call: nothing says it is not)."""
    ids = set()
    for c in asked:
        ids.add(c.get("id"))
    taken = set()
    for c in calls:
        if (call_id := c.get("id")) not in ids:
            return []
        taken.add(call_id)
    results: dict[str, str] | None = None  # read only for a call that no span's call is by id (``answers``)
    keys: set[str] | None = None  # the calls' names and arguments: written out only for a call answered by id
    out = []
    for call in asked:
        if not call.get("id") or call["id"] in taken:
            continue
        if results is None:
            results = answers()
        if call["id"] not in results or conventions.is_final_tool(call["name"]):
            continue
        if keys is None:
            keys = {_call_key(c) for c in calls}
        key = _call_key(call)
        if call["id"] in keys or key in keys or key in taken:
            continue
        taken.add(call["id"])
        out.append({**call, "result": results[call["id"]]})
    return out


def _results_once(read: list[dict[str, str]], said: list[conventions.Io],
                  conversation: list[conventions.Msg]) -> dict[str, str]:
    """``_tool_results``, read once into ``read`` (the conversation's where no LLM call's messages are at hand)."""
    if not read:
        read.append(_tool_results(said) if said else _answers([conversation]))
    return read[0]


def _tool_results(said: list[conventions.Io]) -> dict[str, str]:
    """Each tool call id's result: the text of the last tool message answering it that the LLM calls were sent
    (``said``: their messages, in start order). Read from the last call back, each id's result once: a run's later
    calls are sent its earlier calls' tool messages again."""
    return _answers(map(_INPUT, reversed(said)))


def _answers(conversations: Iterable[list[conventions.Msg]]) -> dict[str, str]:
    """Each tool call id's result: the text of the last tool message answering it, each conversation read from its
    last message back, the latest conversation first (a model call is sent the tool messages of the calls before)."""
    results: dict[str, str] = {}
    for messages in conversations:
        for m in reversed(messages):
            if m["role"] == "tool" and (call_id := m.get("tool_call_id")) and call_id not in results:
                results[call_id] = conventions.result_text(m["content"])
    return results


def _call_key(call: dict[str, Any]) -> str:
    """A call's name and arguments as one text: two calls with the same are the same call."""
    return json.dumps([call["name"], call["arguments"]], sort_keys=True, default=str)


def _paired(spans: list[dict[str, Any]], asked: list[dict[str, Any]],
            answers: Callable[[], dict[str, str]]) -> list[dict[str, Any]]:
    """Tool spans' calls paired with the LLM's tool call each one ran: a span that says its call's id takes from the
    model's call of that id the arguments it does not state (Google ADK's own tool span, beside OpenLIT's model
    calls), and its result from the tool message answering that id; a span whose id no call of the model carries
    (the Responses API names a call twice, its output item's ``id`` and the ``call_id`` its result answers, and an
    instrumentation may write either) and that states no arguments is paired as one that says none, keeping its id.
    A span that does not say its id is paired by name and arguments (else the next unpaired call of that name, else of
    a name the span's convention says its tool answers to: Griptape's ``<tool>_<activity>``): the call takes its id,
    the model's name for it, and the
    arguments the model asked for (a span may hold the framework's packaging of them, or one argument's bare value:
    OpenInference's LangChain.js tracer writes a run's inputs of one text value as that text), and a span that states
    no result and no error the one the tool message answering that id gives (``answers``; a failed call's tool
    message is its error's text). The LLM's calls are paired whether or not they carry ids (OpenInference's
    LangChain.js instrumentation writes none). A span that names no tool the model asked for (OpenLLMetry JS names a
    failed call's span by the tool's class, ``DynamicStructuredTool``; OpenInference names the OpenAI Agents SDK's
    handoff ``handoff to <agent>``, the model's call ``transfer_to_<agent>``) and records a call (its arguments, or
    none and a result) is the one call the model asked for with its arguments that no span names, and takes its name;
    with several such calls nothing says which. Such a span is the framework's record of what it did for the call,
    named its own way (the handoff span's input and output are the agents handing over and taking over): the call's
    result is the tool message the model was sent for it, where one is, the span's output where none is."""
    taken = set()
    for call in spans:
        if call.get("id"):
            taken.add(call["id"])
    free, by_id = [], {}  # the calls no span says it is; the first call of each id (asked for a span that says one)
    if taken:
        for c in asked:
            if c.get("id") not in taken:
                free.append(c)
        for c in reversed(asked):
            if c.get("id"):
                by_id[c["id"]] = c
    else:  # no span says its call's id: every call is free, and none is looked up by id
        free = list(asked)
    for call in spans:
        if (said := by_id.get(call.get("id"))) is not None:  # the model's call of that id: what the span left unsaid
            if not call["arguments"] and said["arguments"]:
                call["arguments"] = said["arguments"]
            if call.get("result") is None and not call.get("error") and call["id"] in (results := answers()):
                call["result"] = results[call["id"]]
            continue
        if call.get("id") and call["arguments"]:
            continue  # an id the model's calls do not carry, and nothing to take from them
        match = same_name = None  # the first free call of its name and arguments, else of its name (a loop)
        for c in free:
            if c["name"] == call["name"]:
                if c["arguments"] == call["arguments"]:
                    match = c
                    break
                if same_name is None:
                    same_name = c
        match = match or same_name
        if match is None and (call["arguments"] or call.get("result") is not None) and all(
                c["name"] != call["name"] for c in asked):
            named = {c["name"] for c in spans}
            same = {c.get("id") or c["name"]: c for c in free
                    if c["arguments"] == call["arguments"] and c["name"] not in named}
            if len(same) == 1:  # a span that names no tool the model asked for (but its class): the call it ran
                [match] = same.values()
                if not call.get("error") and match.get("id") in answers():  # what the model was sent, not the record
                    call["result"] = None
        match = match or next((c for c in free if conventions.griptape.runs(call, c)), None)
        call.pop("names_tool", None)
        if match is not None:
            free.remove(match)
            call["name"] = match["name"]
            if match.get("id") and not call.get("id"):
                call["id"] = match["id"]
            if match["arguments"]:  # what the model asked for: the call's own arguments
                call["arguments"] = match["arguments"]
            if call.get("result") is None and not call.get("error") and match.get("id") in (results := answers()):
                call["result"] = results[match["id"]]
    return spans


def _wire(messages: list[conventions.Msg]) -> list[dict[str, Any]]:
    """The messages as ``schemas.Message``: role and content, the assistant's tool calls and a tool message's id."""
    out = []
    for message in messages:
        wire: dict[str, Any] = {"role": message["role"], "content": message["content"]}
        if message["tool_calls"]:
            wire["tool_calls"] = message["tool_calls"]
        if message.get("tool_call_id"):
            wire["tool_call_id"] = message["tool_call_id"]
        out.append(wire)
    return out


def _tokens(value: Any) -> int | float | None:
    """A token count as a span states it: a number not below zero (not a flag), else ``None``."""
    if value is None:
        return None
    if value.__class__ is int:  # most counts: an int, no subclass to rule out
        return value if value >= 0 else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _iso(nanoseconds: int) -> str:
    return datetime.fromtimestamp(nanoseconds / 1e9, UTC).isoformat()


def _assistant_text(messages: list[conventions.Msg]) -> str:
    """The final assistant text of ``messages`` (``""`` when none has any)."""
    for m in reversed(messages):
        if m["role"] == "assistant" and m["content"]:
            return m["content"]
    return ""


def _user_text(messages: list[conventions.Msg]) -> str:
    """The last user text of ``messages`` (``""`` when none has any)."""
    for m in reversed(messages):
        if m["role"] == "user" and m["content"]:
            return m["content"]
    return ""


def _wraps(outer: str, inner: str) -> bool:
    """``outer`` holds ``inner`` and more (a template or a concatenation around the words)."""
    return bool(inner) and len(outer) > len(inner) and inner in outer
