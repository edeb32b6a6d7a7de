"""MLflow Tracing (``mlflow`` / ``mlflow-tracing`` 3: ``@mlflow.trace``, ``mlflow.start_span`` and the
``mlflow.<library>.autolog()`` integrations), exported over OTLP: MLflow sends its spans to an OpenTelemetry collector
instead of its tracking server when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT``) is
set, from a tracer provider of its own (scope ``mlflow.tracing.provider``). Its spans carry no GenAI or OpenInference
attribute: what a span is and holds are ``mlflow.*`` attributes (``mlflow/tracing/constant.py``,
``SpanAttributeKey``), **each value JSON text** (MLflow's span API serializes every value it sets, a string included:
``mlflow.spanType`` is ``"\\"LLM\\""``); a value some other code set on the span directly is read as it stands.

| what | read from |
| --- | --- |
| span kind | ``mlflow.spanType`` (``SpanType``): ``LLM`` and ``CHAT_MODEL`` an LLM call; ``AGENT`` an agent; ``TOOL`` a tool call; ``RETRIEVER`` a retriever; ``CHAIN``, ``WORKFLOW``, ``TASK`` and ``UNKNOWN`` (``@mlflow.trace``'s default: a function the application chose to trace) a chain, the run when it is the trace's top span; ``EMBEDDING``, ``RERANKER``, ``PARSER``, ``MEMORY``, ``GUARDRAIL``, ``EVALUATOR`` and any other other |
| messages of an LLM call | ``mlflow.spanInputs``: the request as the client was called (``mlflow.openai.autolog``: the keyword arguments of ``chat.completions.create``, ``{"model", "messages", "tools", ...}``, or of ``responses.create``, ``{"input", "instructions", ...}``: ``input`` text a user message, its items messages, ``function_call`` the assistant asking for a tool, ``function_call_output`` the tool's message; the OpenAI Agents SDK's response spans, traced by the same autolog: the input items themselves); ``mlflow.spanOutputs``: the response (a chat completion: its first choice's ``message``; a Responses object: its ``output`` items; the Agents SDK's: the output items themselves); ``mlflow.pydantic_ai.autolog()``'s model requests: pydantic-ai's own ``ModelMessage``s (``{"messages": [{"kind": "request" | "response", "parts": […]}]}``, the response one such message), read by who sent each part (``_parse.model_messages``: a tool's result returns in a request as a ``tool-return`` part, never the user's words); a message list, a message or text as themselves. **A call's messages are read in the format MLflow names**
(``mlflow.message.format``, the library whose objects it recorded): ``autogen``, ``mlflow.autogen.autolog()``'s
``ChatCompletionClient.create`` spans, records AutoGen's own ``LLMMessage``s, which say who spoke by their ``type``, not
a role: ``SystemMessage``, ``UserMessage``, ``AssistantMessage`` (its ``content`` text, or a list of ``FunctionCall``s
``{"id", "name", "arguments"}``: its tool calls; a ``UserMessage`` whose ``source`` is not the first one's, the task's,
is an agent's words passed on, not the user's: a Swarm's hand-over, ``Transferred to <agent>, …``, from the agent that
handed over) and ``FunctionExecutionResultMessage`` (a list of
``FunctionExecutionResult``s ``{"call_id", "content", "is_error"}``: a tool message each, answering its ``call_id``,
its text the call's error when ``is_error``); its output the ``CreateResult`` (``{"finish_reason", "content"}``:
text, or the ``FunctionCall``s); ``llamaindex``, ``mlflow.llama_index.autolog()``'s spans of an LLM's methods, records
LlamaIndex's own ``ChatMessage``s, whose words are content blocks (``{"role", "blocks": [{"block_type": "text",
"text"}, {"block_type": "tool_call", "tool_call_id", "tool_name", "tool_kwargs"}], "additional_kwargs"}``, a tool
message's ``tool_call_id`` and, before blocks held them, the assistant's OpenAI ``tool_calls`` in
``additional_kwargs``): a call's input its ``messages``, its output the ``ChatResponse`` (``{"message"}``), the
``CompletionResponse`` (``{"text"}``) or the text it returned. Anything else a LlamaIndex LLM method returned is no
reply: the request ``_prepare_chat_with_tools`` built, or the stream ``astream_chat`` handed back unread (recorded as
its repr, ``<async_generator object …>``); ``ag2``, ``mlflow.ag2.autolog()``'s ``chat_completion`` spans (AG2's runtime
logging), records the request and the ``ChatCompletion`` as the chat-completions API's, but a call that failed with
what AG2 logs for it, ``error_code:<code>, config <n> failed`` (its ``OpenAIWrapper``'s record of a config that
raised), as its output and an OK status: that text is no reply (the chat's span around it failed with the error) |
| a streamed call | MLflow rebuilds a streamed chat completion's output from its chunks with their text only (``_reconstruct_completion_from_stream``): the tool calls the model streamed are in the chunks, one span event each (``mlflow.chunk.item.<n>``, the chunk's JSON in ``mlflow.chunk.value``), ``choices[0].delta.tool_calls`` by ``index`` (the id and name once, the arguments in pieces): read there when the output has none |
| a run's input and output | an agent's or chain's ``mlflow.spanInputs``: the traced function's arguments by parameter name (``{"question": …, "history": […]}``), evidence of words as ``_parse.value_messages`` says (a known key holding text or messages; other arguments say nothing, and the LLM calls are read); ``mlflow.spanOutputs``: what it returned, the same way. **LlamaIndex's names for the words**, where nothing else says any (``mlflow.llama_index.autolog()`` traces its methods): a workflow agent's ``run(user_msg=…)``, a query engine's or retriever's query (``str_or_query_bundle``, ``query_bundle``: text, or a ``QueryBundle``, its ``query_str``), and what they return, an ``AgentOutput`` or a ``Response``, whose ``response`` is the reply (a ``ChatMessage``, or text). **CrewAI's agent is asked its task**: ``mlflow.crewai.autolog()`` traces ``Agent.execute_task(task, context, tools)``, the ``Task`` as its fields, and a Task asks its ``description`` (the words CrewAI wraps in its prompt template). **CrewAI's task output says
which calls failed**: the ``TaskOutput`` a ``Task.execute_sync`` span returns holds the agent's exchange with the model
(``messages``) and, in ``tool_failures``, each call that raised (``{"tool_name", "tool_args", "failure"}``): the tool
message answering the assistant's call of that tool with those arguments says its call failed (CrewAI sends the model
``Error executing tool: …`` as the result) |
| model, usage | ``mlflow.llm.model`` (the model the response names, set when a call answered), else ``model``, which MLflow copies onto an LLM span (autolog: the request's arguments but the messages; the Agents SDK's response spans: the response's fields but its output); ``mlflow.chat.tokenUsage``, ``{"input_tokens", "output_tokens", "total_tokens"}``, else the ``usage`` copied so |
| a tool span | **the tool's own name where the span states it**: MLflow copies the traced tool object's fields onto its span (DSPy's ``Tool``, LlamaIndex's ``FunctionTool``: ``name``, ``description``, ``args`` / ``parameters``) and names the span by its class and method (``Tool.lookup_order``, ``FunctionTool.acall``), so a TOOL span's ``name`` attribute, text, is the tool; else its span name (the function's, or ``name=``); ``mlflow.spanInputs`` the call's arguments (by parameter name; a ``**kwargs`` function's, LlamaIndex's ``FunctionTool.acall``, as ``{"kwargs": {…}}``: what it packs), ``mlflow.spanOutputs`` its result; no id (paired with the model's tool calls by name and arguments); its error from the span status and ``exception`` event (``@mlflow.trace`` records both when the function raises) |
| contexts | a retriever's ``mlflow.spanOutputs``: a list of ``Document`` (``{"page_content", "metadata", "id"}``), the text its ``page_content``, the id its ``id`` else ``metadata.doc_uri``, the score ``metadata.score``; **a retriever's output that holds one list holds its documents**: what the traced function returned, an object whose only value is the list (DSPy's ``Retrieve`` returns ``Prediction(passages=[…])``, recorded as ``{"passages": […]}``), each a text or a document as above |
| who | the trace's tags (``mlflow.update_current_trace(tags=…)``), which MLflow's OTLP processor writes on the root span as ``mlflow.traceTag.<key>``: turn metadata under their keys. A trace's metadata (the session, ``mlflow.trace.session``, the user, ``mlflow.trace.user``) is not exported over OTLP: MLflow writes ``session.id`` / ``user.id`` only for its Databricks tables (read, as OpenInference's keys, wherever they appear). **A LangChain run's metadata names its conversation**: ``mlflow.langchain.autolog()`` writes the metadata LangChain gives each run's callback as the span's ``metadata`` (JSON), and LangChain's keys for the conversation a run belongs to, ``session_id``, else ``conversation_id``, else ``thread_id`` (where LangGraph puts its checkpointer's thread; the keys and order LangChain's tracers, OpenInference's among them, read as the session), are the session |
| content | always: MLflow records every traced span's inputs and outputs (``SETTING`` names what removes them) |
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ._parse import (
    Io,
    call_arguments,
    is_repr,
    Msg,
    json_messages,
    json_value,
    message,
    msg,
    result_text,
    text,
    tool_call,
    value_messages,
)

__all__ = ["CLAIM_KEYS", "DOCUMENT_KEYS", "KEEP_KEYS", "KEY_PREFIXES", "KIND_KEY", "SETTING", "TOOL_KEYS", "WHO_KEYS",
           "documents", "identity", "io", "kind", "model", "tool", "usage"]

SETTING = ("MLflow's span inputs and outputs (mlflow.spanInputs / mlflow.spanOutputs, recorded on every traced span "
           "unless a span processor given to mlflow.tracing.configure removes them)")
KEY_PREFIXES = ("mlflow.",)  # every attribute this module reads starts so
KIND_KEY = "mlflow.spanType"
CLAIM_KEYS = (KIND_KEY,)  # ``kind`` claims no span without one of these
_INPUTS, _OUTPUTS = "mlflow.spanInputs", "mlflow.spanOutputs"
_MODEL, _USAGE = "mlflow.llm.model", "mlflow.chat.tokenUsage"
_TAG = "mlflow.traceTag."
_FORMAT = "mlflow.message.format"
_CHUNK = "mlflow.chunk.item."
KEEP_KEYS = (KIND_KEY,)  # every span MLflow's span API makes states its type: the spans the intake keeps
DOCUMENT_KEYS = (KIND_KEY,)  # ``documents`` reads a retriever's outputs
_KINDS = {"LLM": "llm", "CHAT_MODEL": "llm", "AGENT": "agent", "TOOL": "tool", "RETRIEVER": "retriever",
          "CHAIN": "chain", "WORKFLOW": "chain", "TASK": "chain", "UNKNOWN": "chain"}


def kind(attrs: Mapping[str, Any]) -> str | None:
    said = attrs.get(KIND_KEY)
    if said is None:  # not MLflow's: one lookup
        return None
    if said.__class__ is str and said[:1] == '"':
        said = json_value(said)
    return _KINDS.get(said, "other")


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    found = kind(attrs)
    if found == "llm":
        said_in = json_value(attrs.get(_FORMAT))
        if said_in == "autogen":
            inputs, outputs = _autogen_request(json_value(attrs.get(_INPUTS))), _autogen_result(
                json_value(attrs.get(_OUTPUTS)))
        elif said_in == "ag2" and _AG2_FAILED.match(str(json_value(attrs.get(_OUTPUTS)))):
            inputs, outputs = _request(json_value(attrs.get(_INPUTS))), []
        elif said_in == "llamaindex":
            inputs, outputs = _llamaindex_request(json_value(attrs.get(_INPUTS))), _llamaindex_reply(
                json_value(attrs.get(_OUTPUTS)))
        else:
            inputs = _request(json_value(attrs.get(_INPUTS)))
            outputs = _response(json_value(attrs.get(_OUTPUTS)))
        if not any(m["content"] or m["tool_calls"] for m in outputs) and span.get("events"):
            streamed = _streamed_calls(span["events"])
            if streamed:
                outputs = [msg("assistant", "", streamed)]
    elif found in ("agent", "chain"):
        inputs = _stated(attrs.get(_INPUTS), "user")
        outputs = _stated(attrs.get(_OUTPUTS), "assistant")
    else:
        return [], [], ""
    system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


def _stated(said: Any, default_role: str) -> list[Msg]:
    if said in (None, ""):
        return []
    found = value_messages(said, default_role)
    if found and said.__class__ is str and '"tool_failures"' in said:
        _mark_failures(found, json_value(said))
    return found or _framework_stated(said, default_role)


def _mark_failures(messages: list[Msg], said: Any) -> None:
    """The tool messages a CrewAI ``TaskOutput`` says answered failed calls marked ``failed`` (its ``tool_failures``:
    the tool's name and arguments of each call that raised, ``{"tool_name", "tool_args", "failure"}``): the tool
    message answering the assistant's call of that tool with those arguments."""
    failures = said.get("tool_failures") if isinstance(said, dict) else None
    failed = {_call_key(f.get("tool_name"), f.get("tool_args")) for f in failures if isinstance(f, dict)} if isinstance(
        failures, list) else set()
    ids = {c["id"] for m in messages for c in m["tool_calls"] if c.get("id") and _call_key(
        c["name"], c["arguments"]) in failed}
    for m in messages:
        if m["role"] == "tool" and m.get("tool_call_id") in ids:
            m["failed"] = True


def _call_key(name: Any, arguments: Any) -> str:
    """A call's tool and arguments as one text (the arguments read as ``tool_call`` reads them)."""
    call = tool_call(name, arguments)
    return json.dumps([call["name"], call["arguments"]], sort_keys=True, default=str)


# LlamaIndex's names for the words in arguments and returns, CrewAI's agent's task
_FRAMEWORK_WORDS = ("user_msg", "str_or_query_bundle", "query_bundle", "response", "task")


def _framework_stated(said: Any, default_role: str) -> list[Msg]:
    """The words a LlamaIndex method's arguments or return state under LlamaIndex's own names (text, a
    ``QueryBundle``'s ``query_str``, a ``ChatMessage``), or the description of the ``Task`` a CrewAI agent runs."""
    parsed = json_value(said)
    while isinstance(parsed, dict) and len(parsed) == 1 and isinstance(next(iter(parsed.values())), dict):
        parsed = next(iter(parsed.values()))  # a workflow's result around what the agent returned
    if not isinstance(parsed, dict):
        return []
    for key in _FRAMEWORK_WORDS:
        found = parsed.get(key)
        if isinstance(found, dict) and isinstance(found.get("query_str"), str):
            found = found["query_str"]
        elif key == "task" and isinstance(found, dict) and isinstance(found.get("description"), str):
            found = found["description"]
        if isinstance(found, str) and found:
            return [msg(default_role, found)]
        if isinstance(found, dict) and "blocks" in found:
            return [_llamaindex_message(found, default_role)]
    return []


def _llamaindex_request(request: Any) -> list[Msg]:
    """The ``ChatMessage``s a LlamaIndex LLM was called with (its ``messages``)."""
    said = request.get("messages") if isinstance(request, dict) else None
    return [_llamaindex_message(m, "user") for m in said if isinstance(m, dict)] if isinstance(said, list) else []


_AG2_FAILED = re.compile(r"^error_code:.*, config \d+ failed$")  # AG2's log of a model call that raised


def _llamaindex_reply(reply: Any) -> list[Msg]:
    """What a LlamaIndex LLM answered: a ``ChatResponse``'s message, a ``CompletionResponse``'s text, or text; its
    repr (``<async_generator object … at 0x…>``: a stream not read yet) is none."""
    if isinstance(reply, dict):
        if isinstance(reply.get("message"), dict):
            return [_llamaindex_message(reply["message"], "assistant")]
        return [msg("assistant", reply["text"])] if isinstance(reply.get("text"), str) else []
    if isinstance(reply, str) and reply and not is_repr(reply):
        return [msg("assistant", reply)]
    return []


def _llamaindex_message(raw: dict[str, Any], default_role: str) -> Msg:
    """A LlamaIndex ``ChatMessage``: its text blocks its words, its ``tool_call`` blocks (else ``additional_kwargs``'
    OpenAI ``tool_calls``) its tool calls, ``additional_kwargs.tool_call_id`` the call a tool message answers."""
    blocks = raw.get("blocks")
    if not isinstance(blocks, list):
        return message(raw, default_role)
    extra = raw.get("additional_kwargs") if isinstance(raw.get("additional_kwargs"), dict) else {}
    said = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("block_type") == "text"
                     and isinstance(b.get("text"), str) and b["text"])
    calls = [tool_call(b.get("tool_name"), b.get("tool_kwargs"), b.get("tool_call_id")) for b in blocks
             if isinstance(b, dict) and b.get("block_type") == "tool_call"]
    if not calls and isinstance(extra.get("tool_calls"), list):
        calls = message({"role": "assistant", "tool_calls": extra["tool_calls"]}, "assistant")["tool_calls"]
    role_ = raw.get("role")
    return msg(role_ if role_ in ("system", "user", "assistant", "tool") else default_role, said, calls,
               extra.get("tool_call_id"))


def _request(request: Any) -> list[Msg]:
    """The messages a model was sent, from the call's arguments as MLflow recorded them."""
    if isinstance(request, dict) and "messages" not in request and "input" in request:  # the Responses API
        said = request["input"]
        found = [msg("system", request["instructions"])] if isinstance(request.get("instructions"), str) else []
        return found + (_items(said, "user") if isinstance(said, list) else [msg("user", text(said))])
    if isinstance(request, list):  # the input items themselves (the OpenAI Agents SDK's response spans)
        return _items(request, "user")
    return json_messages(request, "user") if request is not None else []


def _response(response: Any) -> list[Msg]:
    """The message a model answered, from the response as MLflow recorded it."""
    if isinstance(response, dict):
        choices = response.get("choices")
        if isinstance(choices, list):  # a chat completion: its first choice
            first = choices[0] if choices and isinstance(choices[0], dict) else {}
            return [message(first["message"], "assistant")] if isinstance(first.get("message"), dict) else []
        if isinstance(response.get("output"), list):  # a Responses object
            return _items(response["output"], "assistant")
    if isinstance(response, list):  # the output items themselves (the OpenAI Agents SDK's response spans)
        return _items(response, "assistant")
    return json_messages(response, "assistant") if response is not None else []


_AUTOGEN_ROLES = {"SystemMessage": "system", "UserMessage": "user", "AssistantMessage": "assistant"}


def _autogen_request(request: Any) -> list[Msg]:
    """The messages an AutoGen model client was sent (its ``LLMMessage``s), read by their ``type``."""
    said = request.get("messages") if isinstance(request, dict) else request
    out: list[Msg] = []
    asker = next((m.get("source") for m in said if isinstance(m, dict) and m.get("type") == "UserMessage"),
                 None) if isinstance(said, list) else None
    for item in said if isinstance(said, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "UserMessage" and item.get("source") != asker:
            out.append(_autogen_said("assistant", item.get("content")))  # an agent's words passed on: not the user's
        elif item.get("type") == "FunctionExecutionResultMessage":
            for result in item.get("content") or ():
                if isinstance(result, dict):
                    told = msg("tool", result_text(result.get("content")), tool_call_id=result.get("call_id"))
                    if result.get("is_error") is True:
                        told["failed"] = True
                    out.append(told)
        else:
            out.append(_autogen_said(_AUTOGEN_ROLES.get(item.get("type"), "user"), item.get("content")))
    return out


def _autogen_result(result: Any) -> list[Msg]:
    """The answer of an AutoGen model client (its ``CreateResult``): text, or the tool calls it asked for."""
    return [_autogen_said("assistant", result["content"])] if isinstance(result, dict) and "content" in result else []


def _autogen_said(role_: str, content: Any) -> Msg:
    """An AutoGen message's content: text, a list of ``FunctionCall``s (an assistant's tool calls), or a list of text
    and images (a user's)."""
    if isinstance(content, list):
        calls = [tool_call(c.get("name"), c.get("arguments"), c.get("id")) for c in content
                 if isinstance(c, dict) and "arguments" in c]
        return msg(role_, "\n".join(c for c in content if isinstance(c, str)), calls)
    return msg(role_, text(content))


def _items(items: list[Any], default_role: str) -> list[Msg]:
    """Responses API items (or chat messages) as messages: a ``function_call`` the assistant asking for a tool, a
    ``function_call_output`` the tool's message, a ``message`` or a plain ``{role, content}`` a message, text a
    message of ``default_role``; reasoning and other items that hold no message are left out."""
    out: list[Msg] = []
    for item in items:
        if not isinstance(item, dict):
            if isinstance(item, str):
                out.append(msg(default_role, item))
            continue
        kind_ = item.get("type")
        if kind_ == "function_call":
            out.append(msg("assistant", "", [tool_call(item.get("name"), item.get("arguments"), item.get("call_id"))]))
        elif kind_ == "function_call_output":
            out.append(msg("tool", result_text(item.get("output")), tool_call_id=item.get("call_id")))
        elif kind_ in (None, "message") or "role" in item:
            out.append(message(item, default_role))
    return out


def _streamed_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls a streamed chat completion's chunks carry (``mlflow.chunk.item.<n>`` events, in order), each
    put together from its pieces by ``index``."""
    calls: dict[Any, dict[str, Any]] = {}
    for event in events:
        if not event["name"].startswith(_CHUNK):
            continue
        chunk = json_value((event.get("attributes") or {}).get("mlflow.chunk.value"))
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
        for part in (delta.get("tool_calls") or ()) if isinstance(delta, dict) else ():
            if not isinstance(part, dict):
                continue
            call = calls.setdefault(part.get("index"), {"id": "", "name": "", "arguments": ""})
            function = part.get("function") if isinstance(part.get("function"), dict) else {}
            call["id"] += part.get("id") or ""
            call["name"] += function.get("name") or ""
            call["arguments"] += function.get("arguments") or ""
    return [tool_call(c["name"], c["arguments"], c["id"]) for c in calls.values() if c["name"]]


TOOL_KEYS = (KIND_KEY,)  # ``tool`` reads nothing of a span without one of these (``conventions.gates``)


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    """The call a tool span made: its name, its arguments (the function's, by parameter name), its result."""
    attrs = span["attributes"]
    if kind(attrs) != "tool":
        return None
    given = json_value(attrs.get(_INPUTS))
    named = json_value(attrs.get("name"))  # the tool object's own name, as MLflow copies its fields
    given = call_arguments(given)  # a ``**kwargs`` function's arguments as MLflow records them: {"kwargs": {…}}
    call: dict[str, Any] = {"name": named if isinstance(named, str) and named else span["name"],
                            "arguments": given if isinstance(given, dict) else {}}
    if attrs.get(_OUTPUTS) is not None:
        call["result"] = result_text(json_value(attrs[_OUTPUTS]))
    return call


def documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The documents a retriever returned, as ``{content, id, score}`` (``[]`` for any other span)."""
    if kind(attrs) != "retriever":
        return []
    found = json_value(attrs.get(_OUTPUTS))
    if isinstance(found, dict) and len(found) == 1 and isinstance(next(iter(found.values())), list):
        [found] = found.values()  # the one list a returned object holds (DSPy's Prediction(passages=[…]))
    out = []
    for doc in found if isinstance(found, list) else ():
        if not isinstance(doc, dict):
            out.append({"content": doc})
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        out.append({"content": doc.get("page_content", doc.get("content", doc.get("text"))),
                    "id": doc.get("id") or meta.get("doc_uri"), "score": meta.get("score")})
    return out


def model(attrs: Mapping[str, Any]) -> Any:
    """The model an LLM call names: the response's (``mlflow.llm.model``), else the ``model`` MLflow copied onto the
    span (the request's argument, or the response's field)."""
    said = attrs.get(_MODEL)
    if said is None and "model" in attrs and kind(attrs) == "llm":
        said = attrs["model"]
    return json_value(said) if said is not None else None


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(input tokens, output tokens) a call's ``mlflow.chat.tokenUsage`` states, else the response's ``usage`` MLflow
    copied onto the span (``None`` when silent)."""
    if _USAGE in attrs:
        said = json_value(attrs[_USAGE])
    else:
        said = json_value(attrs["usage"]) if "usage" in attrs and kind(attrs) == "llm" else None
    if not isinstance(said, dict):
        return None, None
    return said.get("input_tokens"), said.get("output_tokens")


_RUN_METADATA = "metadata"  # MLflow's LangChain autolog: the LangChain run's metadata
_SESSION_KEYS = ("session_id", "conversation_id", "thread_id")  # LangChain's names of a run's conversation, in order
WHO_KEYS = (_TAG, _RUN_METADATA)  # ``identity`` reads nothing of a span without one


def identity(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The trace's tags as turn metadata, the session a LangChain run's metadata names (MLflow exports no agent name
    and no session of its own over OTLP)."""
    metadata = {key[len(_TAG):]: text(json_value(value)) for key, value in attrs.items() if key.startswith(_TAG)}
    run = json_value(attrs.get(_RUN_METADATA)) if KIND_KEY in attrs else None
    session = next((run[key] for key in _SESSION_KEYS if run.get(key) not in (None, "")), None) if isinstance(
        run, dict) else None
    return {"agent": None, "session_id": session, "metadata": metadata}
