"""What every convention reads the same way: a message as ``{role, content, tool_calls, tool_call_id}``, JSON that may
or may not be JSON, ``prefix.N.rest`` attribute groups, roles by their many names."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..json_text import loads

__all__ = [
    "VALUE_KEYS",
    "Io",
    "Msg",
    "call_arguments",
    "final_text",
    "forced_answer",
    "function_call",
    "hand_in",
    "indexed",
    "is_final_tool",
    "is_repr",
    "joined_keys",
    "json_messages",
    "json_value",
    "key_marks",
    "keys_start",
    "message",
    "model_messages",
    "msg",
    "outcome",
    "printed_fields",
    "result_text",
    "role",
    "says_nothing",
    "sent",
    "span_tool_name",
    "text",
    "tool_call",
    "unpacked",
    "value_messages",
    "without_stack",
]

Msg = dict[str, Any]  # {"role", "content", "tool_calls": [{"name", "arguments", "id"?}], "tool_call_id"?, "failed"?}
# ("failed": a tool message whose framework says its call failed: the message's text is the error)
Io = tuple[list[Msg], list[Msg], str]  # (input messages, output messages, system instructions) of one span

_ROLES = {"developer": "system", "human": "user", "ai": "assistant", "model": "assistant", "function": "tool",
          "system": "system", "user": "user", "assistant": "assistant", "tool": "tool", "tool-response": "tool",
          "tool_response": "tool", "tool-call": "assistant", "ipython": "tool"}


def msg(role_: str, content: str, tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: Any = None) -> Msg:
    out: Msg = {"role": role_, "content": content, "tool_calls": tool_calls or []}
    if tool_call_id not in (None, ""):
        out["tool_call_id"] = str(tool_call_id)
    return out


def call_arguments(value: Any) -> Any:
    """A tool's arguments as the call named them: a Python call's packaging (``{"args": [...], "kwargs": {...}}``,
    with the framework's own flags beside them) is unwrapped to its keyword arguments (or its one object
    argument); a LangChain callback's packaging (``on_tool_start``: ``{"input_str", "tags", "metadata", "inputs",
    "kwargs"}``, as OpenLLMetry's LangChain instrumentation writes it) is its ``inputs``, else its ``input_str``: its
    ``kwargs`` are the callback's own (``color``, ``tool_call_id``), not the tool's, and an empty ``inputs`` is a call
    with no arguments (a LangGraph handoff tool's)."""
    if isinstance(value, dict) and "input_str" in value:
        return value["inputs"] if isinstance(value.get("inputs"), dict) else value["input_str"]
    if isinstance(value, dict) and isinstance(value.get("kwargs"), dict) and not isinstance(value.get("args"), str):
        objects = [a for a in value.get("args") or [] if isinstance(a, dict)]
        return {**(objects[0] if len(objects) == 1 else {}), **value["kwargs"]}
    return value


def tool_call(name: Any, arguments: Any, call_id: Any = None) -> dict[str, Any]:
    """A requested tool call: its name, its arguments as an object (JSON text is read, and so is a Python literal of
    an object: how some instrumentations print the dict a tool was called with, ``{'order_id': 'A-1001'}``), its id
    when it has one."""
    parsed = arguments if arguments.__class__ is dict else json_value(arguments)
    # an object no packaging wraps (``call_arguments``), or its JSON text (most calls): the arguments as they stand
    if parsed.__class__ is not dict or "input_str" in parsed or "kwargs" in parsed:
        parsed = call_arguments(parsed)
        parsed = json_value(parsed) if isinstance(parsed, str) else parsed
        if isinstance(parsed, str) and parsed[:2] == "{'":
            parsed = _literal(parsed)
        parsed = call_arguments(parsed)
        if not isinstance(parsed, dict):
            parsed = {}
    # a name or an id that is text (most) as it stands: no str() call
    call: dict[str, Any] = {"name": name if name.__class__ is str else str(name or ""), "arguments": parsed}
    if call_id.__class__ is str:
        if call_id:
            call["id"] = call_id
    elif call_id is not None:
        call["id"] = str(call_id)
    return call


_CALL_PARTS = frozenset({"tool_call", "tool-call", "function_call", "tool_use"})
_ARGUMENTS, _RESPONSE = "arguments", "response"  # where most call parts hold their arguments, result parts their result
_ARGUMENT_KEYS = (_ARGUMENTS, "input", "args")  # where a call part holds its arguments, the first that has any
_RESULT_KEYS = (_RESPONSE, "result", "output", "content")  # and a result part its result
# a message with no keys but these says everything in its parts (no content, tool calls or call id beside them)
_PARTS_ONLY = frozenset({"role", "parts", "finish_reason"})
_RESULT_PARTS = frozenset({"tool_call_response", "tool-result", "tool_result", "function_response"})
# A tool the model calls to end its run: to hand in its answer (smolagents' ``final_answer``, pydantic-ai's structured
# output ``final_result``, ``final_result_<Type>`` for several), or ReAct's ``finish`` action (the ReAct paper's
# ``finish[answer]``: "returns the answer and finishes the task"; a loop whose ``finish`` takes no argument has its
# answer written by the call after it). The call is the run's answer, not a tool call.
_FINAL_TOOLS = ("final_answer", "final_result", "final_output")
_FINISH_TOOLS = frozenset({"finish"})


def is_final_tool(name: Any) -> bool:
    """Whether a tool is how the model ends its run with its answer (``final_answer``, ``final_result``, ...,
    ReAct's ``finish``)."""
    name = name.lower() if name.__class__ is str else str(name or "").lower()  # a call's name is text: at once
    return name.startswith(_FINAL_TOOLS) or name in _FINISH_TOOLS


# The methods an instrumentation wraps to trace a tool's call, named in its span ``<tool>.<method>`` (DSPy's
# ``lookup_order.__call__``, CrewAI's ``lookup_order.run``): the tool is the object whose method ran.
_CALL_METHODS = frozenset({"__call__", "call", "acall", "run", "arun", "invoke", "ainvoke", "forward", "aforward",
                           "execute", "aexecute"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w-]*$")


def span_tool_name(span_name: Any) -> str:
    """The tool a tool span names when no attribute does, read from its span name: the GenAI conventions'
    ``execute_tool <tool>``, or a wrapped method's ``<tool>.<method>`` (the object's name, not the method's). Any
    other span name is the tool's name as it stands."""
    name = str(span_name or "").strip()
    operation, _, rest = name.partition(" ")
    if operation == "execute_tool" and rest.strip():
        return rest.strip()
    head, dot, method = name.rpartition(".")
    if dot and method in _CALL_METHODS and _IDENTIFIER.match(head):
        return head
    return name


def function_call(name: Any, given: Any, returned: Any) -> dict[str, Any]:
    """A decorated function's span read as a tool call: its name, what it was given (JSON: its arguments by name, or
    a Python call's ``{"args", "kwargs"}``, unwrapped by ``call_arguments``) and what it returned as the result (JSON:
    a text result is the JSON text of that string; ``None``: none recorded)."""
    call = tool_call(name, json_value(given))
    if returned is not None:
        call["result"] = result_text(json_value(returned))
    return call


def final_text(call: dict[str, Any]) -> str:
    """The answer a final-answer tool call carries: its one text argument, else its arguments as JSON."""
    arguments = call.get("arguments") or {}
    if len(arguments) == 1:
        [value] = arguments.values()
        return text(value)
    return text(arguments) if arguments else ""


def message(raw: Any, default_role: str) -> Msg:
    """A GenAI, OpenAI, Vercel or Gemini-style message (``parts`` or ``content``, ``tool_calls``, ``tool_call_id``) as
    a ``Msg``. **A message made only of tool results is a tool message, whatever role it carries** (pydantic-ai sends
    them as a ``user`` message of ``tool_call_response`` parts, Google ADK as a ``user`` message of
    ``function_response`` parts): it is never the user's words. **The chat API's tool call object** (``{"id", "type":
    "function", "function": {"name", "arguments"}}``) **is a tool call wherever a message holds it**: in its
    ``tool_calls``, as a part of its content (Langtrace writes the calls a model answered with as the assistant
    message's content), or as an item of a message list that is a list of them alone: an assistant message that
    called those tools (Langtrace writes such a message of a request so; a call with no ``function`` in it, as
    Langtrace writes one it could not read, names no call)."""
    if raw.__class__ is not dict and not isinstance(raw, dict):
        if raw.__class__ is list and raw and all(_is_chat_call(call) for call in raw):  # an assistant's calls alone
            return {"role": "assistant", "content": "",
                    "tool_calls": [_chat_call(call) for call in raw if isinstance(call.get("function"), dict)]}
        return msg(default_role, text(raw))
    if "role" not in raw:
        raw = unpacked(raw)
    if _PARTS_ONLY.issuperset(raw):  # the GenAI conventions' message: its parts say it all (one test, not five reads)
        parts = raw.get("parts") or ()
        if parts.__class__ is list and len(parts) == 1 and (part := parts[0]).__class__ is dict:
            kind = part.get("type")  # one part, the most common message: read as the loop below reads it
            # (a text part as text whatever else it holds; any other holding a ``function_call`` or
            # ``function_response`` by that)
            if kind == "text" or ("function_call" not in part and "function_response" not in part):
                if kind == "tool_call_response":  # a tool's result alone: a tool message, whatever role it carries
                    call_id = _answered_id(part)
                    out = {"role": "tool", "content": _result_of(part), "tool_calls": []}
                    if call_id not in (None, ""):
                        out["tool_call_id"] = str(call_id)
                    return out
                role_ = raw.get("role")
                role_ = (_ROLES.get(role_) if role_.__class__ is str else None) if role_ else default_role
                if role_ is not None and kind == "text" and (said := part.get("content")).__class__ is str:
                    return {"role": role_, "content": said, "tool_calls": []}
                if role_ is not None and kind == "tool_call":
                    return {"role": role_, "content": "", "tool_calls": [_call_of(part)]}
        texts, calls, results = [], [], []
        call_id = openai_calls = None
    else:
        texts, calls, results = [], [], []
        call_id = raw.get("tool_call_id") or raw.get("toolCallId")
        content = raw["content"] if "content" in raw else raw.get("text")  # a result object may hold it as ``text``
        if isinstance(content, str):
            if content[:2] == "[{":
                content = _blocks(content)
            if isinstance(content, str):
                texts.append(content)
        parts = raw.get("parts") or (content if isinstance(content, list) else ())
        openai_calls = raw.get("tool_calls")
    for part in parts:
        if not isinstance(part, dict):
            if isinstance(part, str):
                texts.append(part)
            continue
        kind = part.get("type")
        if kind == "text":  # the common case first
            said = part["content"] if "content" in part else part.get("text")
            texts.append(said if isinstance(said, str) else text(said))
            continue
        if kind == "function" and isinstance(part.get("function"), dict):  # the chat API's tool call object
            calls.append(_chat_call(part))
            continue
        if len(part) == 1 and isinstance(part.get("toolUse", part.get("toolResult")), dict):  # a keyed block
            kind, part = ("tool_use" if "toolUse" in part else "tool_result"), next(iter(part.values()))
        if kind in _CALL_PARTS or isinstance(part.get("function_call"), dict):
            body = part.get("function_call") if isinstance(part.get("function_call"), dict) else part
            calls.append(_call_of(body))
        elif kind in _RESULT_PARTS or isinstance(part.get("function_response"), dict):
            body = part.get("function_response") if isinstance(part.get("function_response"), dict) else part
            results.append(_result_of(body))
            call_id = call_id or _answered_id(body)
        elif "content" in part or "text" in part:
            texts.append(text(part.get("content", part.get("text"))))
    if openai_calls is not None:
        openai_calls = json_value(openai_calls)
        for call in openai_calls if isinstance(openai_calls, list) else ():
            if isinstance(call, dict):
                calls.append(_chat_call(call))
    if results and not texts and not calls:
        role_ = "tool"
    else:
        said = raw.get("role")
        role_ = (_ROLES.get(said) if said.__class__ is str else None) if said else default_role
        if role_ is None:  # not a role's usual spelling: ``role`` reads it
            role_ = role(said, default_role)
    out: Msg = {"role": role_, "content": texts[0] if len(texts) == 1 else "\n".join(texts or results),
                "tool_calls": calls}  # ``msg``, built in place: this runs for every message of every call
    if call_id not in (None, ""):
        out["tool_call_id"] = str(call_id)
    return out


_CHAT_CALL = frozenset({"id", "type", "function"})  # the chat API's tool call object, and nothing else


def _is_chat_call(value: Any) -> bool:
    return isinstance(value, dict) and "type" in value and _CHAT_CALL.issuperset(value)


def _chat_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call as the chat API writes it (``{"id", "type", "function": {"name", "arguments"}}``; its name and
    arguments beside the id where no ``function`` holds them)."""
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    return tool_call(function.get("name"), function.get("arguments"), call.get("id"))


def _call_of(part: dict[str, Any]) -> dict[str, Any]:
    """The tool call a message's call part asks for."""
    arguments = part.get(_ARGUMENTS)  # where most call parts hold them: found at once
    return tool_call(part.get("name") or part.get("toolName"),
                     _first(part, _ARGUMENT_KEYS) if arguments is None else arguments,
                     part.get("id") or part.get("toolCallId") or part.get("toolUseId"))


def _result_of(part: dict[str, Any]) -> str:
    """The result a message's result part carries, as text."""
    found = part.get(_RESPONSE)  # where most result parts hold it (the GenAI conventions'): found at once
    if found is None:
        found = _first(part, _RESULT_KEYS)
    return found if found.__class__ is str else text(_unwrap(_block_text(found)))  # text is the result as it stands


def _answered_id(part: dict[str, Any]) -> Any:
    """The id of the call a message's result part answers."""
    return part.get("id") or part.get("toolCallId") or part.get("tool_use_id") or part.get("toolUseId")


def json_messages(raw: Any, default_role: str) -> list[Msg]:
    """Messages written as JSON text (or as the value itself): a list of messages, one message, or a request's body
    holding them (``{"messages": [...], ...}``); any other value is one message of that text, unless it is an
    object's printed fields (``order_id='A-1001' status='shipped'``: a pydantic model's ``str()``, as OpenLIT writes a
    run's structured output), the framework's rendering of an object, not anyone's words. Nothing: ``[]``."""
    if raw in (None, ""):
        return []
    parsed = json_value(raw)
    if parsed.__class__ is not list:  # a list of messages (most values) at once
        if isinstance(parsed, dict) and isinstance(parsed.get("messages"), list):
            parsed = parsed["messages"]  # a request's body: the messages it holds
        if isinstance(parsed, dict):
            parsed = [parsed]
        if not isinstance(parsed, list):
            return [] if parsed.__class__ is str and _PRINTED_FIELDS.match(parsed) else [msg(default_role, str(raw))]
    out = []
    several = False  # a message of several tool results among them (``_each_result``)
    for m in parsed:  # one loop, each item looked at once: this runs for every model call's inputs and outputs
        if m.__class__ is dict and "kind" not in m:
            said = message(m, default_role)
        elif isinstance(m, dict) and m.get("kind") in _MODEL_MESSAGE_KINDS and "parts" in m:
            return model_messages(parsed, default_role)  # pydantic-ai's own messages: read whole, by their parts
        else:
            said = message(m, default_role)
        if said["role"] == "tool" and not several:  # only a tool message can hold several results
            several = _results(m) is not None
        out.append(said)
    return _each_result(parsed, out, default_role) if several else out


def _each_result(parsed: list[Any], read: list[Msg], default_role: str) -> list[Msg]:
    """**A message of several tool results is one tool message per result**, each answering the call its id names
    (Mirascope sends a parallel step's results as one ``user`` message of ``tool_call_response`` parts; Anthropic's
    API, one ``user`` message of ``tool_result`` blocks): read as one, its results would be joined into the first
    call's and the others' lost. ``read``: ``parsed`` read message by message."""
    out: list[Msg] = []
    for raw, said in zip(parsed, read, strict=True):
        parts = _results(raw) if said["role"] == "tool" else None
        if parts is not None:
            out.extend(message({"role": "tool", "parts": [p]}, default_role) for p in parts)
        else:
            out.append(said)
    return out


def _results(raw: Any) -> list[Any] | None:
    """The parts of a message made of several tool results (``_each_result``), else ``None``."""
    parts = (raw.get("parts") or raw.get("content")) if raw.__class__ is dict else None
    if parts.__class__ is list and len(parts) > 1 and all(
            p.__class__ is dict and p.get("type") in _RESULT_PARTS for p in parts):
        return parts
    return None


_MODEL_MESSAGE_KINDS = frozenset({"request", "response"})


def model_messages(raw: list[Any], default_role: str) -> list[Msg]:
    """**pydantic-ai's own messages are read by who sent each part.** pydantic-ai's ``ModelMessage`` as its fields
    (what ``ModelMessagesTypeAdapter`` dumps and MLflow's ``mlflow.pydantic_ai.autolog()`` records as a model call's
    input and output: ``{"kind": "request" | "response", "parts": [{"part_kind": …}], "instructions"}``) says who
    spoke by its parts, not by a role: a request's ``user-prompt`` parts are the user's words, its ``system-prompt``
    parts the system's, a ``tool-return`` part a tool message (its ``content`` the result, answering its
    ``tool_call_id``), a ``retry-prompt`` part naming a tool a tool message that says the call failed (its text the
    error); a response's ``text`` parts the assistant's text and its ``tool-call`` parts its calls (``tool_name``,
    ``args``, ``tool_call_id``). A retry prompt naming no tool (the framework asking the model to fix its output),
    thinking and file parts are no one's words here. A request's ``instructions`` are the system prompt the model was
    sent with it: the last request's, as pydantic-ai sends them, first. Any other item is read as ``message``."""
    out: list[Msg] = []
    instructions = next((m["instructions"] for m in reversed(raw) if isinstance(m, dict) and m.get("kind") == "request"
                         and isinstance(m.get("instructions"), str) and m["instructions"]), None)
    if instructions:
        out.append(msg("system", instructions))
    for item in raw:
        if not (isinstance(item, dict) and item.get("kind") in _MODEL_MESSAGE_KINDS and "parts" in item):
            out.append(message(item, default_role))
            continue
        parts = [p for p in item.get("parts") or () if isinstance(p, dict)]
        if item["kind"] == "response":
            said = [text(p.get("content")) for p in parts if p.get("part_kind") == "text"]
            calls = [tool_call(p.get("tool_name"), p.get("args"), p.get("tool_call_id")) for p in parts
                     if p.get("part_kind") == "tool-call"]
            out.append(msg("assistant", "\n".join(said), calls))
            continue
        for part in parts:
            kind = part.get("part_kind")
            if kind in ("user-prompt", "system-prompt"):
                said = part.get("content")
                if isinstance(said, list):  # a user prompt of several contents: its texts
                    said = "\n".join(c if isinstance(c, str) else text(c.get("content", c.get("text"))) for c in said
                                     if isinstance(c, str) or (isinstance(c, dict) and ("content" in c or "text" in c)))
                out.append(msg("user" if kind == "user-prompt" else "system", text(said)))
            elif kind == "tool-return":
                out.append(msg("tool", result_text(part.get("content")), tool_call_id=part.get("tool_call_id")))
            elif kind == "retry-prompt" and part.get("tool_name"):
                told = msg("tool", text(part.get("content")), tool_call_id=part.get("tool_call_id"))
                told["failed"] = True
                out.append(told)
    return out


# an object printed as its fields, ``name=<a value's literal>`` first (a pydantic model's ``str()``)
_PRINTED_FIELDS = re.compile(r"""[A-Za-z_]\w*=(?:'|"|-?\d|\[|\{|\(|None\b|True\b|False\b)""")


# where one printed field may end: before the next ``name=``, or at the end
_FIELD_END = re.compile(r" (?=[A-Za-z_]\w*=)")


_IDENTITY = re.compile(r"<[\w.]+ object \S+ at 0x[0-9a-fA-F]+>")  # ``repr()`` of an object that prints no value


def says_nothing(value: Any) -> bool:
    """**An object's identity is no value**: ``<generator object … at 0x…>`` (what a tool that is a generator function
    returned, printed before it ran: Agno's ``delegate_task_to_member``) says nothing of what it yields."""
    return value.__class__ is str and " at 0x" in value and _IDENTITY.fullmatch(value.strip()) is not None


def printed_fields(value: Any) -> dict[str, Any] | None:
    """An object printed as its fields (``status='failure' result=None error='…'``: a pydantic model's ``str()``),
    each field's value the Python literal it spells (an object's identity, ``<… object … at 0x…>``, spells none:
    ``says_nothing``); ``None`` for any other value, or a field that spells none."""
    if value.__class__ is not str or len(value) >= 200_000 or not _PRINTED_FIELDS.match(value):
        return None
    fields: dict[str, Any] = {}
    rest = value
    while rest:
        name, _, rest = rest.partition("=")
        if (identity := _IDENTITY.match(rest)) and (rest[identity.end():identity.end() + 1] in ("", " ")):
            fields[name], rest = None, rest[identity.end() + 1:]
            continue
        ends = [m.start() for m in _FIELD_END.finditer(rest)] + [len(rest)]
        for end in ends:  # the shortest text up to a field's end that spells a literal is its value
            try:
                fields[name] = ast.literal_eval(rest[:end])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            rest = rest[end + 1:]
            break
        else:
            return None
    return fields


def outcome(value: Any) -> tuple[Any, str | None] | None:
    """**A tool run's outcome is not its result**: a framework's record of running a tool, printed as its fields with
    a ``result`` and an ``error`` (Agno's ``FunctionExecutionResult``, ``status='failure' result=None error='…'``,
    as ``str()`` of what ``FunctionCall.execute`` returned), holds what the tool returned (``result``) and, when the
    framework caught the tool's exception, its text (``error``, set): ``(result, error)``. ``None`` for any other
    value."""
    fields = printed_fields(value)
    if not fields or "result" not in fields or "error" not in fields:
        return None
    failed = fields["error"]
    return fields["result"], (None if failed in (None, "", False) else text(failed))


_LC_CLASSES = {"HumanMessage": "user", "AIMessage": "assistant", "ToolMessage": "tool", "SystemMessage": "system",
               "AIMessageChunk": "assistant", "FunctionMessage": "tool", "ChatMessage": "user"}


def unpacked(raw: dict[str, Any]) -> dict[str, Any]:
    """A serialized message (LangChain's ``{"type": "ai", "data": {...}}`` or ``{"lc": 1, "id": [..., "AIMessage"],
    "kwargs": {...}}``) as the plain message it holds; **a chat completion's choice is the message it holds**: OpenAI's
    ``{"index", "finish_reason", "message": {...}}``, a response's choice as the API returns it, which Laminar's OpenAI
    instrumentation writes as each item of ``gen_ai.output.messages``."""
    if "role" in raw:
        return raw
    if "finish_reason" in raw and isinstance(raw.get("message"), dict):
        return unpacked(raw["message"])
    if isinstance(raw.get("data"), dict) and isinstance(raw.get("type"), str):
        return {"role": raw["type"], **raw["data"]}
    if isinstance(raw.get("kwargs"), dict) and isinstance(raw.get("id"), list) and raw["id"]:
        return {"role": _LC_CLASSES.get(str(raw["id"][-1]), "user"), **raw["kwargs"]}
    if raw.get("type") in ("human", "ai", "tool", "system") and "content" in raw:
        return {"role": raw["type"], **raw}
    return raw


_PACKAGING = ('"data"', '"kwargs"', '"blocks"', '"result"', '"output"', '"content"', '"response"')
# A tool call's response part, as a model is sent it: the GenAI conventions' ``tool_call_response`` part, the Gemini
# API's ``FunctionResponse`` (``id``, ``name``, ``response``)
_RESPONSE_PART = frozenset({"type", "id", "name", "response"})


_COMMAND = frozenset({"goto", "update", "graph", "resume"})  # LangGraph's Command, as a tool span's output


# what a text result that is anything but itself starts with: ``Command(``, ``content=``, a list's or an object's opening
_MARKED = frozenset("Cc[{")
_PRINTED_TOOL_MESSAGE = re.compile(r"""(?:\{'role': 'tool', 'content': |ToolMessage\(content=)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_PRINTED_MESSAGE = re.compile(r"""content=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(?= [a-z_]+=|$)""")


def result_text(value: Any) -> str:
    """A tool's result as text: a serialized tool message is its content, and so is one printed as its fields
    (``content='…' name='…' tool_call_id='…'``: a LangChain ``ToolMessage`` as ``str()`` gives it), content blocks
    their text (a list of text blocks, ``[{"text": …}]``, too: a Strands tool's ``ToolResult`` content), a one-key envelope (``{"result": "..."}``, ``{"output": <a serialized tool message>}``) what it holds (a number, a
    boolean or null as its JSON: ``{"result": null}`` is a tool that returned nothing),
    and so does the response part that carries a result back to the model (``{"id", "name", "response"}``: Google
    ADK's ``FunctionResponse``, which openinference-instrumentation-google-adk states as a tool span's output);
    **a tool that answers with a command is answered by the tool message the command carries**: a LangGraph
    ``Command`` (``{"goto", "update", "graph", "resume"}``, a handoff tool's return) sends the model the tool message
    its ``update`` adds to the graph's messages, so that message's content is the result, not the command; and so
    does one printed (``Command(graph=…, update={'messages': [… {'role': 'tool', 'content': '…'} …]}, goto=…)``,
    OpenLIT's ``str()`` of what the tool returned: its last tool message, a dict or a ``ToolMessage``);
    a Python literal of a list or object (how some instrumentations print what a tool returned) is written as JSON."""
    if value.__class__ is str and value[:1] not in _MARKED:
        return value  # plain text (most results): none of the tests below holds for it
    if isinstance(value, str) and value[:8] == "Command(" and (told := _PRINTED_TOOL_MESSAGE.findall(value)):
        content = _literal(told[-1])
        if isinstance(content, str):
            return content  # the tool message a printed command adds: what the model is sent
    if isinstance(value, str) and value[:8] == "content=" and (printed := _PRINTED_MESSAGE.match(value)):
        content = _literal(printed.group(1))
        if isinstance(content, str):
            return content
    if isinstance(value, str) and not (value[:2] in ("[{", "{'", "['") or (
            value[:1] == "{" and any(mark in value[:300] for mark in _PACKAGING))):
        return value  # plain text, or JSON that is the result itself
    parsed = json_value(value)
    if isinstance(parsed, list) and (said := _block_text(parsed)) is not parsed:
        return said  # text blocks (Strands' ToolResult content, as MLflow records a tool's output): their text
    if isinstance(parsed, dict):
        if "response" in parsed and parsed.keys() <= _RESPONSE_PART:
            return result_text(parsed["response"])  # the part that carries the result back to the model
        if "goto" in parsed and parsed.keys() <= _COMMAND and isinstance(parsed.get("update"), dict):
            messages = parsed["update"].get("messages")
            told = [said for said in (unpacked(m) for m in messages if isinstance(m, dict))
                    if said.get("role") == "tool" and "content" in said] if isinstance(messages, list) else []
            if told:
                return text(told[-1]["content"])  # the tool message the command adds: what the model is sent
        said = unpacked(parsed)
        if said is not parsed and "content" in said:
            return text(said["content"])
        if len(parsed) == 1 and set(parsed) <= {"result", "output", "content"}:
            only = next(iter(parsed.values()))
            if isinstance(only, str):
                return only  # a framework's envelope around what the tool returned (Google ADK's {"result": ...})
            if only is None or isinstance(only, (bool, int, float)):
                return json.dumps(only)  # around a value with no text: its JSON (a tool that returned None: null)
            if isinstance(only, dict) and (said := unpacked(only)) is not only and "content" in said:
                return text(said["content"])  # around the tool message it made (LangChain.js: {"output": ToolMessage})
        blocks = parsed.get("blocks")  # a result made of content blocks (LlamaIndex's ToolOutput)
        if isinstance(blocks, list) and blocks and all(isinstance(b, dict) and "text" in b for b in blocks):
            return "\n".join(text(b["text"]) for b in blocks)
    if isinstance(parsed, str) and parsed[:2] in ("[{", "{'", "['"):
        literal = _literal(parsed)
        if isinstance(literal, (list, dict)):
            return _JSON(literal)
    return text(value if isinstance(value, str) else parsed)


def _literal(value: str) -> Any:
    """The Python literal ``value`` spells, or ``value`` itself when it spells none (or is too long to try)."""
    if len(value) >= 200_000:
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def _blocks(content: Any) -> Any:
    """Content sent as JSON text of a list of content blocks (Strands' span events: ``[{"text": ...}]``, Bedrock's
    ``{"toolUse": ...}`` / ``{"toolResult": ...}``) is that list: **a message's content is read as parts whether it
    travels as a list or as the JSON text of one**; any other text stays the text it is."""
    if isinstance(content, str) and content[:2] == "[{":
        parsed = json_value(content)
        if isinstance(parsed, list) and parsed and all(isinstance(p, dict) for p in parsed):
            return parsed
    return content


def _block_text(value: Any) -> Any:
    """A tool result given as a list of text blocks is their text."""
    if isinstance(value, list) and value and all(isinstance(p, dict) and set(p) == {"text"} for p in value):
        return "\n".join(text(p["text"]) for p in value)
    return value


def _unwrap(value: Any) -> Any:
    """A typed result (``{"type": "json" | "text", "value": ...}``, the Vercel AI SDK's) as its value."""
    if isinstance(value, dict) and set(value) == {"type", "value"}:
        return value["value"]
    return value


def _first(body: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        found = body.get(key)
        if found is not None:
            return found
    return None


def hand_in(messages: list[Msg]) -> list[Msg]:
    """Messages with each final-answer tool call (``is_final_tool``) made the assistant's text: the run's answer; the
    list it is given where it holds none (a reader's own list, built for the one span it read)."""
    for m in messages:  # loops, not a generator: this runs for every span's inputs and outputs
        calls = m["tool_calls"]
        if calls:
            for call in calls:
                if is_final_tool(call.get("name")):
                    return _handed(messages, is_final_tool)
    return messages  # no final-answer call to hand in


def _handed(messages: list[Msg], is_answer: Callable[[Any], bool]) -> list[Msg]:
    """Messages with each call of a tool ``is_answer`` names made the assistant's text."""
    out = []
    for m in messages:
        final = [c for c in m["tool_calls"] if is_answer(c.get("name"))] if m["tool_calls"] else None
        if final:
            answer = "\n".join(t for t in map(final_text, final) if t)
            m = {**m, "content": m["content"] or answer,
                 "tool_calls": [c for c in m["tool_calls"] if not is_answer(c.get("name"))]}
        out.append(m)
    return out


def forced_answer(messages: list[Msg], request: Any) -> list[Msg]:
    """A model's output messages with its call of the one function its request forced (``request``: the request's
    parameters, a dict or its JSON, whose ``tool_choice`` is the chat API's ``{"type": "function", "function":
    {"name": …}}`` or the Responses API's ``{"type": "function", "name": …}``) made the assistant's text: the
    application asked the model for that function's arguments, function calling as structured output (Instructor's
    default mode, LangChain's ``with_structured_output(method="function_calling")``), and they are its answer, as a
    final-answer tool's call is (``final_text``). ``"auto"``, ``"required"`` and ``"none"`` force no one function."""
    choice = request.get("tool_choice") if isinstance(request, dict) else None
    if choice is None and isinstance(request, str) and '"tool_choice"' in request:
        parsed = json_value(request)
        choice = parsed.get("tool_choice") if isinstance(parsed, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return messages
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    return _handed(messages, lambda called: called == name) if name else messages


def key_marks(*prefixes: str) -> tuple[str, ...]:
    """Key prefixes as ``keys_start`` looks for them."""
    return tuple("\n" + prefix for prefix in prefixes)


def joined_keys(attrs: Mapping[str, Any]) -> str:
    """The keys of ``attrs`` as ``keys_start`` searches them: one text, each key after a line break."""
    return "\n" + "\n".join(attrs) if attrs else ""


def keys_start(attrs: Mapping[str, Any], marks: tuple[str, ...], joined: str | None = None) -> bool:
    """Whether a key of ``attrs`` may start with a prefix of ``marks`` (``key_marks``): **a gate, never an answer**.
    The keys are joined once and each prefix searched in C, a third of the cost of testing each key in turn; a key
    that holds a line break can say yes where no key starts so, which costs the reader behind the gate a look that
    finds nothing. ``joined``: the keys already joined (``joined_keys``), by a caller that asks several gates of one
    span."""
    if joined is None:
        joined = joined_keys(attrs)
    for mark in marks:
        if mark in joined:
            return True
    return False


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` keys grouped by N (in N order), each group keyed by ``rest``."""
    head = prefix + "."
    if not keys_start(attrs, ("\n" + head,)):  # the usual answer, found without a loop in Python
        return []
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(head):
            continue
        index, _, rest = key[len(head):].partition(".")
        if index.isdigit() and rest:
            groups.setdefault(int(index), {})[rest] = value
    return [groups[i] for i in sorted(groups)]


def role(value: Any, default: str) -> str:
    return _ROLES.get(str(value).lower(), "user") if value else default


_REPR = re.compile(r"^[A-Za-z_][\w.]*\((?:[A-Za-z_]\w*=|\)$)", re.DOTALL)
_DEFAULT_REPR = re.compile(r"^<[A-Za-z_][\w.]* object .*at 0x[0-9a-fA-F]+>$", re.DOTALL)


def is_repr(value: str) -> bool:
    """Whether text is a Python object's repr (``StopEvent(result=...)``, ``AgentOutput(...)``, or the default one,
    ``<async_generator object … at 0x7f…>``: what a tracer records for a value it cannot serialize, such as a stream
    handed back unread): framework state printed, never anyone's words."""
    value = value.strip()
    return bool(_REPR.match(value)) or (value[:1] == "<" and bool(_DEFAULT_REPR.match(value)))


# The keys of an object that hold someone's words (a run's input or output as a framework states it)
VALUE_KEYS = ("messages", "input", "question", "query", "task", "prompt", "output", "answer", "content", "text",
              "result")


def value_messages(value: Any, default_role: str) -> list[Msg]:
    """A run's input or output as a framework states it (OpenInference's ``input.value`` / ``output.value``, a
    Genkit flow's ``genkit:input`` / ``genkit:output``) when it is evidence of someone's words: plain text, a message
    list, or an object with a known key (``VALUE_KEYS``) holding text or messages, read inside any object that only
    wraps one other (a framework's packaging of its arguments: ``{"input_args": {"question": …}}``). **A message is
    words wherever it is stated**: among keyword arguments, one that is a message (an object with a ``role`` and its
    ``parts`` or ``content``: Google ADK's ``Runner.run_async(new_message=Content(role="user", parts=[…]))``) is that
    message, whatever the argument's name. Anything else (a framework's state or keyword arguments as JSON, a Python
    repr) says nothing: ``[]``, and the LLM calls are read instead."""
    parsed = json_value(value)
    while isinstance(parsed, dict) and len(parsed) == 1 and isinstance(next(iter(parsed.values())), dict):
        parsed = next(iter(parsed.values()))  # one object wrapped in another (DSPy's input_args) says no more
    if isinstance(parsed, dict):
        for key in VALUE_KEYS:
            inner = parsed.get(key)
            if isinstance(inner, list) and inner and all(isinstance(m, dict) for m in inner):
                return [message(m, default_role) for m in inner]
            if isinstance(inner, str) and not is_repr(inner):
                return [msg(default_role, inner)]
        if _is_message(parsed):
            return [message(parsed, default_role)]
        return [message(m, default_role) for m in parsed.values() if isinstance(m, dict) and _is_message(m)]
    if isinstance(parsed, list):
        if parsed and all(isinstance(m, dict) and "role" in m for m in parsed):
            return [message(m, default_role) for m in parsed]
        return []
    if isinstance(parsed, str) and parsed and not is_repr(parsed):
        return [msg(default_role, parsed)]
    return []


def _is_message(raw: dict[str, Any]) -> bool:
    """An object that is one message: a role and what it says (``parts`` or ``content``)."""
    return isinstance(raw.get("role"), str) and ("parts" in raw or "content" in raw)


_FRAME = re.compile(r"^\s+at \S")  # a JavaScript stack frame: "    at lookupOrder (file:///app/tools.js:35:11)"


def sent(messages: Iterable[Msg]) -> tuple[tuple[Any, str], ...]:
    """What two layers of one model call both say it was sent (a framework's span around the client's, or beside it:
    ``vigil.schemas.spans`` within a trace, ``vigil.schemas.steps`` across traces): each message's role, and the words
    of its user and system messages. Each layer writes the assistant's tool calls and the tool messages its own way,
    so what those say is left out; two layers of one call send equal ``sent``."""
    return tuple(((role_ := m.get("role")), (m.get("content") or "") if role_ in ("user", "system") else "")
                 for m in messages)


def without_stack(said: str) -> str:
    """An error's text without the JavaScript stack written after it (LangChain.js writes a run's error as its
    message, a blank line and ``error.stack``: ``Error: <the message>`` and its ``at`` frames): the words before the
    first frame, less the stack's own header when words came before it. Text with no frame is kept as it is."""
    if "\n" not in said or " at " not in said:
        return said
    lines = said.split("\n")
    first = next((i for i, line in enumerate(lines) if _FRAME.match(line)), None)
    if first is None:
        return said
    head = lines[:first - 1] if first > 1 and "\n".join(lines[:first - 1]).strip() else lines[:first]
    return "\n".join(head).strip() or said


# a value as JSON text, anything JSON has no form for as its str(): ``json.dumps(value, default=str,
# ensure_ascii=False)``'s encoder, made once (``json.dumps`` makes one for every call given options)
_JSON = json.JSONEncoder(default=str, ensure_ascii=False).encode


def text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _JSON(value)


def json_value(value: Any) -> Any:
    """``value`` parsed when it is JSON text (an object, an array or a string), else ``value`` itself: what
    ``json.loads`` makes of it (``json_text.loads``), or ``value`` where ``json.loads`` raises."""
    if not isinstance(value, str) or value[:1] not in ("[", "{", '"'):
        return value
    try:
        return loads(value)
    except (ValueError, RecursionError):  # not JSON
        return value
