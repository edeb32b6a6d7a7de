"""OpenLLMetry (Traceloop): the ``traceloop-sdk`` decorators' spans (``@workflow``, ``@agent``, ``@task``, ``@tool``)
around the LLM spans of its instrumentations (``opentelemetry-instrumentation-openai`` ... write GenAI attributes,
read by ``schemas.conventions.genai``).

| what | read from |
| --- | --- |
| span kind | ``traceloop.span.kind``: ``workflow`` / ``agent`` the turn's root, ``task`` a step (its spans join the turn), ``tool`` a tool call; **a task that names a tool** (``tool.name``: OpenLLMetry's LlamaIndex instrumentation writes it and ``tool.arguments`` on a workflow agent's ``call_tool`` step) is that tool's call; **the GenAI operation OpenLLMetry writes beside it says what the span did, where it names one**: ``execute_tool`` a tool call, ``invoke_agent`` an agent, and ``workflow`` (not a GenAI operation: OpenLLMetry JS's LangChain instrumentation writes it, with ``traceloop.span.kind`` ``workflow``, on every runnable of a chain or graph, a tool's call being a ``task`` of ``execute_tool``) a framework's chain, not the application's workflow (``withWorkflow``, ``@workflow``) |
| question, answer | the root's ``traceloop.entity.input`` (JSON ``{"args": [...], "kwargs": {...}}``: the first text argument, else a ``question`` / ``input`` / ``query`` / ``message`` keyword) and ``traceloop.entity.output`` (JSON: text, or an object's ``answer`` / ``output`` / ``content`` / ``text``). **OpenLLMetry's LlamaIndex instrumentation** (scope ``opentelemetry.instrumentation.llamaindex``) writes a span's input as the called method's arguments by name, in the signature's order (``{"str_or_query_bundle": "…"}``: ``inspect.BoundArguments``, each value JSON-encoded, an object by its ``to_json()`` text or a dataclass's fields): its question is the first argument that is text or a query bundle (LlamaIndex's ``QueryBundle``, what its query engines and retrievers are asked: the query is its ``query_str``); any other argument is the framework's state (an index build's nodes, an embedding's texts). **OpenLLMetry's CrewAI instrumentation** writes no entity input: a task's span (``<description>.task``, a ``task`` whose GenAI operation is ``invoke_agent``) states the task it ran, ``crewai.task.description``: the words its agent was asked, before CrewAI builds its prompt around them (``Current Task: …``), so its question (the crew's ``crewai.workflow`` span around it states nothing of its own but every task's fields: its run is spoken for by the task, by the rule of ``schemas.spans``). **OpenLLMetry's Haystack instrumentation** writes a pipeline's data (``{"args": [], "kwargs": {<component>: {"messages": [...]}}}``) and result (``{<component>: {"messages": [...], …}}``) with Haystack's ``ChatMessage`` as the dataclass's fields (``_role``, ``_content``): the result is the run's conversation as the pipeline returned it (``schemas.conventions.haystack``), its answer the last assistant text and its tool messages with Haystack's own word on whether their call failed; the data states nothing the LLM calls' conversation does not (their system prompt and tool round trip besides) |
| contexts | a task whose output is a list of documents (objects with ``content`` / ``page_content`` / ``text``, and ``id``, ``score``), or of **nodes with their scores** (LlamaIndex's ``NodeWithScore``, what its retrievers return, ``{"node": {"id_", "text", …}, "score"}``: the node's text, id and the score; OpenLLMetry's LlamaIndex instrumentation writes each as its ``to_json()`` text, read as the JSON it holds); bare nodes, with no score, are what a node parser or an index build made, no retrieval |
| a tool span | ``traceloop.entity.name``, ``traceloop.entity.input`` (the arguments: an object argument or the keywords), ``traceloop.entity.output``; its error from the span status. A LlamaIndex ``call_tool`` step: the tool and its arguments are ``tool.name`` and ``tool.arguments``, its output LlamaIndex's ``ToolCallResult`` (``tool_name``, ``tool_kwargs``, ``tool_id``, ``tool_output``): the call's id is ``tool_id``, the result the ``ToolOutput``'s text (its text blocks, else ``raw_output``), an error when ``is_error`` says so (LlamaIndex catches a tool's exception and hands the model its text). **An output that is the framework's record of running the tool is its outcome, not its result** (``_parse.outcome``): OpenLLMetry's Agno instrumentation writes ``str()`` of what Agno's ``FunctionCall.execute`` returned, a ``FunctionExecutionResult`` printed as its fields (``status='success' result='…' error=None …``): the result is its ``result``, and its ``error``, when set, the call's error (Agno catches the tool's exception and tells the model; the span ends OK). OpenLLMetry JS's LangChain instrumentation names the span by the tool's class (``DynamicStructuredTool``) and writes the arguments as JSON text in ``{"args": ["{…}"]}`` and the result as the ``ToolMessage`` the call returned, serialized: the tool, the call's id and the result are that message's ``name``, ``tool_call_id`` and content. The Python LangChain instrumentation writes a callback's own packaging there (``on_tool_start``: ``{"input_str", "tags", "metadata", "inputs", "kwargs"}``; ``on_tool_end``: ``{"output", "kwargs"}``, also as ``gen_ai.tool.call.arguments`` / ``.result``): the arguments are ``inputs`` (else ``input_str``), the call's id ``kwargs.tool_call_id``, the result ``output`` (a serialized ``ToolMessage``: its content), never the packaging around them |
| who | agent: the ``agent`` span's ``traceloop.entity.name``, else ``traceloop.workflow.name``; **an entity name that is its span's name, ``<Class>.<span kind>``, names the framework's class, not the application's agent** (OpenLLMetry's LlamaIndex instrumentation names each span so: ``FunctionAgent.workflow``, ``RetrieverQueryEngine.workflow``): the run's agent is the service's, whether the run ended or raised (a LlamaIndex span whose method raised is never exported, so a failed run has no such span to be named by: its failures and its answers are counted under one agent); session: ``traceloop.association.properties.session_id`` (or ``conversation_id``, ``thread_id``); the other association properties and the workflow name as turn metadata |
| content off | ``TRACELOOP_TRACE_CONTENT=false`` |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import haystack
from ._parse import (
    Io,
    Msg,
    json_value,
    key_marks,
    keys_start,
    msg,
    outcome,
    result_text,
    text,
    tool_call,
    unpacked,
)

__all__ = ["CLAIM_KEYS", "DOCUMENT_KEYS", "SETTING", "TOOL_KEYS", "WHO_KEYS", "decided_by", "documents", "identity",
           "io", "kind", "tool"]

SETTING = "TRACELOOP_TRACE_CONTENT=true (the default)"
LLAMAINDEX_SCOPE = "opentelemetry.instrumentation.llamaindex"  # its entity input is the method's arguments by name
CREW_TASK = "crewai.task.description"  # OpenLLMetry's CrewAI instrumentation: the task a task's span ran
_KINDS = {"workflow": "agent", "agent": "agent", "task": "step", "tool": "tool"}
_ASSOCIATION = "traceloop.association.properties."
_SESSION_KEYS = ("session_id", "conversation_id", "thread_id", "chat_id")
_QUESTION_KEYS = ("question", "input", "query", "message", "prompt", "text")
_ANSWER_KEYS = ("answer", "output", "content", "text", "result", "response")


_OPERATIONS = {"execute_tool": "tool", "invoke_agent": "agent", "workflow": "chain"}
CLAIM_KEYS = ("traceloop.span.kind",)  # ``kind`` claims no span without one of these


def kind(attrs: Mapping[str, Any]) -> str | None:
    value = attrs.get("traceloop.span.kind")
    if not value:
        return None
    found = _OPERATIONS.get(attrs.get("gen_ai.operation.name")) or _KINDS.get(str(value).lower(), "other")
    return "tool" if found == "step" and attrs.get("tool.name") else found


def decided_by(attrs: Mapping[str, Any]) -> str | None:
    """The attribute ``kind`` decided on: the operation beside the span kind when it names one, the tool a task
    names, else the span kind."""
    if not attrs.get("traceloop.span.kind"):
        return None
    if attrs.get("gen_ai.operation.name") in _OPERATIONS:
        return "gen_ai.operation.name"
    return "tool.name" if attrs.get("tool.name") and kind(attrs) == "tool" else "traceloop.span.kind"


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    if kind(attrs) != "agent":
        return [], [], ""
    given = json_value(attrs.get("traceloop.entity.input"))
    said = json_value(attrs.get("traceloop.entity.output"))
    returned = _pipeline_messages(said)
    if returned:  # a Haystack pipeline's result: the run's conversation (its data the LLM calls' say in full)
        return [], returned, ""
    question = _argument_question(given) if span.get("scope") == LLAMAINDEX_SCOPE else _question(given)
    if not question and isinstance(attrs.get(CREW_TASK), str):
        question = attrs[CREW_TASK]  # a CrewAI task's span: the task it ran
    answer = _answer(said)
    return ([msg("user", question)] if question else []), ([msg("assistant", answer)] if answer else []), ""


DOCUMENT_KEYS = ("traceloop.span.kind",)  # ``documents`` reads nothing of a span without it (no task)


def documents(attrs: Mapping[str, Any]) -> list[Any]:
    if kind(attrs) != "step":
        return []
    output = json_value(attrs.get("traceloop.entity.output"))
    if not isinstance(output, list) or not output:
        return []
    docs = []
    for item in output:
        doc = _document(item)
        if doc is None:
            return []  # a list of anything else is no retrieval (an index build's nodes, a splitter's texts)
        docs.append(doc)
    return docs


def _document(value: Any) -> dict[str, Any] | None:
    """A document as ``conventions.documents`` takes it, or ``None``: an object with its text, or a node with its
    score (``NodeWithScore``: the node's text and id, the score beside it; as JSON text, its ``to_json()``)."""
    if isinstance(value, str):
        value = json_value(value)  # only a node with its score is read from JSON text: a bare node is no retrieval
    elif isinstance(value, dict) and any(k in value for k in ("content", "page_content", "text")):
        return {**value, "content": value.get("content", value.get("page_content", value.get("text")))}
    node = value.get("node") if isinstance(value, dict) else None
    if isinstance(node, dict) and isinstance(node.get("text"), str):
        return {"content": node["text"], "id": node.get("id_"), "score": value.get("score")}
    return None


TOOL_KEYS = ("traceloop.span.kind",)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    arguments = json_value(attrs.get("tool.arguments", attrs.get("traceloop.entity.input")))
    call_id = None
    if isinstance(arguments, dict) and "input_str" in arguments:  # a LangChain callback's on_tool_start: its
        call_id = (arguments.get("kwargs") or {}).get("tool_call_id")  # arguments are its inputs (tool_call)
    elif isinstance(arguments, dict) and ("args" in arguments or "kwargs" in arguments):
        objects = [a for a in map(json_value, arguments.get("args") or []) if isinstance(a, dict)]
        arguments = objects[0] if objects else arguments.get("kwargs") or {}
    name = attrs.get("tool.name") or attrs.get("traceloop.entity.name") or span["name"]
    output = json_value(attrs.get("traceloop.entity.output"))
    if isinstance(output, dict) and isinstance(output.get("tool_output"), dict) and "tool_id" in output:
        return _tool_call_result(name, arguments, output)  # LlamaIndex's ToolCallResult
    if isinstance(output, dict) and set(output) == {"output", "kwargs"}:  # a LangChain callback's on_tool_end
        output = output["output"]
    said = unpacked(output) if isinstance(output, dict) else None
    if said is not None and said is not output and said.get("role") == "tool":
        name = said.get("name") or name  # the ToolMessage the call returned names its tool and its call
        call_id = call_id or said.get("tool_call_id")
    call = tool_call(name, arguments, call_id)
    ran = outcome(output)
    if ran is not None:  # the framework's record of the call (Agno's FunctionExecutionResult printed)
        result, failed = ran
        if result is not None:
            call["result"] = result_text(result)
        if failed:
            call["error"] = failed
    elif output is not None:
        call["result"] = result_text(output)
    return call


def _tool_call_result(name: str, arguments: Any, result: dict[str, Any]) -> dict[str, Any]:
    """A LlamaIndex ``call_tool`` step's call from the ``ToolCallResult`` it returned."""
    output = result["tool_output"]
    blocks = [b["text"] for b in output.get("blocks") or [] if isinstance(b, dict) and isinstance(b.get("text"), str)]
    said = "\n".join(blocks) if blocks else result_text(output.get("raw_output"))
    call = tool_call(name, arguments, result.get("tool_id"))
    call["result"] = said
    if output.get("is_error") is True:
        call["error"] = said
    return call


WHO_KEYS = ("traceloop.",)  # what every key ``identity`` reads starts with (a prefix: it ends in ".")
_WHO_MARKS = key_marks(*WHO_KEYS)


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if not keys_start(attrs, _WHO_MARKS):
        return {"agent": None, "session_id": None, "metadata": {}}
    properties = {k[len(_ASSOCIATION):]: v for k, v in attrs.items() if k.startswith(_ASSOCIATION)}
    session = None
    if properties:
        session = next((properties.pop(k) for k in _SESSION_KEYS if properties.get(k) not in (None, "")), None)
    metadata = {k: text(v) for k, v in properties.items()}
    if attrs.get("traceloop.workflow.name"):
        metadata["workflow"] = text(attrs["traceloop.workflow.name"])
    agent = attrs.get("traceloop.entity.name") or attrs.get("traceloop.workflow.name") if kind(attrs) == "agent" else None
    if agent is not None and str(agent).endswith(f".{attrs['traceloop.span.kind']}"):
        agent = None  # its span's name, <Class>.<span kind>: the framework's class, not the application's agent
    return {"agent": agent, "session_id": session, "metadata": metadata}


def _question(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and ("args" in value or "kwargs" in value):
        for arg in value.get("args") or []:
            if isinstance(arg, str) and arg:
                return arg
        value = value.get("kwargs") or {}
    if isinstance(value, dict):
        for key in _QUESTION_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
    return ""  # any other value is the framework's state (an index build's nodes), not anyone's words


def _pipeline_messages(value: Any) -> list[Msg]:
    """The messages a Haystack pipeline's result holds, by component (OpenLLMetry's Haystack spans): the first
    component's ``messages`` that are ``ChatMessage`` fields; ``[]`` for any other value."""
    if not isinstance(value, dict):
        return []
    for component in value.values():
        said = component.get("messages") if isinstance(component, dict) else None
        if isinstance(said, list) and said and all(isinstance(m, dict) and "_role" in m for m in said):
            return haystack.dataclass_messages(said)
    return []


def _argument_question(arguments: Any) -> str:
    """The question in a method's arguments by name (OpenLLMetry's LlamaIndex spans): the first that is text, or a
    query bundle's ``query_str``."""
    if not isinstance(arguments, dict):
        return ""
    for value in map(json_value, arguments.values()):
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict) and isinstance(value.get("query_str"), str) and value["query_str"]:
            return value["query_str"]
    return ""  # no argument is anyone's words: the framework's state


def _answer(value: Any) -> str:
    if isinstance(value, dict):
        for key in _ANSWER_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
    return ""  # any other value is the framework's state, not an answer
