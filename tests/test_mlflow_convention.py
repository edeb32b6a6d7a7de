"""MLflow Tracing's spans exported over OTLP (``vigil.schemas.conventions.mlflow``), hand-made as MLflow 3 writes them:
every ``mlflow.*`` value JSON text, the LLM calls as ``mlflow.openai.autolog()`` records them, the agent, tools and
retrievers as ``@mlflow.trace`` does. Each test states one rule of the module's docstring; before the module, MLflow's
spans made no turn at all (``tests/fixtures/otlp/frameworks/mlflow``: 15 runs, 0 turns)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from vigil.schemas import Turn
from vigil.schemas.spans import assembly, is_genai

TRACE = "0" * 31 + "7"
QUESTION = "What is the status of order A-1001?"
ARGS = {"order_id": "A-1001"}
SYSTEM = {"role": "system", "content": "Be kind."}
ASKED = [SYSTEM, {"role": "user", "content": QUESTION}]
CALLED = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": json.dumps(ARGS)}}]}
TOLD = {"role": "tool", "tool_call_id": "call_1", "content": "shipped"}
USAGE = {"input_tokens": 40, "output_tokens": 10, "total_tokens": 50}


def mlflow_span(span_id: str, parent: str | None, name: str, start: int, span_type: str, inputs: Any = None,
                outputs: Any = None, *, failed: str | None = None, events: list[dict[str, Any]] | None = None,
                **more: Any) -> dict[str, Any]:
    """A span as MLflow's span API writes it: each value it sets serialized as JSON, a string too."""
    attributes = {"mlflow.traceRequestId": json.dumps("tr-1"), "mlflow.spanType": json.dumps(span_type),
                  **{key: json.dumps(value) for key, value in more.items()}}
    if inputs is not None:
        attributes["mlflow.spanInputs"] = json.dumps(inputs)
    if outputs is not None:
        attributes["mlflow.spanOutputs"] = json.dumps(outputs)
    record: dict[str, Any] = {"trace_id": TRACE, "span_id": span_id.rjust(16, "0"),
                              "parent_id": parent and parent.rjust(16, "0"), "name": name, "start": start,
                              "end": start + 1, "attributes": attributes, "resource": {"service.name": "shop"},
                              "scope": "mlflow.tracing.provider", "events": events or []}
    if failed:
        kind, _, said = failed.partition(": ")
        record["status"] = {"code": 2, "message": failed}
        record["events"].append({"name": "exception", "time": start + 1, "attributes": {
            "exception.type": kind, "exception.message": said}})
    return record


def completion(message: dict[str, Any]) -> dict[str, Any]:
    """A chat completion as autolog records its output (the response object dumped)."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                         "message": message}]}


def chat_model(span_id: str, start: int, messages: list[dict[str, Any]], outputs: Any = None,
               **more: Any) -> dict[str, Any]:
    """``mlflow.openai.autolog``'s span of one ``chat.completions.create`` call under the agent span ``1``: the call's
    arguments its inputs, and each argument but the messages an attribute of its own too."""
    return mlflow_span(span_id, "1", "Completions", start, "CHAT_MODEL", {"model": "gpt-4o-mini", "messages": messages,
                                                                          "tools": []}, outputs,
                       **{"model": "gpt-4o-mini", "tools": [], "mlflow.message.format": "openai", **more})


def tool_loop(root_type: str, root_inputs: Any) -> list[dict[str, Any]]:
    answered = {"mlflow.llm.model": "gpt-4o-mini-2024-07-18", "mlflow.chat.tokenUsage": USAGE}
    return [mlflow_span("1", None, "support-bot", 0, root_type, root_inputs, "It shipped.",
                        **{"mlflow.spanFunctionName": "support_bot"}),
            chat_model("2", 1, ASKED, completion(CALLED), **answered),
            mlflow_span("3", "1", "lookup_order", 3, "TOOL", ARGS, "shipped"),
            chat_model("4", 5, [*ASKED, CALLED, TOLD], completion({"role": "assistant", "content": "It shipped."}),
                       **answered)]


@pytest.mark.parametrize(("root_type", "root_inputs"), [
    pytest.param("AGENT", {"question": QUESTION, "history": [], "session_id": None},
                 id="an AGENT function, its arguments by name"),
    pytest.param("UNKNOWN", {"history": [], "user": "u-7"},
                 id="@mlflow.trace's default type, arguments that say no words"),
])
def test_mlflows_traced_spans_are_read_by_what_its_attributes_mean(root_type, root_inputs):
    [turn] = assembly(tool_loop(root_type, root_inputs)).turns

    assert (Turn.model_validate(turn).question, turn["output"], turn["system"]) == (QUESTION, "It shipped.", "Be kind.")
    assert (turn["agent"], turn["model"], turn["usage"]) == (
        "shop", "gpt-4o-mini-2024-07-18", {"prompt_tokens": 80, "completion_tokens": 20})
    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ARGS, "call_1", "shipped")]


def test_the_intake_keeps_mlflows_spans_and_a_failed_tool_and_run_keep_their_errors_and_the_model_asked_for():
    spans = [mlflow_span("1", None, "support-bot", 0, "AGENT", {"question": QUESTION},
                         failed="InternalServerError: Error code: 500"),
             chat_model("2", 1, ASKED, completion(CALLED)),
             mlflow_span("3", "1", "lookup_order", 3, "TOOL", ARGS, failed="ValueError: database unreachable"),
             chat_model("4", 5, [*ASKED, CALLED, TOLD], failed="InternalServerError: Error code: 500")]

    [turn] = assembly(spans).turns

    assert is_genai({"mlflow.spanType": '"TOOL"'})
    assert (turn["metadata"]["vigil.run"], turn["metadata"]["vigil.error"]) == (
        "failed", "InternalServerError: Error code: 500")
    assert turn["model"] == "gpt-4o-mini"  # the call that failed has no response: the model it asked for
    assert [(c["name"], c["error"]) for c in turn["tool_calls"]] == [
        ("lookup_order", "ValueError: database unreachable")]


def chunk(delta: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


def streamed(index: int, chunk_value: dict[str, Any]) -> dict[str, Any]:
    return {"name": f"mlflow.chunk.item.{index}", "time": index,
            "attributes": {"mlflow.chunk.value": json.dumps(chunk_value)}}


def test_a_streamed_calls_tool_calls_are_read_from_its_chunks_when_mlflows_rebuilt_output_has_none():
    """MLflow rebuilds a streamed chat completion's output with the text only: the tool call the model streamed (its
    id and name in one chunk, its arguments in two) is in the chunk events. With no tool span, the call is the one the
    model asked for, its result the tool message that answered it."""
    pieces = [{"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                   "function": {"name": "lookup_order", "arguments": ""}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": '{"order_id": '}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": '"A-1001"}'}}]}]
    spans = [mlflow_span("1", None, "support-bot", 0, "AGENT", {"question": QUESTION}, "It shipped."),
             chat_model("2", 1, ASKED, completion({"role": "assistant", "content": ""}),
                        events=[streamed(i, chunk(piece)) for i, piece in enumerate(pieces)]),
             chat_model("4", 5, [*ASKED, CALLED, TOLD], completion({"role": "assistant", "content": "It shipped."}))]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ARGS, "call_1", "shipped")]


def test_a_responses_api_call_is_read_from_its_input_and_output_items():
    """``responses.create`` as autolog records it: ``input`` text (then items: the model's ``function_call``, the
    tool's ``function_call_output``) with ``instructions``; the response's ``output`` items."""
    call = {"type": "function_call", "call_id": "call_1", "name": "lookup_order", "arguments": json.dumps(ARGS)}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It shipped."}]}
    request = {"model": "gpt-4o-mini", "instructions": "Be kind."}
    spans = [mlflow_span("1", None, "support-bot", 0, "AGENT", {"history": []}),
             mlflow_span("2", "1", "Responses", 1, "CHAT_MODEL", {**request, "input": QUESTION},
                         {"id": "resp_1", "output": [{"type": "reasoning", "summary": []}, call]}),
             mlflow_span("4", "1", "Responses", 5, "CHAT_MODEL", {**request, "input": [
                 {"role": "user", "content": QUESTION}, call,
                 {"type": "function_call_output", "call_id": "call_1", "output": "shipped"}]},
                 {"id": "resp_2", "output": [answer]})]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"], turn["system"]) == (QUESTION, "It shipped.", "Be kind.")
    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ARGS, "call_1", "shipped")]


def test_a_retrievers_documents_are_the_contexts_and_the_traces_tags_its_metadata():
    documents = [{"page_content": "Refunds within 30 days.", "metadata": {"doc_uri": "policies/7", "score": 0.9},
                  "id": None},
                 {"page_content": "Bring the order number.", "metadata": {}, "id": "policy-2"}]
    spans = [mlflow_span("1", None, "support-bot", 0, "AGENT", {"question": QUESTION}, "Within 30 days.",
                         **{"mlflow.traceTag.tier": "gold"}),
             mlflow_span("2", "1", "search_docs", 1, "RETRIEVER", {"query": QUESTION}, documents),
             chat_model("3", 3, ASKED, completion({"role": "assistant", "content": "Within 30 days."}))]
    spans[0]["attributes"]["mlflow.traceTag.tier"] = "gold"  # MLflow's OTLP processor writes a tag as it is

    [turn] = assembly(spans).turns

    assert turn["contexts"] == [{"text": "Refunds within 30 days.", "id": "policies/7", "score": 0.9},
                                {"text": "Bring the order number.", "id": "policy-2"}]
    assert turn["metadata"]["tier"] == "gold"


def test_the_openai_agents_sdks_response_spans_are_read_from_their_items_usage_and_model():
    """``mlflow.openai.autolog()`` with the OpenAI Agents SDK: ``Runner.run`` an AGENT span (its input the question, its
    output the final output), the agent's own AGENT span under it, each response a CHAT_MODEL span whose inputs and
    outputs are the items themselves and whose response fields (``model``, ``usage``) MLflow copies onto the span."""
    call = {"type": "function_call", "call_id": "call_1", "name": "lookup_order", "arguments": json.dumps(ARGS),
            "id": "fc_1", "status": "completed"}
    answer = {"type": "message", "role": "assistant", "id": "msg_1",
              "content": [{"type": "output_text", "text": "It shipped.", "annotations": []}]}
    said = {"model": "gpt-4o-mini-2024-07-18", "usage": {"input_tokens": 40, "output_tokens": 10, "total_tokens": 50}}
    asked = [{"role": "user", "content": QUESTION}]
    spans = [mlflow_span("1", None, "AgentRunner.run", 0, "AGENT", QUESTION, "It shipped."),
             mlflow_span("2", "1", "support-bot", 1, "AGENT", None, {"output_type": "str"}, tools=["lookup_order"]),
             mlflow_span("3", "2", "Response", 2, "CHAT_MODEL", asked, [call], **said),
             mlflow_span("4", "2", "lookup_order", 4, "TOOL", ARGS, "shipped"),
             mlflow_span("5", "2", "Response", 6, "CHAT_MODEL", [*asked, call, {
                 "type": "function_call_output", "call_id": "call_1", "output": "shipped"}], [answer], **said)]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"]) == (QUESTION, "It shipped.")
    assert (turn["model"], turn["usage"]) == ("gpt-4o-mini-2024-07-18", {"prompt_tokens": 80, "completion_tokens": 20})
    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ARGS, "call_1", "shipped")]


def test_a_genai_tool_result_written_as_the_json_text_of_a_string_is_that_text():
    """With ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`` MLflow exports GenAI attributes instead of its own, a tool's
    result as ``json.dumps(outputs)``: a tool that returned text has the JSON text of that string as its result (the
    conventions record a result on a span as JSON)."""
    def genai_span(span_id: str, parent: str | None, name: str, start: int, **attributes: Any) -> dict[str, Any]:
        return {"trace_id": TRACE, "span_id": span_id.rjust(16, "0"), "parent_id": parent and parent.rjust(16, "0"),
                "name": name, "start": start, "end": start + 1, "attributes": attributes}

    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}])}
    spans = [genai_span("1", None, "invoke_agent support-bot", 0, **{"gen_ai.operation.name": "invoke_agent",
                                                                     "gen_ai.agent.name": "support-bot"}),
             genai_span("2", "1", "chat gpt-4o-mini", 1, **chat, **{
                 "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                     {"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": ARGS}]}])}),
             genai_span("3", "1", "execute_tool lookup_order", 3, **{
                 "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                 "gen_ai.tool.call.arguments": json.dumps(ARGS), "gen_ai.tool.call.result": json.dumps('{"eta": 2}')}),
             genai_span("4", "1", "chat gpt-4o-mini", 5, **chat, **{
                 "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                     {"type": "text", "content": "It shipped."}]}])})]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["result"]) for c in turn["tool_calls"]] == [("lookup_order", '{"eta": 2}')]


@pytest.mark.parametrize(("run_metadata", "session"), [
    pytest.param({"thread_id": "conv-1", "langgraph_step": 1}, "conv-1", id="LangGraph's thread"),
    pytest.param({"thread_id": "t-9", "session_id": "s-1"}, "s-1", id="session_id before thread_id"),
])
def test_the_conversation_a_langchain_runs_metadata_names_is_the_session(run_metadata, session):
    """``mlflow.langchain.autolog()`` writes the metadata LangChain gives each run's callback as the span's
    ``metadata``; LangGraph puts its checkpointer's thread there."""
    spans = tool_loop("CHAIN", {"messages": [["user", QUESTION]]})
    spans[0]["attributes"]["metadata"] = json.dumps(run_metadata)

    [turn] = assembly(spans).turns

    assert turn["session_id"] == session


def test_pydantic_ais_own_messages_are_read_by_who_sent_each_part():
    """``mlflow.pydantic_ai.autolog()`` records a model call's input as pydantic-ai's ``ModelMessage``s: the tool's
    result comes back in a ``request``, as a ``tool-return`` part, and is never the user's words."""
    asked = {"kind": "request", "instructions": "Be kind.",
             "parts": [{"part_kind": "user-prompt", "content": QUESTION}]}
    called = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "lookup_order",
                                             "args": json.dumps(ARGS), "tool_call_id": "call_1"}]}
    told = {"kind": "request", "instructions": "Be kind.", "parts": [
        {"part_kind": "tool-return", "tool_name": "lookup_order", "content": "shipped", "tool_call_id": "call_1"}]}
    answered = {"kind": "response", "parts": [{"part_kind": "text", "content": "It shipped."}]}
    spans = [mlflow_span("1", None, "Agent.run", 0, "AGENT", {"user_prompt": QUESTION}, {"output": "It shipped."}),
             mlflow_span("2", "1", "OpenAIChatModel.request", 1, "LLM", {"messages": [asked]}, called),
             mlflow_span("3", "1", "lookup_order", 3, "TOOL", ARGS, "shipped"),
             mlflow_span("4", "1", "OpenAIChatModel.request", 5, "LLM", {"messages": [asked, called, told]}, answered)]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"], turn["system"]) == (QUESTION, "It shipped.", "Be kind.")
    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ARGS, "call_1", "shipped")]


def test_a_tool_result_of_text_blocks_is_their_text():
    """``mlflow.strands.autolog()`` records a Strands tool's output as its ``ToolResult`` content: text blocks."""
    spans = tool_loop("AGENT", {"question": QUESTION})
    spans[2]["attributes"]["mlflow.spanOutputs"] = json.dumps([{"text": "shipped"}])

    [turn] = assembly(spans).turns

    assert [(c["name"], c["result"]) for c in turn["tool_calls"]] == [("lookup_order", "shipped")]


def test_a_tool_span_that_states_its_tools_name_is_that_tool():
    """``mlflow.dspy.autolog()`` names a tool's span by its class (``Tool.lookup_order``) and copies the ``Tool``'s
    fields onto it, its ``name`` among them; ``mlflow.llama_index.autolog()`` does the same (``FunctionTool.acall``).
    DSPy's ReAct names the tool in the model's text, so no tool call of the model's names it either."""
    said = "[[ ## next_tool_name ## ]]\nlookup_order"
    spans = [mlflow_span("1", None, "ReAct.forward", 0, "AGENT", {"question": QUESTION}, {"answer": "It shipped."}),
             chat_model("2", 1, ASKED, completion({"role": "assistant", "content": said})),
             mlflow_span("3", "1", "Tool.lookup_order", 3, "TOOL", ARGS, "shipped",
                         description="Look up an order by its id."),
             chat_model("4", 5, ASKED, completion({"role": "assistant", "content": "It shipped."}))]
    spans[2]["attributes"]["name"] = json.dumps("lookup_order")  # the Tool's field, beside its description

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ARGS, "shipped")]


def test_a_retrievers_output_that_holds_one_list_holds_its_documents():
    """DSPy's ``Retrieve`` returns ``Prediction(passages=[…])``: MLflow records it as ``{"passages": […]}``."""
    passages = ["Refunds within 30 days.", "Bring the order number."]
    spans = [mlflow_span("1", None, "Rag.forward", 0, "CHAIN", {"question": QUESTION}, {"answer": "Within 30 days."}),
             mlflow_span("2", "1", "Retrieve.forward", 1, "RETRIEVER", {"args": [QUESTION]}, {"passages": passages}),
             chat_model("3", 3, ASKED, completion({"role": "assistant", "content": "Within 30 days."}))]

    [turn] = assembly(spans).turns

    assert [c["text"] for c in turn["contexts"]] == passages


def test_autogens_own_messages_are_read_by_their_type_and_a_failed_result_is_the_calls_error():
    """``mlflow.autogen.autolog()`` records a ``ChatCompletionClient.create`` call's messages as AutoGen's
    ``LLMMessage``s (``mlflow.message.format`` ``autogen``): no roles, the speaker in ``type``, an assistant's tool
    calls as ``FunctionCall``s, the results as ``FunctionExecutionResult``s; no tool span."""
    asked = [{"content": "Be kind.", "type": "SystemMessage"},
             {"content": QUESTION, "source": "user", "type": "UserMessage"}]
    calls = [{"id": "call_1", "arguments": json.dumps(ARGS), "name": "lookup_order"}]
    results = [{"content": "Error: database unreachable", "name": "lookup_order", "call_id": "call_1",
                "is_error": True}]
    sent = [*asked, {"content": calls, "thought": None, "source": "support_bot", "type": "AssistantMessage"},
            {"content": results, "type": "FunctionExecutionResultMessage"}]

    def create(span_id: str, start: int, messages: list[dict[str, Any]], content: Any) -> dict[str, Any]:
        return mlflow_span(span_id, "1", "OpenAIChatCompletionClient.create", start, "LLM",
                           {"messages": messages, "tools": [], "json_output": None},
                           {"finish_reason": "stop", "content": content, "usage": {}, "cached": False},
                           **{"mlflow.message.format": "autogen", "mlflow.chat.tokenUsage": USAGE})
    spans = [mlflow_span("1", None, "support_bot.run", 0, "AGENT", {"task": QUESTION}),
             create("2", 1, asked, calls), create("3", 3, sent, "It could not be looked up.")]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"], turn["system"]) == (
        QUESTION, "It could not be looked up.", "Be kind.")
    assert [(c["name"], c["arguments"], c["id"], c["error"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ARGS, "call_1", "Error: database unreachable")]
    assert turn["usage"] == {"prompt_tokens": 80, "completion_tokens": 20}


def chat_message(role: str, said: str = "", calls: list[dict[str, Any]] | None = None,
                 answers: str | None = None) -> dict[str, Any]:
    """A LlamaIndex ``ChatMessage`` as MLflow records it: its words and tool calls content blocks."""
    blocks = [{"block_type": "text", "text": said}] + [
        {"block_type": "tool_call", "tool_call_id": c["id"], "tool_name": c["name"], "tool_kwargs": json.dumps(ARGS)}
        for c in calls or ()]
    return {"role": role, "additional_kwargs": {"tool_call_id": answers} if answers else {}, "blocks": blocks}


def llamaindex_llm(span_id: str, parent: str, name: str, start: int, messages: list[dict[str, Any]],
                   outputs: Any) -> dict[str, Any]:
    return mlflow_span(span_id, parent, name, start, "CHAT_MODEL", {"messages": messages}, outputs,
                       **{"mlflow.message.format": "llamaindex", "mlflow.llm.model": "gpt-4o-mini"})


def test_llamaindexs_own_messages_are_read_from_their_blocks_and_a_stream_handed_back_unread_is_no_reply():
    """``mlflow.llama_index.autolog()`` with a workflow agent (``FunctionAgent.run(user_msg=…)``): LlamaIndex's
    ``ChatMessage``s (``mlflow.message.format`` ``llamaindex``), each streamed call's output the stream's repr, the
    tool ``FunctionTool.acall`` (its ``name`` a field, its arguments ``{"kwargs": …}``), the answer in the
    ``AgentOutput``'s ``response``."""
    asked = [chat_message("system", "Be kind."), chat_message("user", QUESTION)]
    called = chat_message("assistant", "", [{"id": "call_1", "name": "lookup_order"}])
    told = chat_message("tool", "shipped", answers="call_1")
    stream = "<async_generator object llm_chat_callback.<locals>.wrapped_gen at 0x7f13302>"
    answer = {"result": {"response": chat_message("assistant", "It shipped."), "structured_response": None,
                         "current_agent_name": "support-bot", "tool_calls": [], "retry_messages": []}}
    spans = [mlflow_span("1", None, "FunctionAgent.run", 0, "AGENT", {"user_msg": QUESTION, "chat_history": None},
                         answer),
             llamaindex_llm("2", "1", "OpenAI.astream_chat", 1, asked, stream),
             mlflow_span("3", "1", "FunctionTool.acall", 3, "TOOL", {"kwargs": ARGS}, {
                 "blocks": [{"block_type": "text", "text": "shipped"}], "tool_name": "lookup_order",
                 "raw_output": "shipped", "is_error": False}),
             llamaindex_llm("4", "1", "OpenAI.astream_chat", 5, [*asked, called, told], stream)]
    spans[2]["attributes"]["name"] = json.dumps("lookup_order")

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"], turn["system"]) == (QUESTION, "It shipped.", "Be kind.")
    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [("lookup_order", ARGS, "shipped")]


def test_a_llamaindex_query_engines_query_is_the_question_and_its_responses_text_the_answer():
    """A query engine's ``aquery(str_or_query_bundle)``: the model is sent a QA prompt around the query, and answers
    a ``ChatResponse``; the engine returns a ``Response`` (``{"response": <text>, "source_nodes": […]}``)."""
    prompt = f"Context information is below.\n---\nRefunds within 30 days.\n---\nQuery: {QUESTION}\nAnswer: "
    spans = [mlflow_span("1", None, "RetrieverQueryEngine.aquery", 0, "CHAIN", {"str_or_query_bundle": QUESTION},
                         {"response": "Within 30 days.", "source_nodes": [], "metadata": {}}),
             llamaindex_llm("2", "1", "OpenAI.achat", 1, [chat_message("user", prompt)], {
                 "message": chat_message("assistant", "Within 30 days."), "raw": {}})]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"]) == (QUESTION, "Within 30 days.")


def test_ag2s_record_of_a_model_call_that_raised_is_no_reply_and_the_chat_is_a_failed_run():
    """``mlflow.ag2.autolog()`` writes AG2's runtime log of a model call: a failed one ends OK, its output the text
    AG2 logs for a config that raised; the ``initiate_chat`` span around it failed with the error."""
    error = "InternalServerError: Error code: 500 - overloaded"
    spans = [mlflow_span("1", None, "initiate_chat", 0, "UNKNOWN", {"recipient": "support_bot", "message": QUESTION,
                                                                   "max_turns": 2}, failed=error),
             mlflow_span("2", "1", "chat_completion", 1, "LLM", {"messages": ASKED, "model": "gpt-4o-mini"},
                         "error_code:None, config 0 failed", **{"mlflow.message.format": "ag2"})]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"]) == (QUESTION, "")
    assert (turn["metadata"]["vigil.run"], turn["metadata"]["vigil.error"]) == ("failed", error)


def test_a_crewai_agent_is_asked_its_tasks_description():
    """``mlflow.crewai.autolog()`` with CrewAI's native OpenAI provider traces no model call: the run is the agent's
    ``execute_task`` span, its input the Task as its fields, its output the answer."""
    task = {"used_tools": 0, "name": None, "description": QUESTION, "expected_output": "A short answer.",
            "agent": {"role": "support bot", "tools": [{"name": "lookup_order"}]}}
    spans = [mlflow_span("1", None, "Crew.kickoff", 0, "CHAIN", {}, {"raw": "It shipped.", "tasks_output": []}),
             mlflow_span("2", "1", "Task.execute_sync", 1, "CHAIN", {"agent": task["agent"]}, {"raw": "It shipped."}),
             mlflow_span("3", "2", "support bot", 2, "AGENT", {"task": task, "context": "", "tools": []},
                         "It shipped.")]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"]) == (QUESTION, "It shipped.")
    assert "vigil.content" not in turn["metadata"]


@pytest.mark.parametrize(("final", "calls"), [
    pytest.param("It shipped.", [("lookup_order", ARGS, "shipped")], id="the run's own conversation: its calls"),
    pytest.param("Another task's answer.", [], id="a conversation ending in another answer: none of the run's"),
])
def test_a_run_with_no_model_call_traced_has_the_tool_calls_of_the_conversation_a_span_above_it_reports(final, calls):
    """No model call or tool of the run is traced (``mlflow.crewai.autolog()`` with CrewAI's native OpenAI provider);
    the span above the agent's run returns the framework's record of the run's exchange with the model (CrewAI's
    ``TaskOutput.messages``): where it ends in the run's answer, its assistant's tool calls are the run's, each with
    the tool message answering its id."""
    task = {"description": QUESTION, "expected_output": "A short answer.", "agent": {"role": "support bot"}}
    exchange = [*ASKED, CALLED, TOLD, {"role": "assistant", "content": final}]
    spans = [mlflow_span("1", None, "Crew.kickoff", 0, "CHAIN", {}, {"raw": final, "tasks_output": []}),
             mlflow_span("2", "1", "Task.execute_sync", 1, "CHAIN", {"agent": task["agent"]},
                         {"description": QUESTION, "raw": final, "messages": exchange, "tool_failures": []}),
             mlflow_span("3", "2", "support bot", 2, "AGENT", {"task": task, "context": "", "tools": []},
                         "It shipped.")]

    [turn] = assembly(spans).turns

    assert [(c.name, c.arguments, c.result) for c in Turn.model_validate(turn).tool_calls] == calls


def test_a_call_crewais_task_output_says_failed_has_the_tool_messages_text_as_its_error():
    """CrewAI catches a tool's exception and sends the model ``Error executing tool: …``; the ``TaskOutput`` the Task
    span returns says which call that was (``tool_failures``: its tool and arguments), so that message is its error."""
    told = {**TOLD, "content": "Error executing tool: order database unreachable"}
    failures = [{"tool_name": "lookup_order", "tool_args": ARGS, "agent_role": "support bot",
                 "failure": {"message": "order database unreachable", "reason": "exception", "code": "ValueError"}}]
    task = {"description": QUESTION, "expected_output": "A short answer.", "agent": {"role": "support bot"}}
    spans = [mlflow_span("1", None, "Crew.kickoff", 0, "CHAIN", {}, {"raw": "Sorry.", "tasks_output": []}),
             mlflow_span("2", "1", "Task.execute_sync", 1, "CHAIN", {"agent": task["agent"]},
                         {"raw": "Sorry.", "messages": [*ASKED, CALLED, told, {"role": "assistant", "content": "Sorry."}],
                          "tool_failures": failures}),
             mlflow_span("3", "2", "support bot", 2, "AGENT", {"task": task, "context": "", "tools": []}, "Sorry.")]

    [turn] = assembly(spans).turns

    [call] = Turn.model_validate(turn).tool_calls
    assert (call.name, call.arguments, call.error) == ("lookup_order", ARGS, told["content"])


STREAM = "<async_generator object llm_chat_callback.<locals>.wrapped_gen at 0x7fa6fa4b4760>"


def test_a_value_the_tracer_could_only_print_as_its_default_repr_says_nothing():
    """``mlflow.llama_index.autolog()`` with a streaming query engine: the synthesizer's span returns the stream, which
    MLflow records as its repr; that is no one's words, and the model call's reply is the answer."""
    spans = [mlflow_span("1", None, "CompactAndRefine.aget_response", 0, "CHAIN",
                         {"query_str": QUESTION, "text_chunks": ["Refunds within 30 days."]}, STREAM),
             chat_model("2", 1, ASKED, completion({"role": "assistant", "content": "Within 30 days."}))]

    [turn] = assembly(spans).turns

    assert turn["output"] == "Within 30 days."


def test_a_roots_answer_quoting_a_tools_model_call_is_the_answer_when_the_runs_last_call_recorded_no_reply():
    """An agent whose tool is a query engine (LlamaIndex's agentic RAG through MLflow): the engine's model call, under
    the tool, is the only call whose reply was recorded (the agent's own calls stream); the agent's answer quotes the
    tool's result, which holds that reply, and the agent's last call said it."""
    engine = "Within 30 days."
    final = f"You can return it. [tool results: {engine}]"
    asked = [chat_message("system", "Be kind."), chat_message("user", QUESTION)]
    called = chat_message("assistant", "", [{"id": "call_1", "name": "search_docs"}])
    spans = [mlflow_span("1", None, "FunctionAgent.run", 0, "AGENT", {"user_msg": QUESTION},
                         {"result": {"response": chat_message("assistant", final), "structured_response": None,
                                     "current_agent_name": "support-bot", "tool_calls": [], "retry_messages": []}}),
             llamaindex_llm("2", "1", "OpenAI.astream_chat", 1, asked, STREAM),
             mlflow_span("3", "1", "QueryEngineTool.acall", 3, "TOOL", {"input": "returns"}, engine),
             llamaindex_llm("4", "3", "OpenAI.achat", 4, [chat_message("user", "Context: …\nQuery: returns")], {
                 "message": chat_message("assistant", engine)}),
             llamaindex_llm("5", "1", "OpenAI.astream_chat", 6,
                            [*asked, called, chat_message("tool", engine, answers="call_1")], STREAM)]
    spans[2]["attributes"]["name"] = json.dumps("search_docs")

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"]) == (QUESTION, final)


def test_an_autogen_user_message_from_another_source_than_the_tasks_is_an_agents_words_not_the_users():
    """AutoGen's Swarm hands over with a message the next agent's model is sent as a ``UserMessage`` whose ``source``
    is the agent that handed over (``Transferred to orders_bot, …``); the user's own have the task's source."""
    handed = "Transferred to orders_bot, adopting the role of orders_bot immediately."
    sent = [{"content": "You answer questions about orders.", "type": "SystemMessage"},
            {"content": QUESTION, "source": "user", "type": "UserMessage"},
            {"content": handed, "source": "triage", "type": "UserMessage"}]
    spans = [mlflow_span("1", None, "OpenAIChatCompletionClient.create", 0, "LLM", {"messages": sent},
                         {"finish_reason": "stop", "content": "It shipped."},
                         **{"mlflow.message.format": "autogen"})]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"]) == (QUESTION, "It shipped.")
