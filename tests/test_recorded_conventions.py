"""Spans recorded from the real instrumentation libraries (``tests/fixtures/otlp``) become exactly one turn per agent
run, with its question, answer, tool calls and session; a call that only asks for a tool is never a turn. Decoded by
the intake's own decoder, assembled by ``vigil.schemas.spans``."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from vigil.schemas import Turn
from vigil.schemas.spans import assembly
from vigil.worker.intake.otlp import decode_logs, decode_traces

FIXTURES = Path(__file__).parent / "fixtures" / "otlp"
QUESTION = "Can I return a kettle that arrived damaged?"
ANSWER = "Damaged items can be returned within 30 days for a full refund; bring the order number."
DOCS = [("policy-7", 0.92), ("policy-2", 0.41)]


def recorded(name: str) -> dict[str, list[dict[str, Any]]]:
    """The fixture's span records, by trace, as the intake decodes them."""
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in json.loads((FIXTURES / name).read_text())["requests"]:
        decode = decode_traces if request["path"].endswith("/v1/traces") else decode_logs
        decoded = decode(json.dumps(request["body"]).encode(), json_body=True)
        assert decoded.rejected == 0
        for record in decoded.spans:
            by_trace[record["trace_id"]].append(record)
    return by_trace


def turns_of(name: str) -> tuple[list[Turn], int]:
    turns, steps = [], 0
    for spans in recorded(name).values():
        result = assembly(spans)
        turns += [Turn.model_validate({"agent": "service", **t}) for t in result.turns]
        steps += len(result.steps)
    return turns, steps


@pytest.mark.parametrize(("fixture", "agents", "steps"), [
    pytest.param("openai_v2_span_only.json", 3, 1, id="openai-v2 on spans: agent, loop, HTTP span"),
    pytest.param("openai_v2_events.json", 2, 1, id="openai-v2 as log events: loop, HTTP span"),
    pytest.param("openllmetry.json", 3, 1, id="OpenLLMetry: workflow spans, loop, HTTP span"),
    pytest.param("openllmetry_events.json", 2, 1, id="OpenLLMetry as log events: workflow spans, loop"),
    pytest.param("openinference_openai.json", 2, 1, id="OpenInference openai: agent, loop"),
    pytest.param("openlit.json", 2, 1, id="openlit: agent, loop"),
    pytest.param("langchain.json", 1, 0, id="OpenInference LangChain: a RAG chain"),
    pytest.param("openai_v2_slow_agent.json", 1, 0, id="openai-v2: a slow agent, its root exported last"),
    pytest.param("node_json.json", 1, 0, id="Node.js, hand-set GenAI attributes, OTLP/JSON exporter"),
    pytest.param("node_proto.json", 1, 0, id="Node.js, hand-set GenAI attributes, protobuf exporter"),
])
def test_each_agent_run_is_one_turn_with_the_answer_and_a_tool_step_is_never_a_turn(fixture, agents, steps):
    turns, unanswered = turns_of(fixture)

    assert len(turns) == agents
    assert all(t.question.startswith(QUESTION) and t.output == ANSWER for t in turns)  # the loop asks "... (loop)"
    assert unanswered == steps  # each call of the loop is its own trace: its tool-call step is counted, not scored


@pytest.mark.parametrize(("fixture", "session", "agent"), [
    pytest.param("openai_v2_span_only.json", "conv-v2-1", "support-bot", id="openai-v2"),
    pytest.param("openllmetry.json", "sess-tl-1", "support-bot", id="OpenLLMetry"),
    pytest.param("openinference_openai.json", "sess-oi-1", "support-bot", id="OpenInference"),
    pytest.param("openlit.json", "conv-openlit-1", "support-bot", id="openlit"),
])
def test_the_agent_run_keeps_its_session_agent_contexts_and_tool_call(fixture, session, agent):
    [run] = [t for t in turns_of(fixture)[0] if t.session_id]

    assert (run.session_id, run.agent) == (session, agent)
    assert [(d.id, d.score) for d in run.contexts] == DOCS
    assert [(c.name, c.arguments, c.result) for c in run.tool_calls] == [
        ("get_return_window", {"item": "kettle"}, "30 days")]


def test_langchain_retriever_documents_keep_the_id_and_score_from_their_metadata():
    [chain] = turns_of("langchain.json")[0]

    assert (chain.session_id, [(d.id, d.score) for d in chain.contexts]) == ("sess-lc-1", DOCS)


def test_the_http_span_around_a_tool_round_trip_is_the_turn_root_with_the_assistant_tool_call_in_its_input():
    turns, _ = turns_of("openai_v2_span_only.json")
    [http] = [t for t in turns if t.metadata.get("span_name") == "POST /chat"]

    assistant, tool = http.input[-2:]
    assert [(c.name, c.id) for c in assistant.tool_calls] == [("get_return_window", "call_1")]
    assert (tool.role, tool.tool_call_id, tool.content) == ("tool", "call_1", "30 days")
    assert [(c.name, c.id, c.result) for c in http.tool_calls] == [("get_return_window", "call_1", "30 days")]


def test_openllmetry_workflow_spans_give_the_question_answer_session_and_workflow():
    [run] = [t for t in turns_of("openllmetry.json")[0] if t.session_id]

    assert (run.input[-1].content, run.metadata["workflow"], run.metadata["span_name"]) == (
        QUESTION, "support-bot", "support-bot.agent")


def test_openlit_prompt_text_is_read_as_messages_with_the_tool_call_it_holds_in_python_notation():
    loop = [t for t in turns_of("openlit.json")[0] if not t.session_id]

    [run] = loop
    assert [m.role for m in run.input] == ["system", "user", "assistant", "tool"]
    assert run.input[0].content.startswith("You are the support bot of Acme.") and run.question.startswith(QUESTION)
    assert [(c.name, c.id, c.result) for c in run.tool_calls] == [("get_return_window", "call_1", "30 days")]


def test_openlit_role_prefixed_text_is_one_message_per_role_line_with_continuations():
    from vigil.schemas.conventions.openlit import split

    messages = split("system: Be brief.\nPolicy:\nrefunds in 30 days\nuser: Can I return it?")

    assert [(m["role"], m["content"]) for m in messages] == [("system", "Be brief.\nPolicy:\nrefunds in 30 days"),
                                                              ("user", "Can I return it?")]


@pytest.mark.parametrize(("fixture", "setting", "root"), [
    pytest.param("openai_v2_no_content.json", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None,
                 id="openai-v2"),
    # Haystack's tracer puts a model call's messages only in content tags: without them its step's call is a span
    # with no tag at all, known by the operation it is named after
    pytest.param("haystack_tracer_no_content.json", "HAYSTACK_CONTENT_TRACING_ENABLED=true", "haystack.agent.run",
                 id="Haystack's own tracer"),
    # Semantic Kernel's diagnostics without their sensitive variable: no messages, no tool arguments or results
    pytest.param("semantic_kernel_no_content.json", "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE",
                 "invoke_agent support_bot",
                 id="Semantic Kernel, not sensitive"),
    # with it, but only the tracer provider set up: the messages were log records nobody exported; the agent span
    # states its answer, no span the user's words
    pytest.param("semantic_kernel_no_logs.json", "logs exported to the intake", "invoke_agent support_bot",
                 id="Semantic Kernel, its log records not exported"),
    # Griptape's own observability has no setting for content: its spans name the method they time, and the run's
    # content comes from an instrumentation of the model client its prompt driver calls
    pytest.param("griptape_no_content.json", "instrumentation of the model client Griptape's prompt driver calls",
                 "Agent.run()",
                 id="Griptape's own observability"),
    # the OpenAI Agents SDK through Logfire, told to keep sensitive data out of its records: Logfire writes the records
    pytest.param("openai_agents_logfire_no_content.json", "OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=true",
                 "OpenAI Agents trace: {name}", id="OpenAI Agents SDK through Logfire"),
])
def test_without_captured_content_each_run_is_a_turn_marked_with_the_setting_that_turns_it_on(fixture, setting, root):
    turns, steps = turns_of(fixture)

    assert len(turns) == 2 and steps == 0
    assert all(t.metadata["vigil.content"] == "missing" for t in turns)
    assert all(setting in t.metadata["vigil.content_setting"] for t in turns)
    assert root is None or all(t.metadata["span_name"] == root for t in turns)


# -- issue 27: the turn the agent meant, read from what the conventions mean ------------------------------------
ORDER_QUESTION = "What is the status of order A-1001?"
ORDER_ARGS = {"order_id": "A-1001"}


def test_a_tool_result_sent_as_a_user_message_is_a_tool_message_and_never_the_question():
    """pydantic-ai (format 5) sends tool results as a ``user`` message of ``tool_call_response`` parts."""
    [run] = turns_of("pydantic_ai_tool.json")[0]

    assert run.question == ORDER_QUESTION
    assert [m.role for m in run.input] == ["user", "assistant", "tool"]
    assert run.input[-1].tool_call_id == run.tool_calls[0].id
    assert run.output.startswith(f"ANSWER to <{ORDER_QUESTION}>")
    assert (run.usage.prompt_tokens, run.usage.completion_tokens) == (84, 34)  # both calls, not the last one's


def test_a_conversation_span_holding_two_agent_runs_is_a_container_and_each_run_is_a_turn_of_one_session():
    """openai-agents: two ``Runner.run`` inside one ``trace(group_id=...)``."""
    first, second = sorted(turns_of("openai_agents_conversation.json")[0], key=lambda t: t.started_at)

    assert first.question == ORDER_QUESTION
    assert second.question.startswith("Thanks. And can I change the address of that order?")
    assert first.session_id == second.session_id == first.trace_id
    assert first.span_id != second.span_id


def test_a_tool_call_keeps_the_arguments_it_was_called_with_never_the_tool_parameter_schema():
    calls = [c for t in turns_of("openai_agents_conversation.json")[0] for c in t.tool_calls]

    assert [(c.name, c.arguments) for c in calls] == [("lookup_order", ORDER_ARGS)] * 2
    assert all(c.id and c.id.startswith("call_") for c in calls)  # paired with the LLM's tool calls


def test_a_run_that_fails_without_an_answer_is_a_failed_turn_with_its_error():
    [run] = turns_of("pydantic_ai_crash.json")[0]

    assert (run.question, run.output) == (ORDER_QUESTION, "")
    assert run.metadata["vigil.run"] == "failed"
    assert run.metadata["vigil.error"] == "ValueError: order database unreachable for A-1001"
    [call] = run.tool_calls
    assert call.error == "ValueError: order database unreachable for A-1001"  # from the exception event


def test_a_final_answer_tool_is_the_answer_and_not_a_tool_call():
    """pydantic-ai ``output_type=``: the model answers by calling ``final_result``."""
    [run] = turns_of("pydantic_ai_structured.json")[0]

    assert json.loads(run.output)["order_id"] == "A-1001"
    assert [c.name for c in run.tool_calls] == ["lookup_order"]


def test_the_vercel_ai_sdk_run_is_one_turn_with_its_session_agent_tool_call_and_usage():
    [run] = turns_of("vercel_ai_tool.json")[0]

    assert (run.question, run.agent, run.session_id) == (ORDER_QUESTION, "support-bot", "conv-vercel-1")
    assert run.output.startswith(f"ANSWER to <{ORDER_QUESTION}>")
    assert run.system == "You are Acme's support bot. Use the tools."
    [call] = run.tool_calls
    assert (call.name, call.arguments) == ("lookup_order", ORDER_ARGS) and call.id.startswith("call_")
    assert json.loads(call.result)["status"] == "shipped"
    assert (run.usage.prompt_tokens, run.usage.completion_tokens) == (84, 34)


# Hand-made spans for the rules no recording above shows on its own.
TRACE = "0" * 31 + "1"


def span(span_id: str, parent: str | None, name: str, start: int, **attributes: Any) -> dict[str, Any]:
    return {"trace_id": TRACE, "span_id": span_id.rjust(16, "0"), "parent_id": parent and parent.rjust(16, "0"),
            "name": name, "start": start, "end": start + 10, "attributes": attributes}


def llm(span_id: str, parent: str, start: int, question: str, answer: str) -> dict[str, Any]:
    return span(span_id, parent, "chat", start, **{
        "openinference.span.kind": "LLM", "llm.model_name": "m",
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be kind.",
        "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": question,
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": answer})


@pytest.mark.parametrize(("given", "answered"), [
    pytest.param('{"task": "Where is A-1001?", "stream": false, "reset": true}', "StopEvent(result=AgentOutput(x=1))",
                 id="keyword arguments and a Python repr"),
    pytest.param('{"init_state": {"memory": []}}', '{"raw": "x", "tasks_output": [], "token_usage": {}}',
                 id="framework state and a framework's result object"),
])
def test_a_root_value_that_is_not_anyones_words_loses_to_the_llm_calls(given, answered):
    spans = [span("1", None, "run", 0, **{"openinference.span.kind": "CHAIN", "input.value": given,
                                           "output.value": answered}),
             llm("2", "1", 1, "Where is A-1001?", "It ships in 2 days.")]

    [turn] = assembly(spans).turns

    assert (turn["input"][-1]["content"], turn["output"]) == ("Where is A-1001?", "It ships in 2 days.")


@pytest.mark.parametrize(("tool_choice", "answered"), [
    pytest.param({"type": "function", "function": {"name": "OrderStatus"}}, True, id="the chat API's, by name"),
    pytest.param({"type": "function", "name": "OrderStatus"}, True, id="the Responses API's, by name"),
    pytest.param("required", False, id="required: no one function"),
    pytest.param("auto", False, id="auto"),
])
def test_a_call_of_the_function_the_request_forced_is_the_answer(tool_choice, answered):
    """Instructor's structured output: the request forces the model to call ``OrderStatus`` and the application takes
    the call's arguments as its answer; nothing runs it. A call the request did not force is a step: the answer has
    not arrived."""
    arguments = {"order_id": "A-1001", "status": "shipped"}
    call = llm("2", "1", 1, "Where is A-1001?", "")
    del call["attributes"]["llm.output_messages.0.message.content"]
    call["attributes"].update({
        "llm.invocation_parameters": json.dumps({"model": "m", "tool_choice": tool_choice}),
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "OrderStatus",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps(arguments)})
    spans = [span("1", None, "instructor.create", 0, **{"openinference.span.kind": "CHAIN"}), call]

    found = assembly(spans)

    if answered:
        [turn] = found.turns
        assert json.loads(turn["output"]) == arguments and not turn.get("tool_calls")
    else:
        assert (found.turns, found.steps) == ([], [call["span_id"]])


@pytest.mark.parametrize("inside_ran", [False, True], ids=["the request inside, the run beside", "the run inside"])
def test_a_tool_span_inside_a_model_call_that_records_only_the_request_is_no_run(inside_ran):
    """AgentOps' OpenAI instrumentation writes each tool call of a response as a span under the call's (its name,
    arguments and id, nothing of a run) and the application's ``@tool`` span runs it: one call. A tool that ran
    inside its call (a streamed call's) states its result, and is the call."""
    asked = llm("2", "1", 1, "Where is A-1001?", "")
    del asked["attributes"]["llm.output_messages.0.message.content"]
    asked["attributes"].update({
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup_order",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps(ORDER_ARGS)})
    called = {"tool.name": "lookup_order", "input.value": json.dumps(ORDER_ARGS)}
    inside = span("3", "2", "tool_call.lookup_order", 2, **called, **({"output.value": "shipped"} if inside_ran else {}))
    beside = [] if inside_ran else [span("4", "1", "lookup_order.tool", 13, **called, **{"output.value": "shipped"})]
    spans = [span("1", None, "support_bot", 0, **{"openinference.span.kind": "AGENT"}), asked, inside, *beside,
             llm("5", "1", 20, "Where is A-1001?", "It has shipped.")]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c.get("result")) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "shipped")]


def test_a_root_value_that_is_plain_text_is_the_question():
    spans = [span("1", None, "run", 0, **{"openinference.span.kind": "AGENT", "input.value": "Where is A-1001?"}),
             llm("2", "1", 1, "New task:\nWhere is A-1001?", "It ships in 2 days.")]

    [turn] = assembly(spans).turns

    assert turn["input"] == [{"role": "user", "content": "Where is A-1001?"}]


def test_an_openllmetry_workflow_that_calls_no_model_and_states_only_its_state_is_no_turn():
    nodes = json.dumps({"args": [], "kwargs": {"nodes": ['{"id_": "policy-7", "text": "Damaged items are refunded."}']}})
    spans = [span("1", None, "SentenceSplitter.workflow", 0, **{
        "traceloop.span.kind": "workflow", "traceloop.entity.name": "SentenceSplitter",
        "traceloop.entity.input": nodes, "traceloop.entity.output": json.dumps(['{"id_": "n-1"}'])}),
        span("2", "1", "SentenceSplitter.task", 1, **{"traceloop.span.kind": "task"})]

    result = assembly(spans)

    assert result.turns == [] and result.no_turn  # an index build: counted, never a turn


LLAMAINDEX = "opentelemetry.instrumentation.llamaindex"


def llamaindex_query(question: dict[str, Any]) -> list[dict[str, Any]]:
    """A LlamaIndex query engine's query as OpenLLMetry's LlamaIndex instrumentation writes it: each span's input the
    method's arguments by name, the retriever's ``retrieve`` around its ``_retrieve``, each returning the nodes with
    their scores as ``to_json()`` text, a node parser returning bare nodes, and the model asked LlamaIndex's QA prompt
    with the documents written in."""
    nodes = json.dumps([json.dumps({"node": {"id_": doc, "text": f"text of {doc}", "class_name": "TextNode"},
                                    "score": score, "class_name": "NodeWithScore"}) for doc, score in DOCS])
    bundle = json.dumps({"query_bundle": {"query_str": QUESTION, "image_path": None, "embedding": None}})
    retriever = {"traceloop.span.kind": "task", "traceloop.entity.output": nodes}
    prompt = f"Context information is below.\n---\ntext of policy-7\n---\nQuery: {QUESTION}\nAnswer: "
    return [{**s, "scope": LLAMAINDEX} for s in (
        span("1", None, "RetrieverQueryEngine.workflow", 0, **{
            "traceloop.span.kind": "workflow", "traceloop.entity.name": "RetrieverQueryEngine.workflow",
            "traceloop.entity.input": json.dumps(question),
            "traceloop.entity.output": json.dumps({"response": ANSWER, "metadata": {}})}),
        span("2", "1", "VectorIndexRetriever.task", 1, **retriever, **{"traceloop.entity.input": bundle}),
        span("3", "2", "VectorIndexRetriever.task", 2, **retriever, **{"traceloop.entity.input": bundle}),
        span("5", "1", "SentenceSplitter.task", 3, **{  # nodes the run split (an index it built): no retrieval
            "traceloop.span.kind": "task", "traceloop.entity.output": json.dumps([json.dumps(
                {"id_": "n-1", "text": "a chunk of a document", "class_name": "TextNode"})])}))] + [
        llm("4", "1", 5, prompt, ANSWER)]


@pytest.mark.parametrize("question", [
    pytest.param({"str_or_query_bundle": QUESTION}, id="the query as text"),
    pytest.param({"str_or_query_bundle": {"query_str": QUESTION, "image_path": None}}, id="a query bundle"),
])
def test_a_llamaindex_query_through_openllmetry_is_asked_its_query_and_answered_from_its_nodes_each_once(question):
    [turn] = assembly(llamaindex_query(question)).turns

    assert (turn["input"], turn["output"]) == ([{"role": "user", "content": QUESTION}], ANSWER)
    assert [(d["text"], d["id"], d["score"]) for d in turn["contexts"]] == [
        (f"text of {doc}", doc, score) for doc, score in DOCS]
    state = {"nodes": ['{"id_": "policy-7", "text": "Damaged items are refunded."}'], "show_progress": False}
    [turn] = assembly(llamaindex_query(state)).turns  # arguments that are no one's words lose to the model's call
    assert turn["input"][-1]["content"].startswith("Context information is below.")


def test_a_llamaindex_call_tool_step_through_openllmetry_is_the_tools_call_with_the_error_its_result_states():
    """LlamaIndex's workflow agent catches a tool's exception and hands the model its text; OpenLLMetry's LlamaIndex
    instrumentation writes the ``call_tool`` step as a task naming the tool, its output the ``ToolCallResult``."""
    result = {"tool_name": "lookup_order", "tool_kwargs": ORDER_ARGS, "tool_id": "call_1", "return_direct": False,
              "tool_output": {"blocks": [{"block_type": "text", "text": "order database unreachable"}],
                              "tool_name": "lookup_order", "raw_input": {"args": [], "kwargs": ORDER_ARGS},
                              "raw_output": "order database unreachable", "is_error": True}}
    step = span("3", "1", "BaseWorkflowAgent.task", 2, **{
        "traceloop.span.kind": "task", "traceloop.entity.name": "BaseWorkflowAgent.task",
        "tool.name": "lookup_order", "tool.arguments": json.dumps(ORDER_ARGS),
        "traceloop.entity.output": json.dumps(result)})
    spans = [{**s, "scope": LLAMAINDEX} for s in (
        span("1", None, "FunctionAgent.workflow", 0, **{"traceloop.span.kind": "workflow"}), step)] + [
        llm("2", "1", 1, ORDER_QUESTION, ""), llm("4", "1", 4, ORDER_QUESTION, "The database is down.")]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c.get("id"), c["result"], c.get("error")) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "call_1", "order database unreachable", "order database unreachable")]


@pytest.mark.parametrize(("printed", "result", "error"), [
    pytest.param("status='success' result='{\"order_id\": \"A-1001\"}' error=None images=None",
                 '{"order_id": "A-1001"}', None, id="returned"),
    pytest.param("status='failure' result=None error='order database unreachable' images=None",
                 None, "order database unreachable", id="raised, caught by the framework"),
])
def test_a_tool_spans_output_that_is_the_frameworks_record_of_the_call_gives_its_result_and_error(printed, result,
                                                                                                   error):
    """OpenLLMetry's Agno instrumentation writes ``str()`` of Agno's ``FunctionExecutionResult`` as a tool span's
    output, and ends the span OK when Agno caught the tool's exception: the outcome, not the result."""
    tool = span("3", "1", "lookup_order.tool", 2, **{
        "traceloop.span.kind": "tool", "traceloop.entity.name": "lookup_order", "gen_ai.tool.name": "lookup_order",
        "traceloop.entity.input": json.dumps(ORDER_ARGS), "traceloop.entity.output": printed})
    spans = [span("1", None, "support_bot.agent", 0, **{"traceloop.span.kind": "agent",
                                                          "traceloop.entity.input": ORDER_QUESTION}),
             llm("2", "1", 1, ORDER_QUESTION, ""), tool, llm("4", "1", 4, ORDER_QUESTION, "It shipped.")]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c.get("result"), c.get("error")) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, result, error)]


def test_a_llamaindex_run_through_openllmetry_is_its_services_whether_it_answered_or_raised():
    """OpenLLMetry's LlamaIndex instrumentation names each span ``<Class>.<span kind>`` (the framework's class) and
    never exports a span whose method raised: a run that raised is only its failed model call, under a parent that
    never comes. Both runs are counted under one agent, the service."""
    answered = [{**s, "scope": LLAMAINDEX} for s in (span("1", None, "FunctionAgent.workflow", 0, **{
        "traceloop.span.kind": "workflow", "traceloop.entity.name": "FunctionAgent.workflow"}),)] + [
        llm("2", "1", 1, ORDER_QUESTION, "It shipped.")]
    raised = {**llm("4", "3", 1, ORDER_QUESTION, ""), "trace_id": "f" * 32,
              "status": {"code": 2, "message": "Error code: 500"}}

    turns = [*assembly([{**s, "resource": {"service.name": "shop"}} for s in answered]).turns,
             *assembly([{**raised, "resource": {"service.name": "shop"}}]).turns]

    assert [(t["metadata"].get("vigil.run"), t["agent"]) for t in turns] == [(None, "shop"), ("failed", "shop")]


def test_agents_under_one_run_that_answer_the_same_words_are_one_run():
    """A hand-off: the triage agent passes the same question to a specialist."""
    spans = [span("1", None, "Agent workflow", 0, **{"openinference.span.kind": "CHAIN"}),
             span("2", "1", "triage", 1, **{"openinference.span.kind": "AGENT"}), llm("3", "2", 2, "Refund?", ""),
             span("4", "1", "refunds", 5, **{"openinference.span.kind": "AGENT"}), llm("5", "4", 6, "Refund?", "Yes.")]

    [turn] = assembly(spans).turns

    assert (turn["span_id"], turn["output"]) == ("1".rjust(16, "0"), "Yes.")


def test_a_trace_with_no_llm_call_is_no_turn_and_says_why():
    """An index build: a framework's chain over an embedding batch."""
    spans = [span("1", None, "SentenceSplitter.__call__", 0, **{"openinference.span.kind": "CHAIN",
                                                                "input.value": "a long document"}),
             span("2", "1", "embed", 1, **{"openinference.span.kind": "EMBEDDING"})]

    result = assembly(spans)

    assert (result.turns, result.steps) == ([], [])
    assert result.no_turn == "no LLM call (its spans: chain)"


def test_a_span_no_convention_claims_is_read_by_what_it_names():
    from vigil.schemas.conventions import explain_kind

    assert explain_kind(span("1", None, "call", 0, **{"llm.model_name": "m"})) == ("llm", "fallback",
                                                                                  "llm.model_name")


@pytest.mark.parametrize(("task", "question"), [
    pytest.param("Where is A-1001?", "Where is A-1001?", id="the task the prompt wraps is the question"),
    pytest.param("Where is {order}?", "\nCurrent Task: Where is A-1001?\n\nExpected: a short answer.",
                 id="a task the prompt does not hold (a template not filled in) loses to the prompt"),
])
def test_the_task_a_run_states_it_was_given_is_the_question_when_the_prompt_wraps_it(task, question):
    """A crew's kickoff states its tasks (``crew_tasks``), not an input; the model is sent the framework's prompt."""
    tasks = json.dumps([{"id": "t1", "description": task, "expected_output": "a short answer."}])
    spans = [span("1", None, "Crew.kickoff", 0, **{"openinference.span.kind": "CHAIN", "crew_tasks": tasks}),
             span("2", "1", "support bot._execute_core", 1, **{"openinference.span.kind": "AGENT",
                                                                "input.value": '{"agent": {"role": "bot"}}'}),
             llm("3", "2", 2, "\nCurrent Task: Where is A-1001?\n\nExpected: a short answer.", "It ships in 2 days.")]

    [turn] = assembly(spans).turns

    assert (turn["input"][-1]["content"], turn["output"]) == (question, "It ships in 2 days.")


@pytest.mark.parametrize(("task", "question"), [
    pytest.param("Where is A-1001?", "Where is A-1001?", id="the task the prompt wraps is the question"),
    pytest.param("Where is {order}?", "\nCurrent Task: Where is A-1001?\n\nExpected: a short answer.",
                 id="a task the prompt does not hold (a template not filled in) loses to the prompt"),
])
def test_the_task_an_openllmetry_crewai_task_span_ran_is_the_question_when_the_prompt_wraps_it(task, question):
    """OpenLLMetry's CrewAI instrumentation: the crew's ``crewai.workflow`` span (an ``invoke_agent`` of no span kind
    of OpenLLMetry's) states no input, its task's span the task it ran (``crewai.task.description``); the model is
    sent CrewAI's prompt around it."""
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "crewai"}
    spans = [span("1", None, "crewai.workflow", 0, **agent, **{"crewai.crew.tasks": json.dumps(
                 [{"description": task, "expected_output": "a short answer."}])}),
             span("2", "1", f"{task}.task", 1, **agent, **{"traceloop.span.kind": "task",
                                                          "crewai.task.description": task}),
             span("3", "2", "support bot.agent", 2, **agent, **{"traceloop.span.kind": "agent",
                                                               "gen_ai.agent.name": "support bot"}),
             genai("4", "3", 3, "chat", **{
                 "gen_ai.request.model": "gpt-4o-mini",
                 "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": (
                     "\nCurrent Task: Where is A-1001?\n\nExpected: a short answer.")}]}]),
                 "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                     {"type": "text", "content": "It ships in 2 days."}]}])})]

    [turn] = assembly(spans).turns

    assert (turn["input"][-1]["content"], turn["output"]) == (question, "It ships in 2 days.")


@pytest.mark.parametrize(("said", "error"), [
    pytest.param({"gen_ai.response.finish_reasons": ["error"]}, "the model call stopped with finish reason 'error'",
                 id="finish reason error"),
    pytest.param({"output": '{"type": "error", "error": {"name": "APICallError", "message": "overloaded"}}'},
                 "APICallError: overloaded", id="an error object as its output"),
])
def test_a_model_call_that_says_it_stopped_in_error_with_no_answer_is_a_failed_run_even_with_status_ok(said, error):
    """No agent span exported (a framework that drops the run's span when its model call fails): the call, status
    OK, says it failed only in what it reports."""
    call = span("2", "1", "chat m", 1, **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                          "gen_ai.input.messages": json.dumps(
                                              [{"role": "user", "parts": [{"type": "text", "content": "Where?"}]}]),
                                          **said})
    call["status"] = {"code": 1}

    [turn] = assembly([call]).turns

    assert (turn["input"][-1]["content"], turn["output"]) == ("Where?", "")
    assert (turn["metadata"]["vigil.run"], turn["metadata"]["vigil.error"]) == ("failed", error)


def test_a_run_whose_answer_a_root_states_but_no_span_the_users_words_is_marked_content_missing_keeping_the_answer():
    """The model calls carry no content (it travelled as log records the intake never got); the agent span states
    only its answer (``gen_ai.input.messages`` empty)."""
    spans = [span("1", None, "invoke_agent bot", 0, **{
                 "gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": "[]",
                 "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "It shipped."}])}),
             span("2", "1", "chat m", 1, **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})]

    [turn] = assembly(spans).turns

    assert (turn["input"], turn["output"]) == ([{"role": "user", "content": ""}], "It shipped.")
    assert turn["metadata"]["vigil.content"] == "missing"
    assert "logs exported to the intake" in turn["metadata"]["vigil.content_setting"]


def tool_span(span_id: str, parent: str, name: str, start: int, **attributes: Any) -> dict[str, Any]:
    return span(span_id, parent, name, start, **{"openinference.span.kind": "TOOL", **attributes})


@pytest.mark.parametrize(("name", "tool"), [
    ("execute_tool lookup_order", "lookup_order"),  # the GenAI conventions' span name
    ("lookup_order.__call__", "lookup_order"), ("lookup_order.run", "lookup_order"),  # a wrapped method's
    ("support_bot.lookup_order", "support_bot.lookup_order"), ("ai.toolCall", "ai.toolCall"),  # no method call
])
def test_a_tool_span_that_names_its_tool_only_in_its_span_name_is_read_by_what_the_name_says(name, tool):
    from vigil.schemas.conventions import tool as tool_of

    assert tool_of(tool_span("1", "0", name, 0, **{"input.value": '{"kwargs": {"order_id": "A-1001"}}'})) == {
        "name": tool, "arguments": ORDER_ARGS}


def test_a_tool_call_takes_what_each_convention_on_its_span_says_the_first_named_left_empty():
    """OpenLLMetry's OpenAI Agents spans: its own kind (``traceloop.span.kind``, no entity input or output) beside the
    GenAI conventions' call attributes, and a span name that is not the tool's."""
    from vigil.schemas.conventions import tool as tool_of

    said = span("1", "0", "lookup_order.tool", 0, **{
        "traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.call.arguments": json.dumps(ORDER_ARGS), "gen_ai.tool.call.result": '{"status": "shipped"}'})

    assert tool_of(said) == {"name": "lookup_order", "arguments": ORDER_ARGS, "result": '{"status": "shipped"}'}


def test_a_tool_span_whose_id_says_it_is_not_specified_takes_the_id_of_the_models_call():
    """Google ADK writes ``gen_ai.tool.call.id = <not specified>`` on a tool call that raised."""
    asked = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order",
                                             "arguments": ORDER_ARGS}]}
    spans = [genai("1", None, 0, "invoke_agent", **{"gen_ai.agent.name": "bot"}),
             genai("2", "1", 1, "chat", **{"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(
                 [{"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}]),
                 "gen_ai.output.messages": json.dumps([asked])}),
             genai("3", "1", 2, "execute_tool", **{"gen_ai.tool.name": "lookup_order",
                                                   "gen_ai.tool.call.id": "<not specified>", "error.type": "ValueError",
                                                   "gen_ai.tool.call.arguments": json.dumps(ORDER_ARGS)}),
             genai("4", "1", 3, "chat", **{"gen_ai.request.model": "m", "gen_ai.output.messages": json.dumps(
                 [{"role": "assistant", "parts": [{"type": "text", "content": "It could not be looked up."}]}])})]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["id"], c["error"]) for c in turn["tool_calls"]] == [("lookup_order", "call_1", "ValueError")]


def test_reacts_finish_tool_ends_the_run_and_is_no_tool_call():
    """A ReAct loop: the model picks ``lookup_order``, then ``finish`` (no argument); the call after writes the
    answer. Tool spans named after the method they wrapped, the result a JSON string."""
    spans = [span("1", None, "ReAct", 0, **{"openinference.span.kind": "CHAIN", "input.value": ORDER_QUESTION}),
             llm("2", "1", 1, ORDER_QUESTION, ""),
             tool_span("3", "1", "lookup_order.__call__", 2, **{
                 "input.value": '{"kwargs": {"order_id": "A-1001"}}', "output.mime_type": "application/json",
                 "output.value": json.dumps('{"status": "shipped"}')}),
             llm("4", "1", 3, ORDER_QUESTION, ""),
             tool_span("5", "1", "finish.__call__", 4, **{"input.value": '{"kwargs": {}}',
                                                         "output.value": '"Completed."'}),
             llm("6", "1", 5, ORDER_QUESTION, "It shipped.")]

    [turn] = assembly(spans).turns

    assert turn["output"] == "It shipped."
    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, '{"status": "shipped"}')]


def test_two_spans_of_one_tool_call_are_one_call_with_what_either_says():
    """An instrumentation's tool span (OK, the error text as its output) around the framework's own span of the same
    call (status ERROR, the exception event, the call id)."""
    inner = span("4", "3", "execute_tool lookup_order", 3, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.call.id": "call_1", "error.type": "ValueError"})
    inner["status"] = {"code": 2, "message": "ValueError: order database unreachable"}
    inner["events"] = [{"name": "exception", "time": 3, "attributes": {
        "exception.type": "ValueError", "exception.message": "order database unreachable"}}]
    spans = [span("1", None, "bot", 0, **{"openinference.span.kind": "AGENT"}),
             llm("2", "1", 1, ORDER_QUESTION, ""),
             tool_span("3", "1", "bot.lookup_order", 2, **{"tool.name": "lookup_order",
                                                          "input.value": json.dumps(ORDER_ARGS),
                                                          "output.value": "order database unreachable"}),
             inner, llm("5", "1", 5, ORDER_QUESTION, "The database is down.")]

    [turn] = assembly(spans).turns

    [call] = turn["tool_calls"]
    assert (call["name"], call["arguments"], call["id"]) == ("lookup_order", ORDER_ARGS, "call_1")
    assert call["error"] == "ValueError: order database unreachable"


def genai(span_id: str, parent: str, start: int, operation: str, **attributes: Any) -> dict[str, Any]:
    return span(span_id, parent, operation, start, **{"gen_ai.operation.name": operation, **attributes})


def parallel_step(*, content: bool) -> list[dict[str, Any]]:
    """An agent's parallel step: the model asks for two calls, each has its span, and a third ``execute_tool`` span
    beside them groups the step and records nothing of a call (Google ADK's ``(merged tools)``)."""
    asked = [{"type": "tool_call", "name": "lookup_order", "id": f"call_{i}", "arguments": {"order_id": f"A-{i}"}}
             for i in (1, 2)]
    step = {"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text",
                                                                             "content": ORDER_QUESTION}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": asked}])} if content else {}
    calls = [genai(str(2 + i), "1", 2 + i, "execute_tool", **{
        "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": f"call_{i}",
        **({"gen_ai.tool.call.arguments": json.dumps({"order_id": f"A-{i}"})} if content else {})}) for i in (1, 2)]
    return [genai("1", None, 0, "invoke_agent", **{"gen_ai.agent.name": "bot"}),
            genai("2", "1", 1, "chat", **{"gen_ai.request.model": "m", **step}), *calls,
            genai("5", "1", 5, "execute_tool", **{"gen_ai.tool.name": "(merged tools)", "gen_ai.tool.call.id": "ev"}),
            genai("6", "1", 6, "chat", **{"gen_ai.request.model": "m", **({"gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Both shipped."}]}])} if content else {})})]


def test_a_tool_span_that_records_nothing_of_a_call_the_model_made_is_bookkeeping_not_a_call():
    [turn] = assembly(parallel_step(content=True)).turns

    assert [(c["name"], c["arguments"]) for c in turn["tool_calls"]] == [
        ("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "A-2"})]


def test_without_the_models_calls_to_compare_every_tool_span_is_a_call():
    """Content capture off: nothing says which calls the model made, so no span is judged bookkeeping."""
    [turn] = assembly(parallel_step(content=False)).turns

    assert [c["name"] for c in turn["tool_calls"]] == ["lookup_order", "lookup_order", "(merged tools)"]


def model_call(span_id: str, parent: str, start: int, *, wire: bool, answer: str = "",
               tool: str = "lookup_order") -> dict[str, Any]:
    """One step of a tool loop as an OpenInference LLM span: the first call asks for ``tool``, the second
    (``answer``) sees its result. ``wire``: as the model client's instrumentation saw the request (the call's id, the
    tool message's text); else as a framework's generator component reports it (neither)."""
    said: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "m",
                            "llm.input_messages.0.message.role": "user",
                            "llm.input_messages.0.message.content": ORDER_QUESTION}
    if not answer:
        said.update({"llm.output_messages.0.message.role": "assistant",
                     "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": tool,
                     "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps(ORDER_ARGS)})
        if wire:
            said["llm.output_messages.0.message.tool_calls.0.tool_call.id"] = "call_1"
        return span(span_id, parent, "chat", start, **said)
    said.update({"llm.input_messages.1.message.role": "assistant", "llm.input_messages.2.message.role": "tool",
                 "llm.output_messages.0.message.role": "assistant",
                 "llm.output_messages.0.message.content": answer})
    if wire:
        said.update({"llm.input_messages.1.message.tool_calls.0.tool_call.id": "call_1",
                     "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": tool,
                     "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": json.dumps(ORDER_ARGS),
                     "llm.input_messages.2.message.tool_call_id": "call_1",
                     "llm.input_messages.2.message.content": '{"status": "shipped"}'})
    return span(span_id, parent, "chat", start, **said)


def test_an_llm_span_around_another_is_one_model_call_read_from_the_inner_one():
    """A framework's generator component (an LLM span) around the model client's request (an LLM span under it):
    each tool call once, with the id and the result only the inner span saw."""
    spans = [span("1", None, "Agent.run", 0, **{"openinference.span.kind": "CHAIN"}),
             model_call("2", "1", 1, wire=False), model_call("3", "2", 2, wire=True),
             model_call("4", "1", 5, wire=False, answer="It shipped."),
             model_call("5", "4", 6, wire=True, answer="It shipped.")]

    [turn] = assembly(spans).turns

    assert (turn["input"][0]["content"], turn["output"]) == (ORDER_QUESTION, "It shipped.")
    assert [(c["name"], c["arguments"], c.get("id"), c.get("result")) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "call_1", '{"status": "shipped"}')]


def genai_call(span_id: str, parent: str, start: int, *, answer: str = "") -> dict[str, Any]:
    """One step of a tool loop as the model client's instrumentation writes it (GenAI messages): the first call asks
    for ``lookup_order``, the second (``answer``) sees its result."""
    sent = [{"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}]
    asked = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order",
                                            "arguments": ORDER_ARGS}], "finish_reason": "tool_calls"}
    if answer:
        sent += [asked, {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1",
                                                    "response": '{"status": "shipped"}'}]}]
    said = {"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}
    return genai(span_id, parent, start, "chat", **{"gen_ai.request.model": "gpt-4o-mini",
                                                     "gen_ai.input.messages": json.dumps(sent),
                                                     "gen_ai.output.messages": json.dumps([said if answer else asked])})


def test_a_wrappers_account_of_the_reply_loses_to_the_inner_call_that_saw_the_wire():
    """OpenLLMetry's Haystack instrumentation: its ``haystack.openai.chat`` span around the generator's run (the model
    client's ``chat`` span under it) writes the key of the generator's result, ``replies``, as the assistant's
    content: the answer is what the model replied, as the inner call states it."""
    def wrapper(span_id: str, start: int) -> dict[str, Any]:
        return span(span_id, "1", "haystack.openai.chat", start, **{
            "gen_ai.system": "OpenAI", "llm.request.type": "chat", "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "replies"})
    spans = [span("1", None, "haystack_pipeline.workflow", 0, **{
                 "traceloop.span.kind": "workflow", "traceloop.entity.name": "haystack_pipeline",
                 "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"agent": {"messages": []}}})}),
             wrapper("2", 1), genai_call("3", "2", 2), wrapper("4", 5), genai_call("5", "4", 6, answer="It shipped.")]
    for at, end in (("1", 20), ("2", 13), ("4", 17)):  # each wrapper ends after the call it wraps
        next(s for s in spans if s["span_id"] == at.rjust(16, "0"))["end"] = end

    [turn] = assembly(spans).turns

    asked = [m["content"] for m in turn["input"] if m["role"] == "user"]
    assert (asked, turn["output"]) == ([ORDER_QUESTION], "It shipped.")
    assert [(c["name"], c["arguments"], c.get("result")) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, '{"status": "shipped"}')]


@pytest.mark.parametrize("failed", [True, False], ids=["the tool raised", "the tool answered"])
def test_a_tool_message_haystack_says_failed_is_the_calls_error(failed):
    """OpenLLMetry's Haystack instrumentation traces no tool; the pipeline's result (its ``workflow`` span's output)
    is the conversation as ``ChatMessage`` dataclass fields, and the ``ToolCallResult`` of a tool that raised says
    ``error: true`` (Haystack sent the model the exception's text): that text is the call's error."""
    said = "Failed to invoke Tool `lookup_order` with parameters {'order_id': 'A-1001'}. Error: unreachable"
    call = {"tool_name": "lookup_order", "arguments": ORDER_ARGS, "id": "call_1", "extra": None}
    returned = {"agent": {"messages": [
        {"_role": "user", "_content": [{"text": ORDER_QUESTION}], "_name": None, "_meta": {}},
        {"_role": "assistant", "_content": [call], "_name": None, "_meta": {}},
        {"_role": "tool", "_content": [{"result": said, "origin": call, "error": failed}], "_name": None, "_meta": {}},
        {"_role": "assistant", "_content": [{"text": "It shipped."}], "_name": None, "_meta": {}}]}}
    answering = genai_call("3", "1", 5, answer="It shipped.")
    sent = json.loads(answering["attributes"]["gen_ai.input.messages"])
    sent[-1]["parts"][0]["response"] = said
    answering["attributes"]["gen_ai.input.messages"] = json.dumps(sent)
    spans = [span("1", None, "haystack_pipeline.workflow", 0, **{
                 "traceloop.span.kind": "workflow", "traceloop.entity.name": "haystack_pipeline",
                 "traceloop.entity.output": json.dumps(returned)}),
             genai_call("2", "1", 1), answering]
    spans[0]["end"] = 20

    [turn] = assembly(spans).turns

    assert turn["output"] == "It shipped."
    assert [(c["name"], c["arguments"], c.get("result"), c.get("error")) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, said, said if failed else None)]


def test_a_step_in_a_span_of_its_own_joins_the_call_that_was_sent_its_tool_results():
    """Plain spans no convention reads (a framework's own tracer: one span per agent step) around the model client's
    calls: the call that asks for the tool and the call that answers sit under different parents, and the answering
    call's conversation carries the first one's tool call id."""
    spans = [span("1", None, "pipeline.run", 0), span("2", "1", "agent.step", 1),
             model_call("3", "2", 2, wire=True), span("4", "1", "agent.step", 5),
             model_call("5", "4", 6, wire=True, answer="It shipped.")]
    for call in spans[2], spans[4]:
        call["attributes"].update({"llm.token_count.prompt": 40, "llm.token_count.completion": 10})

    result = assembly(spans)

    [turn] = result.turns
    assert result.steps == []
    assert (turn["input"][0]["content"], turn["output"], turn["usage"]) == (
        ORDER_QUESTION, "It shipped.", {"prompt_tokens": 80, "completion_tokens": 20})
    assert [(c["name"], c.get("id"), c.get("result")) for c in turn["tool_calls"]] == [
        ("lookup_order", "call_1", '{"status": "shipped"}')]


def streamed_call(span_id: str, start: int, sent: list[dict[str, Any]], said: list[dict[str, Any]] | None,
                  usage: int = 0) -> dict[str, Any]:
    """One half of a streamed chat call as Logfire writes it under the application's span ``1``: the request
    (``said=None``: its span ends when the stream is handed back) or the record of its response, read later."""
    attributes = {"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(sent)}
    if said is not None:
        attributes["gen_ai.output.messages"] = json.dumps(said)
    if usage:
        attributes.update({"gen_ai.usage.input_tokens": usage, "gen_ai.usage.output_tokens": usage // 2})
    return genai(span_id, "1", start, "chat", **attributes)


def test_a_call_whose_response_was_recorded_apart_is_one_call_of_the_run_never_a_step():
    """Each streamed call of a tool loop is two LLM spans beside each other: its request, with no output, and the
    record of its response; the run is one turn, every call's usage once, and nothing is left as a step."""
    text = lambda role, words: {"role": role, "parts": [{"type": "text", "content": words}]}  # noqa: E731
    asked = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order",
                                             "arguments": ORDER_ARGS}]}
    result = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "shipped"}]}
    first, second = [text("user", ORDER_QUESTION)], [text("user", ORDER_QUESTION), asked, result]
    spans = [span("1", None, "support run", 0),
             streamed_call("2", 1, first, None), streamed_call("3", 2, first, [asked], usage=40),
             streamed_call("4", 3, second, None),
             streamed_call("5", 4, second, [text("assistant", "It shipped.")], usage=60)]

    found = assembly(spans)

    [turn] = found.turns
    assert found.steps == []
    assert (turn["input"][0]["content"], turn["output"], turn["usage"]) == (
        ORDER_QUESTION, "It shipped.", {"prompt_tokens": 100, "completion_tokens": 50})
    assert [(c["name"], c["id"], c["result"]) for c in turn["tool_calls"]] == [("lookup_order", "call_1", "shipped")]
    assert turn["metadata"]["spans"] == "4"


def openlit_task(*calls: dict[str, Any], output: str | None = None, error: str | None = None,
                 operation: str = "execute_task") -> list[dict[str, Any]]:
    """A pydantic-ai run as OpenLIT writes it: an ``execute_task`` span (an operation the GenAI conventions do not
    list) with the user's words and the run's output or failure, the model calls beside its other spans under it."""
    said = {"gen_ai.input.messages": json.dumps([{"role": "user", "content": ORDER_QUESTION}])}
    if output is not None:
        said["gen_ai.output.messages"] = output
    task = genai("1", None, 0, operation, **said)
    if error:
        task["status"] = {"code": 2, "message": error}
    return [task, genai("2", "1", 1, "invoke_workflow", **{"gen_ai.agent.name": "bot"}), *calls]


def test_a_task_an_agent_executes_is_its_run_and_a_failed_one_is_a_failed_turn_with_the_users_words():
    failed_call = genai("3", "1", 2, "chat", **{"gen_ai.request.model": "m", "error.type": "InternalServerError"})
    failed_call["status"] = {"code": 2, "message": "InternalServerError: overloaded"}

    [turn] = assembly(openlit_task(failed_call, error="ModelHTTPError: overloaded")).turns

    assert (turn["input"][-1]["content"], turn["output"]) == (ORDER_QUESTION, "")
    assert turn["metadata"]["vigil.run"] == "failed"
    assert turn["metadata"]["vigil.error"].startswith("ModelHTTPError: overloaded")


def test_an_output_that_is_an_objects_printed_fields_is_no_answer_and_the_models_final_answer_is():
    """OpenLIT writes a structured run's output as its pydantic model's ``str()`` (here on an agent span that states
    it: a root's text would be the answer); the model handed the answer in through pydantic-ai's ``final_result``."""
    handed_in = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "final_result",
                                                 "arguments": {"order_id": "A-1001", "status": "shipped"}}]}
    call = genai("3", "1", 2, "chat", **{"gen_ai.request.model": "m", "gen_ai.output.messages": json.dumps([handed_in]),
                                         "gen_ai.input.messages": json.dumps(
                                             [{"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}])})

    [turn] = assembly(openlit_task(call, output="order_id='A-1001' status='shipped'", operation="invoke_agent")).turns

    assert json.loads(turn["output"]) == {"order_id": "A-1001", "status": "shipped"}


def test_a_tool_span_that_says_only_its_calls_id_takes_the_arguments_and_result_the_model_gave_that_id():
    """Google ADK's own tool span (its content travels elsewhere) beside OpenLIT's model calls: the span names the
    tool and the call's id; the model's call of that id has the arguments, the tool message answering it the result."""
    user = {"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}
    asked = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order",
                                             "arguments": json.dumps(ORDER_ARGS)}]}
    answered = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "shipped"}]}
    spans = [genai("1", None, 0, "invoke_agent", **{"gen_ai.agent.name": "bot"}),
             genai("2", "1", 1, "chat", **{"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps([user]),
                                           "gen_ai.output.messages": json.dumps([asked])}),
             genai("3", "1", 2, "execute_tool", **{"gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call_1"}),
             genai("4", "1", 3, "chat", **{"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(
                 [user, asked, answered]), "gen_ai.output.messages": json.dumps(
                 [{"role": "assistant", "parts": [{"type": "text", "content": "It shipped."}]}])})]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["id"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", "call_1", ORDER_ARGS, "shipped")]


def test_a_tool_span_whose_id_no_call_of_the_model_carries_is_paired_by_its_tool_and_keeps_its_id():
    """The Responses API names a function call twice: OpenLIT writes the output item's id (``fc_…``), the Agent
    Framework's tool span the ``call_id`` the tool's result answers; the span states no arguments."""
    user = {"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}
    asked = {"role": "assistant", "parts": [{"type": "tool_call", "id": "fc_81", "name": "lookup_order",
                                             "arguments": ORDER_ARGS}]}
    spans = [genai("1", None, 0, "invoke_agent", **{"gen_ai.agent.name": "bot"}),
             genai("2", "1", 1, "chat", **{"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps([user]),
                                           "gen_ai.output.messages": json.dumps([asked])}),
             genai("3", "1", 2, "execute_tool", **{"gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call_1",
                                                   "gen_ai.tool.call.result": "shipped"}),
             genai("4", "1", 3, "chat", **{"gen_ai.request.model": "m", "gen_ai.output.messages": json.dumps(
                 [{"role": "assistant", "parts": [{"type": "text", "content": "It shipped."}]}])})]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["id"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", "call_1", ORDER_ARGS, "shipped")]


def logfire_call(span_id: str, parent: str, start: int, *events: dict[str, Any]) -> dict[str, Any]:
    """A model call as Logfire's OpenAI Agents instrumentation writes it: the GenAI events it was sent and its
    response in one ``events`` attribute, the response as assistant message events (no ``gen_ai.choice``)."""
    return span(span_id, parent, "Responses API with {gen_ai.request.model!r}", start, **{
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.system": "openai",
        "events": json.dumps([{"event.name": f"gen_ai.{e['role']}.message", **e} for e in events])})


def test_a_calls_events_with_no_choice_end_with_its_response_and_the_run_is_one_turn():
    """Each model call of an Agents SDK run under a ``Turn`` span of its own, the tool's span no convention reads."""
    asked = {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "lookup_order", "arguments": json.dumps(ORDER_ARGS)}}]}
    user = {"role": "user", "content": ORDER_QUESTION}
    spans = [span("1", None, "Agent run: {name!r}", 0), span("2", "1", "Turn {turn}", 1),
             logfire_call("3", "2", 2, user, asked), span("4", "2", "Function: {name}", 3, output="shipped"),
             span("5", "1", "Turn {turn}", 4),
             logfire_call("6", "5", 5, user, asked, {"role": "tool", "id": "call_1", "content": "shipped"},
                          {"role": "assistant", "content": "It shipped."})]

    found = assembly(spans)

    [turn] = found.turns
    assert found.steps == []
    assert (turn["input"][0]["content"], turn["output"]) == (ORDER_QUESTION, "It shipped.")
    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "shipped")]


LOGFIRE_TEMPLATE = "logfire.msg_template"  # on every span Logfire writes


def logfire_sdk(span_id: str, parent: str | None, template: str, start: int, **record: Any) -> dict[str, Any]:
    """A span of Logfire's OpenAI Agents instrumentation: the SDK's own record of its trace or span as attributes
    (objects and ``None`` as JSON text), its message template beside them and as its name."""
    return {**span(span_id, parent, template, start),
            "attributes": {LOGFIRE_TEMPLATE: template, "gen_ai.system": "openai", **record}}


def logfire_agent(span_id: str, parent: str | None, start: int) -> dict[str, Any]:
    return logfire_sdk(span_id, parent, "Agent run: {name!r}", start, name="support-bot", handoffs="[]",
                       tools='["lookup_order"]', output_type="str")


def test_an_agents_sdk_trace_with_a_group_id_is_a_conversation_its_runs_turns_of_that_session_and_agent():
    """``trace(group_id=…)`` around two ``Runner.run``: Logfire writes the trace as a span stating the SDK's trace id
    and its group id, each run as a span of the SDK's agent record (``name``, ``handoffs``, ``output_type``)."""
    asked = {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "lookup_order", "arguments": json.dumps(ORDER_ARGS)}}]}
    follow_up = "Can I change the address?"
    spans = [logfire_sdk("1", None, "OpenAI Agents trace: {name}", 0, name="support", agent_trace_id="trace_9",
                         group_id="conv-7", metadata="null"),
             logfire_agent("2", "1", 1),
             logfire_call("3", "2", 2, {"role": "user", "content": ORDER_QUESTION}, asked),
             logfire_call("4", "2", 3, {"role": "user", "content": ORDER_QUESTION}, asked,
                          {"role": "tool", "id": "call_1", "content": "shipped"},
                          {"role": "assistant", "content": "It shipped."}),
             logfire_agent("5", "1", 20),
             logfire_call("6", "5", 21, {"role": "user", "content": ORDER_QUESTION},
                          {"role": "assistant", "content": "It shipped."}, {"role": "user", "content": follow_up},
                          {"role": "assistant", "content": "Yes, until it ships."})]

    found = assembly(spans)

    assert [(t["output"], t["session_id"], t["agent"]) for t in found.turns] == [
        ("It shipped.", "conv-7", "support-bot"), ("Yes, until it ships.", "conv-7", "support-bot")]
    without_group = [{**s, "attributes": {**s["attributes"], "group_id": "null"}} for s in spans]
    assert {t.get("session_id") for t in assembly(without_group).turns} == {TRACE}  # one trace, no group: its id


def test_an_agents_sdk_model_calls_usage_record_is_the_runs_usage_when_its_content_is_left_out():
    """Without sensitive data the SDK's response record keeps its ``usage`` (Logfire writes no GenAI usage then)."""
    turns, _ = turns_of("openai_agents_logfire_no_content.json")

    assert [(t.usage.prompt_tokens, t.usage.completion_tokens) for t in turns] == [(84, 34), (84, 34)]


def test_an_agents_sdk_chat_completion_and_function_record_are_the_call_and_the_tool_call_with_the_sdks_error():
    """On chat completions Logfire writes a model call as the SDK's generation record (``input``, ``output``,
    ``model_config``: chat messages), a tool's call as its function record (``name``, ``input``, ``output``,
    ``mcp_data``), a failed one's status with no message and the SDK's ``error`` beside it."""
    sent = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": ORDER_QUESTION}]
    asked = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "lookup_order", "arguments": json.dumps(ORDER_ARGS)}}]}
    told = {"role": "tool", "tool_call_id": "call_1", "content": "An error occurred while running the tool."}
    answer = {"role": "assistant", "content": "The order service is down."}

    def generation(span_id: str, start: int, inputs: list[dict[str, Any]], output: dict[str, Any]) -> dict[str, Any]:
        return logfire_sdk(span_id, "2", "Chat completion with {gen_ai.request.model!r}", start, **{
            "input": json.dumps(inputs), "output": json.dumps([output]), "model_config": "{}",
            "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 42, "gen_ai.usage.output_tokens": 17})

    function = logfire_sdk("4", "2", "Function: {name}", 3, name="lookup_order", input=json.dumps(ORDER_ARGS),
                           output=told["content"], mcp_data="null", error=json.dumps(
                               {"message": "Error running tool (non-fatal)", "data": {"tool_name": "lookup_order"}}))
    spans = [logfire_sdk("1", None, "OpenAI Agents trace: {name}", 0, name="Agent workflow",
                         agent_trace_id="trace_9", group_id="null"),
             logfire_agent("2", "1", 1), generation("3", 2, sent, asked), {**function, "status": {"code": 2}},
             generation("5", 4, [*sent, asked, told], answer)]

    [turn] = assembly(spans).turns

    assert (turn["input"][1]["content"], turn["output"], turn["usage"]) == (
        ORDER_QUESTION, answer["content"], {"prompt_tokens": 84, "completion_tokens": 34})
    [call] = turn["tool_calls"]
    assert (call["name"], call["arguments"], call["id"]) == ("lookup_order", ORDER_ARGS, "call_1")
    assert call["error"].startswith("Error running tool (non-fatal)")


def test_haystacks_tool_span_that_says_it_failed_is_a_call_with_the_error_its_output_names():
    """Haystack's own tracer (``haystack.*`` tags only) around the model client's calls: the agent's run, one span
    per step, and a tool span flagged ``haystack.tool.error`` with ``{"error": ...}`` as its output, its status OK
    (Haystack catches the exception and sends the model its text as the tool message)."""
    said = "Failed to invoke Tool `lookup_order` with parameters {'order_id': 'A-1001'}. Error: database down"
    spans = [span("1", None, "haystack.pipeline.run", 0),
             span("2", "1", "haystack.agent.run", 1, **{"haystack.agent.max_steps": 100}),
             span("3", "2", "haystack.agent.step", 2, **{"haystack.agent.step": 0}),
             span("4", "3", "haystack.agent.step.llm", 2), model_call("5", "4", 2, wire=True),
             span("6", "3", "haystack.agent.step.tool", 3, **{
                 "haystack.tool.name": "lookup_order", "haystack.agent.step.tool.input": json.dumps(ORDER_ARGS),
                 "haystack.tool.error": True, "haystack.agent.step.tool.output": json.dumps({"error": said})}),
             span("7", "2", "haystack.agent.step", 5, **{"haystack.agent.step": 1}),
             span("8", "7", "haystack.agent.step.llm", 5), model_call("9", "8", 6, wire=True, answer="Sorry.")]

    [turn] = assembly(spans).turns

    assert (turn["span_id"], turn["input"][0]["content"], turn["output"]) == ("2".rjust(16, "0"), ORDER_QUESTION,
                                                                            "Sorry.")
    [call] = turn["tool_calls"]
    assert (call["name"], call["arguments"], call["id"], call.get("result"), call["error"]) == (
        "lookup_order", ORDER_ARGS, "call_1", None, said)


def haystack_message(role: str, *parts: dict[str, Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A Haystack ``ChatMessage`` as its tracer serializes it (``to_dict``)."""
    return {"role": role, "meta": {"usage": usage} if usage else {}, "name": None, "content": list(parts)}


def test_haystacks_tracer_alone_says_each_model_call_of_a_run_in_its_chat_messages():
    """No model client instrumented: each agent step's generator span holds the messages it was sent and its replies
    (Haystack's serialized ``ChatMessage``: text, ``tool_call`` and ``tool_call_result`` parts, usage in ``meta``)."""
    asked = {"tool_call": {"tool_name": "lookup_order", "arguments": ORDER_ARGS, "id": "call_1", "extra": None}}
    answered = {"tool_call_result": {"result": '{"status": "shipped"}', "origin": asked["tool_call"], "error": False}}
    sent = [haystack_message("system", {"text": "Be kind."}), haystack_message("user", {"text": ORDER_QUESTION})]
    tokens = {"prompt_tokens": 40, "completion_tokens": 10}
    first = {"messages": sent, "tools": []}, {"replies": [haystack_message("assistant", asked, usage=tokens)]}
    second = ({"messages": [*sent, haystack_message("assistant", asked), haystack_message("tool", answered)]},
              {"replies": [haystack_message("assistant", {"text": "It shipped."}, usage=tokens)]})
    spans = [span("1", None, "haystack.agent.run", 0, **{"haystack.agent.max_steps": 100})]
    for i, (given, replied) in enumerate((first, second)):
        spans += [span(f"{2 + 2 * i}", "1", "haystack.agent.step", 1 + 4 * i),
                  span(f"{3 + 2 * i}", f"{2 + 2 * i}", "haystack.agent.step.llm", 2 + 4 * i, **{
                      "haystack.agent.step.llm.input": json.dumps(given),
                      "haystack.agent.step.llm.output": json.dumps(replied)})]

    [turn] = assembly(spans).turns

    assert (turn["input"][1]["content"], turn["output"], turn["system"]) == (ORDER_QUESTION, "It shipped.", "Be kind.")
    assert turn["usage"] == {"prompt_tokens": 80, "completion_tokens": 20}
    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "call_1", '{"status": "shipped"}')]


def test_haystacks_tracer_alone_names_the_model_its_replies_came_from():
    """Haystack's own tracer, no model client instrumented: the model is in each reply's ``meta``."""
    turns, _ = turns_of("frameworks/haystack_tracer/alone.json")

    assert len(turns) == 2 and {t.model for t in turns} == {"gpt-4o-mini-2024-07-18"}


def test_a_model_call_that_failed_answered_nothing_even_when_it_reports_its_error_as_output():
    """An agent (status ERROR, its error as its output) whose model call failed and reports the error's text as its
    output message (as openinference-instrumentation-beeai writes a failed chat model's span)."""
    failure = "ChatModelError: the model server is overloaded"
    root = span("1", None, "bot", 0, **{"openinference.span.kind": "AGENT", "input.value": ORDER_QUESTION,
                                        "output.value": failure})
    call = llm("2", "1", 1, ORDER_QUESTION, failure)
    for failed in (root, call):
        failed["status"] = {"code": 2, "message": ""}
        failed["events"] = [{"name": "exception", "time": 5, "attributes": {
            "exception.type": "ChatModelError", "exception.message": "the model server is overloaded"}}]

    [turn] = assembly([root, call]).turns

    assert (turn["input"][-1]["content"], turn["output"]) == (ORDER_QUESTION, "")
    assert (turn["metadata"]["vigil.run"], turn["metadata"]["vigil.error"]) == ("failed", failure)


def test_a_langchain_callbacks_packaging_on_an_openllmetry_tool_span_is_not_the_call():
    """opentelemetry-instrumentation-langchain writes ``on_tool_start`` / ``on_tool_end`` as they were called: the
    arguments are its ``inputs``, the id its ``kwargs.tool_call_id``, the result the ``ToolMessage`` it returned."""
    message = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
               "kwargs": {"content": '{"status": "shipped"}', "type": "tool", "name": "lookup_order",
                          "tool_call_id": "call_1", "status": "success"}}
    tool = span("3", "1", "lookup_order.tool", 2, **{
        "traceloop.span.kind": "tool", "traceloop.entity.name": "lookup_order",
        "traceloop.entity.input": json.dumps({"input_str": str(ORDER_ARGS), "tags": ["seq:step:1"], "metadata": {},
                                              "inputs": ORDER_ARGS, "kwargs": {"tool_call_id": "call_1"}}),
        "traceloop.entity.output": json.dumps({"output": message, "kwargs": {"tags": ["seq:step:1"]}})})
    spans = [span("1", None, "bot.workflow", 0, **{"traceloop.span.kind": "workflow"}),
             llm("2", "1", 1, ORDER_QUESTION, ""), tool, llm("4", "1", 4, ORDER_QUESTION, "It shipped.")]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c.get("id"), c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "call_1", '{"status": "shipped"}')]


def langchainjs_tool_span(span_id: str, parent: str, start: int) -> dict[str, Any]:
    """A LangGraph.js tool call as @arizeai/openinference-instrumentation-langchain writes it: LangChain's tracer
    keeps the call's arguments as the run's inputs, and the instrumentation writes inputs of one text value as that
    text (``A-1001``); the output is the callback's ``{"output": <the ToolMessage it made, serialized>}``."""
    message = {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "ToolMessage"],
               "kwargs": {"status": "success", "content": '{"status": "shipped"}', "tool_call_id": "call_1",
                          "name": "lookup_order", "additional_kwargs": {}, "response_metadata": {}}}
    return tool_span(span_id, parent, "lookup_order", start, **{
        "tool.name": "lookup_order", "input.value": "A-1001", "input.mime_type": "text/plain",
        "output.value": json.dumps({"output": message}), "output.mime_type": "application/json"})


def test_a_tool_result_in_a_callbacks_envelope_around_the_tool_message_is_the_messages_content():
    from vigil.schemas.conventions import tool as tool_of

    assert tool_of(langchainjs_tool_span("3", "1", 2))["result"] == '{"status": "shipped"}'


def test_a_tool_span_that_holds_no_arguments_object_takes_the_ones_the_model_asked_for_with_or_without_ids():
    """LLM spans whose tool calls carry no id (the LangChain.js instrumentation writes none) and a tool span whose
    input is one argument's bare value: the call is paired with the model's call of that tool, by name."""
    spans = [span("1", None, "support-bot", 0, **{"openinference.span.kind": "CHAIN"}),
             model_call("2", "1", 1, wire=False), langchainjs_tool_span("3", "1", 2),
             model_call("4", "1", 5, wire=False, answer="It shipped.")]

    [turn] = assembly(spans).turns

    assert [(c["name"], c["arguments"], c.get("result")) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, '{"status": "shipped"}')]


def openllmetry_js(span_id: str, parent: str | None, name: str, start: int, kind: str, operation: str | None,
                   **attributes: Any) -> dict[str, Any]:
    """A span as OpenLLMetry JS writes it: its LangChain handler marks every runnable ``workflow`` (operation
    ``workflow``) and a tool's call a ``task`` of ``execute_tool``; ``withWorkflow`` marks the application's run."""
    operation_ = {"gen_ai.operation.name": operation, "gen_ai.provider.name": "langchain"} if operation else {}
    return span(span_id, parent, name, start, **{"traceloop.span.kind": kind, **operation_, **attributes})


def openllmetry_chat(span_id: str, parent: str, start: int, *, answer: str = "") -> dict[str, Any]:
    """The model client's call (GenAI attributes): the first asks for ``lookup_order``; ``answer``: the second,
    sent the tool's error as the tool message."""
    sent = [{"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}]
    asked = {"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": ORDER_ARGS}
    if answer:
        sent += [{"role": "assistant", "parts": [asked]}, {"role": "tool", "parts": [
            {"type": "tool_call_response", "id": "call_1", "response": "Error: database down"}]}]
    said = [{"role": "assistant", "parts": [{"type": "text", "content": answer} if answer else asked]}]
    return genai(span_id, parent, start, "chat", **{"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(
        sent), "gen_ai.output.messages": json.dumps(said)})


@pytest.mark.parametrize(("said", "error"), [
    pytest.param("database down\n\nError: database down\n    at lookupOrder (file:///app/tools.mjs:35:11)\n"
                 "    at async DynamicStructuredTool.call (file:///app/node_modules/x.cjs:315:28)", "database down",
                 id="LangChain.js: the message, a blank line, the stack"),
    pytest.param("TypeError: x is undefined\n    at f (file:///app/a.js:1:2)", "TypeError: x is undefined",
                 id="a stack alone: its header is the text"),
    pytest.param("Failed to invoke Tool at the gate\nretry later", "Failed to invoke Tool at the gate\nretry later",
                 id="no frame: kept as it is"),
])
def test_a_failed_spans_error_is_its_text_not_the_javascript_stack_after_it(said, error):
    from vigil.schemas.conventions import error as error_of

    failed = tool_span("3", "1", "lookup_order", 2, **{"tool.name": "lookup_order"})
    failed["status"] = {"code": 2, "message": said}
    failed["events"] = [{"name": "exception", "time": 3, "attributes": {"exception.message": said}}]

    assert error_of(failed) == error


def test_openllmetry_jss_tool_span_is_a_call_named_by_the_tool_message_it_returned():
    from vigil.schemas.conventions import tool as tool_of

    returned = {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "ToolMessage"],
                "kwargs": {"status": "success", "content": '{"status": "shipped"}', "tool_call_id": "call_1",
                           "name": "lookup_order"}}
    call = tool_of(openllmetry_js("3", "1", "execute_tool DynamicStructuredTool", 2, "task", "execute_tool", **{
        "traceloop.entity.name": "DynamicStructuredTool",
        "traceloop.entity.input": json.dumps({"args": [json.dumps(ORDER_ARGS)]}),
        "traceloop.entity.output": json.dumps(returned)}))

    assert call == {"name": "lookup_order", "arguments": ORDER_ARGS, "id": "call_1", "result": '{"status": "shipped"}'}


@pytest.mark.parametrize("asked_twice", [False, True], ids=["one call with its arguments", "two: nothing says"])
def test_a_failed_tool_span_named_by_its_class_is_the_call_the_model_asked_for_with_its_arguments(asked_twice):
    """OpenLLMetry JS inside ``withWorkflow``: the runnables' spans (operation ``workflow``) are chains of the run,
    and a tool that raised leaves a span named by its class with its arguments and the error, no tool message."""
    failed = openllmetry_js("4", "1", "execute_tool DynamicStructuredTool", 3, "task", "execute_tool", **{
        "traceloop.entity.name": "DynamicStructuredTool",
        "traceloop.entity.input": json.dumps({"args": [json.dumps(ORDER_ARGS)]})})
    failed["status"] = {"code": 2, "message": "database down"}
    first = openllmetry_chat("3", "1", 2)
    if asked_twice:  # a parallel step asking two tools with the same arguments
        said = json.loads(first["attributes"]["gen_ai.output.messages"])
        said[0]["parts"].append({"type": "tool_call", "id": "call_2", "name": "get_shipping", "arguments": ORDER_ARGS})
        first["attributes"]["gen_ai.output.messages"] = json.dumps(said)
    spans = [openllmetry_js("1", None, "support-bot.workflow", 0, "workflow", None,
                            **{"traceloop.entity.name": "support-bot"}),
             openllmetry_js("2", "1", "workflow CompiledStateGraph", 1, "workflow", "workflow", **{
                 "traceloop.entity.input": json.dumps({"messages": [{"role": "user", "content": ORDER_QUESTION}]})}),
             first, failed, openllmetry_chat("5", "1", 5, answer="The database is down.")]

    [turn] = assembly(spans).turns

    [call] = turn["tool_calls"]
    assert (call["name"], call["arguments"], call["error"]) == (
        "DynamicStructuredTool" if asked_twice else "lookup_order", ORDER_ARGS, "database down")


def test_a_tool_span_named_by_a_tool_the_models_messages_lost_keeps_its_name():
    """The model's messages name one of a parallel step's two calls (same arguments); each span names its tool."""
    spans = [genai("1", None, 0, "invoke_agent", **{"gen_ai.agent.name": "bot"}), openllmetry_chat("2", "1", 1)]
    spans[1]["attributes"]["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "call_2", "name": "get_shipping", "arguments": ORDER_ARGS}]}])
    spans += [genai(str(3 + i), "1", 2 + i, "execute_tool", **{"gen_ai.tool.name": name,
                                                              "gen_ai.tool.call.arguments": json.dumps(ORDER_ARGS)})
              for i, name in enumerate(("lookup_order", "get_shipping"))]
    spans.append(openllmetry_chat("5", "1", 5, answer="Both shipped."))

    [turn] = assembly(spans).turns

    assert sorted(c["name"] for c in turn["tool_calls"]) == ["get_shipping", "lookup_order"]


@pytest.mark.parametrize(("scopes", "usage"), [
    pytest.param(("langchain", "openai"), (84, 34), id="two instrumentations: one call each step"),
    pytest.param(("openai", "openai"), (168, 68), id="one instrumentation: concurrent calls of their own"),
])
def test_an_llm_span_beside_another_at_once_sent_the_same_conversation_by_another_instrumentation_is_one_call(
        scopes, usage):
    """OpenLLMetry JS inside ``withWorkflow``: its LangChain handler's chat span (never made current, no tool calls
    in its messages) and the openai instrumentation's, siblings, each step; the wrapper starts first."""
    spans = [openllmetry_js("1", None, "support-bot.workflow", 0, "workflow", None,
                            **{"traceloop.entity.name": "support-bot"})]
    for step, (start, answer) in enumerate(((10, ""), (50, "It shipped."))):
        outer, inner = openllmetry_chat(f"{2 + 2 * step}", "1", start, answer=answer), openllmetry_chat(
            f"{3 + 2 * step}", "1", start + 2, answer=answer)
        outer["end"] = inner["end"] + 1
        if not answer:  # the wrapper's messages hold no tool call
            outer["attributes"]["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": ""}]}])
        for span_, scope in zip((outer, inner), scopes, strict=True):
            span_["scope"] = scope
            span_["attributes"].update({"gen_ai.usage.input_tokens": 42, "gen_ai.usage.output_tokens": 17})
        spans += [outer, inner]

    [turn] = assembly(spans).turns

    assert (turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"]) == usage
    assert [(c["name"], c.get("id")) for c in turn["tool_calls"]] == [("lookup_order", "call_1")]


def test_openllmetry_jss_runnables_of_a_run_whose_workflow_span_never_came_are_one_failed_run():
    """``withWorkflow`` ends its span only when the run resolves: a run that raised exports none, and its
    runnables' spans (each ``workflow`` to OpenLLMetry JS) wait for it beside the failed model call."""
    spans = [openllmetry_js(str(i), "9", f"workflow {name}", i, "workflow", "workflow", **{
        "traceloop.entity.input": json.dumps({"messages": [{"role": "user", "content": ORDER_QUESTION}]})})
        for i, name in ((1, "CompiledStateGraph"), (2, "RunnableSequence"), (3, "RunnableLambda"))]
    call = genai("4", "9", 4, "chat", **{"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}])})
    for failed in (spans[0], spans[1], call):
        failed["status"] = {"code": 2, "message": "500 The model server is overloaded"}

    [turn] = assembly([*spans, call]).turns

    assert (turn["input"][-1]["content"], turn["metadata"]["vigil.run"]) == (ORDER_QUESTION, "failed")


@pytest.mark.parametrize(("fixture", "usage"), [
    # Haystack's step span around OpenLLMetry's client call, with no tag of its own (content tracing off): two calls
    pytest.param("haystack_tracer_openllmetry_no_content.json", (84, 34), id="Haystack's tracer around OpenLLMetry"),
    # OpenInference's LlamaIndex LLM span, without token counts, around the model client's call: one call
    pytest.param("frameworks/llamaindex/rag.json", (42, 17), id="LlamaIndex query engine"),
])
def test_a_model_call_seen_by_two_layers_counts_the_tokens_the_layer_nearest_the_wire_states(fixture, usage):
    """The fake model answers 42 prompt and 17 completion tokens a call; the wrapper around each call states none."""
    turns, _ = turns_of(fixture)

    assert turns and all(t.usage is not None and (t.usage.prompt_tokens, t.usage.completion_tokens) == usage
                         for t in turns)


@pytest.mark.parametrize(("calls_state_tokens", "usage"), [
    pytest.param(True, (84, 34), id="the calls state their tokens: the records restate them"),
    pytest.param(False, (84, 34), id="the calls state none: the records are all there is"),
])
def test_a_usage_record_beside_the_calls_no_convention_claims_restates_a_call_and_is_not_one(calls_state_tokens, usage):
    """AG2's TelemetryMiddleware: beside each ``chat`` span, a ``record_usage model_call`` span with the response's
    model and the call's tokens, nothing sent, no operation (read as a call only by the fallback, for its model)."""
    tokens = {"gen_ai.usage.input_tokens": 42, "gen_ai.usage.output_tokens": 17}
    answered = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "It shipped."}]}])
    spans = [genai("1", None, 0, "invoke_agent", **{"gen_ai.agent.name": "bot"})]
    for step, start in enumerate((1, 5)):
        spans += [genai(f"{2 + 2 * step}", "1", start, "chat", **{
            "gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": ORDER_QUESTION}]}]),
            **({"gen_ai.output.messages": answered} if step else {}), **(tokens if calls_state_tokens else {})}),
            span(f"{3 + 2 * step}", "1", "record_usage model_call", start + 1, **{
                "ag2.span.type": "usage", "gen_ai.response.model": "m-2024", **tokens})]

    [turn] = assembly(spans).turns

    assert (turn["output"], turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"]) == (
        "It shipped.", *usage)


# Firebase Genkit's own tracing: spans with ``genkit:*`` attributes only (``schemas/conventions/genkit.py``), written
# here as its ``runInNewSpan`` writes them: the action type in ``genkit:metadata:subtype``, input and output as JSON.
def genkit_action(span_id: str, parent: str | None, subtype: str, name: str, start: int, given: Any = None,
                  answered: Any = None, **more: Any) -> dict[str, Any]:
    attributes = {"genkit:type": "action", "genkit:metadata:subtype": subtype, "genkit:name": name, **more}
    if given is not None:
        attributes["genkit:input"] = json.dumps(given)
    if answered is not None:
        attributes["genkit:output"] = json.dumps(answered)
    return span(span_id, parent, name, start, **attributes)


def genkit_model(span_id: str, parent: str, start: int, messages: list[dict[str, Any]],
                 said: list[dict[str, Any]]) -> dict[str, Any]:
    """A model action: its ``GenerateRequest`` in, its ``GenerateResponse`` out (Genkit's parts and roles)."""
    system = {"role": "system", "content": [{"text": "Be kind."}]}
    return genkit_action(span_id, parent, "model", "acme/m-1", start, {"messages": [system, *messages]},
                         {"message": {"role": "model", "content": said}, "finishReason": "stop",
                          "usage": {"inputTokens": 40, "outputTokens": 10}})


ASKED = {"toolRequest": {"name": "lookup_order", "ref": "r-1", "input": ORDER_ARGS}}
RESULT = {"toolResponse": {"name": "lookup_order", "ref": "r-1", "output": "shipped"}}
USER = {"role": "user", "content": [{"text": ORDER_QUESTION}]}


def genkit_flow(given: Any, *, answer: str = "It shipped.") -> list[dict[str, Any]]:
    """``ai.defineFlow`` around ``ai.generate({tools})``: the flow, ``generate``'s own ``util`` span (no action type),
    the model asked for the tool, the tool, the model answering."""
    return [genkit_action("1", None, "flow", "supportBot", 0, given, answer),
            span("2", "1", "generate", 1, **{"genkit:type": "util", "genkit:name": "generate"}),
            genkit_model("3", "2", 2, [USER], [ASKED]),
            genkit_action("4", "2", "tool", "lookup_order", 4, ORDER_ARGS, "shipped"),
            genkit_model("5", "2", 6, [USER, {"role": "model", "content": [ASKED]}, {"role": "tool", "content": [RESULT]}],
                         [{"text": answer}])]


@pytest.mark.parametrize("given", [
    pytest.param(ORDER_QUESTION, id="a flow asked the user's words"),
    pytest.param({"orderId": "A-1001", "locale": "en"}, id="a flow asked an object that is no one's words"),
])
def test_genkits_own_spans_are_read_by_what_its_attributes_mean(given):
    [turn] = assembly(genkit_flow(given)).turns

    assert (Turn.model_validate(turn).question, turn["output"], turn["system"]) == (ORDER_QUESTION, "It shipped.",
                                                                                   "Be kind.")
    assert (turn["agent"], turn["model"], turn["usage"]) == ("supportBot", "acme/m-1",
                                                             {"prompt_tokens": 80, "completion_tokens": 20})
    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "r-1", "shipped")]


def test_the_intake_keeps_genkits_actions_and_not_its_every_step():
    from vigil.schemas.spans import is_genai

    assert is_genai({"genkit:type": "action", "genkit:metadata:subtype": "model", "genkit:name": "acme/m-1"})
    assert is_genai({"genkit:type": "helper", "genkit:sessionId": "s-1"})  # the chat API's turn names its session
    assert not is_genai({"genkit:type": "util", "genkit:name": "generate", "genkit:input": "{}"})


def test_a_genkit_agent_turn_that_resolved_failed_is_a_failed_run_with_its_error():
    """The Agents API resolves an in-band failure: the agent's span ends OK, its output ``finishReason: failed``."""
    failed = {"sessionId": "s-1", "finishReason": "failed", "error": {"status": "INTERNAL", "message": "no quota"}}
    spans = [genkit_action("1", None, "agent", "supportAgent", 0, answered=failed,
                           **{"genkit:metadata:agent:sessionId": "s-1"}),
             genkit_model("2", "1", 1, [USER], [ASKED])]

    [turn] = assembly(spans).turns

    assert (turn["metadata"]["vigil.run"], turn["metadata"]["vigil.error"], turn["session_id"]) == (
        "failed", "no quota", "s-1")


@pytest.mark.parametrize("who", [
    pytest.param(genkit_action("1", None, "agent", "supportAgent", 0, answered={
        "message": {"role": "model", "content": [{"text": "It shipped."}]}, "finishReason": "stop"},
        **{"genkit:metadata:agent:sessionId": "s-1"}), id="an agent's conversation"),
    pytest.param(span("1", None, "send", 0, **{"genkit:type": "helper", "genkit:sessionId": "s-1",
                                                "genkit:threadName": "main"}), id="the chat API's send"),
])
def test_a_genkit_turn_keeps_the_session_its_conversation_names(who):
    spans = [who, genkit_model("2", "1", 1, [USER], [{"text": "It shipped."}])]

    [turn] = assembly(spans).turns

    assert (turn["session_id"], turn["output"]) == ("s-1", "It shipped.")


def test_a_genkit_tool_message_of_several_results_is_one_tool_message_each():
    from vigil.schemas.conventions import io

    other = {"toolResponse": {"name": "get_shipping", "ref": "r-2", "output": {"carrier": "DHL"}}}
    call = genkit_model("1", "0", 0, [USER, {"role": "tool", "content": [RESULT, other]}], [{"text": "ok"}])

    inputs = io(call)[0]

    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in inputs[-2:]] == [
        ("tool", "r-1", "shipped"), ("tool", "r-2", '{"carrier": "DHL"}')]


def test_a_genkit_trace_with_no_model_call_is_no_turn_and_says_why():
    """A flow that indexes documents: an embedder action under it, no model."""
    spans = [genkit_action("1", None, "flow", "indexMenu", 0, "menu.pdf", None),
             genkit_action("2", "1", "embedder", "acme/embed-1", 1, {"input": []})]

    result = assembly(spans)

    assert (result.turns, result.no_turn) == ([], "no LLM call (its spans: chain)")


def test_a_genkit_retrievers_documents_are_the_contexts_and_the_prompt_they_were_written_into_is_not_the_question():
    """A flow asked an object that is no one's words retrieves documents (a retriever action) and hands them to
    ``ai.generate({prompt, docs})``: ``augmentWithContext`` adds them to the last user message as a part of
    ``purpose: context``."""
    found = {"documents": [{"content": [{"text": "Refunds within 30 days."}], "metadata": {"id": "policy-7", "score": 0.9}},
                           {"content": [{"text": "Keep the receipt."}]}]}
    written = {"text": "\n\nUse the following information to complete your task:\n\n- [policy-7]: Refunds ...",
               "metadata": {"purpose": "context"}}
    spans = [genkit_action("0", None, "flow", "supportBot", 0, {"customer": "c-1"}, "Yes, within 30 days."),
             genkit_action("1", "0", "retriever", "policies", 0, {"query": {"content": [{"text": "Refund?"}]}}, found),
             span("2", "0", "generate", 1, **{"genkit:type": "util", "genkit:name": "generate"}),
             genkit_model("3", "2", 2, [{"role": "user", "content": [{"text": "Refund?"}, written]}],
                          [{"text": "Yes, within 30 days."}])]

    [turn] = assembly(spans).turns

    assert (Turn.model_validate(turn).question, turn["output"]) == ("Refund?", "Yes, within 30 days.")
    assert [(d["text"], d.get("id"), d.get("score")) for d in turn["contexts"]] == [
        ("Refunds within 30 days.", "policy-7", 0.9), ("Keep the receipt.", None, None)]


@pytest.mark.parametrize(("envelope", "result"), [
    pytest.param({"output": "shipped"}, "shipped", id="its output"),
    pytest.param({"content": [{"text": "shipped"}, {"media": {"url": "data:,"}}]}, "shipped", id="only content parts"),
])
def test_a_genkit_multipart_tools_result_is_what_its_envelope_holds(envelope, result):
    """A ``tool.v2`` action (a multipart tool; every tool of Genkit for Python) returns ``{output, content}``."""
    from vigil.schemas.conventions import tool

    call = tool(genkit_action("1", "0", "tool.v2", "lookup_order", 0, ORDER_ARGS, envelope))

    assert (call["name"], call["arguments"], call["result"]) == ("lookup_order", ORDER_ARGS, result)


# The Langfuse SDK's observations (``schemas/conventions/langfuse.py``), written here as its ``attributes.py`` writes
# them: ``langfuse.observation.type``, input and output as JSON text, usage and model on generations.
def langfuse_span(span_id: str, parent: str | None, observation: str, name: str, start: int, given: Any = None,
                  answered: Any = None, **more: Any) -> dict[str, Any]:
    attributes = {"langfuse.observation.type": observation, **more}
    if given is not None:
        attributes["langfuse.observation.input"] = given if isinstance(given, str) else json.dumps(given)
    if answered is not None:
        attributes["langfuse.observation.output"] = answered if isinstance(answered, str) else json.dumps(answered)
    return span(span_id, parent, name, start, **attributes)


TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]
CALLED = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": json.dumps(ORDER_ARGS)}}]}
OPENAI_TURN = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": ORDER_QUESTION}]


def langfuse_generation(span_id: str, parent: str, start: int, messages: list[dict[str, Any]], said: dict[str, Any],
                        usage: dict[str, Any]) -> dict[str, Any]:
    """A generation as ``langfuse.openai`` writes one: the messages (with the tools offered), the message answered."""
    return langfuse_span(span_id, parent, "generation", "OpenAI-generation", start, {"tools": TOOLS, "messages": messages},
                         said, **{"langfuse.observation.model.name": "m-1",
                                  "langfuse.observation.usage_details": json.dumps(usage)})


def langfuse_loop(usage: dict[str, Any]) -> list[dict[str, Any]]:
    """An ``@observe()`` function around a tool loop: its arguments as ``{"args", "kwargs"}``, an ``@observe(
    as_type="tool")`` tool between two generations, the session from ``propagate_attributes``; the agent is the
    service's (no trace name set)."""
    spans = [langfuse_span("1", None, "span", "support_bot", 0, {"args": [ORDER_QUESTION, []], "kwargs": {}},
                          "It shipped.", **{"session.id": "s-1"}),
            langfuse_generation("2", "1", 1, OPENAI_TURN, CALLED, usage),
            langfuse_span("3", "1", "tool", "lookup_order", 3, {"args": [], "kwargs": ORDER_ARGS}, "shipped"),
            langfuse_generation("4", "1", 5, [*OPENAI_TURN, CALLED, {"role": "tool", "tool_call_id": "call_1",
                                                                     "content": "shipped"}],
                                {"role": "assistant", "content": "It shipped."}, usage)]
    for one in spans:
        one["resource"] = {"service.name": "shop"}
    return spans


@pytest.mark.parametrize("usage", [
    pytest.param({"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}, id="the provider's usage"),
    pytest.param({"input": 40, "output": 10}, id="Langfuse's own keys"),
])
def test_langfuses_observations_are_read_by_what_its_attributes_mean(usage):
    [turn] = assembly(langfuse_loop(usage)).turns

    assert (Turn.model_validate(turn).question, turn["output"], turn["system"]) == (ORDER_QUESTION, "It shipped.",
                                                                                   "Be kind.")
    assert (turn["agent"], turn["session_id"], turn["model"], turn["usage"]) == (
        "shop", "s-1", "m-1", {"prompt_tokens": 80, "completion_tokens": 20})
    assert [(c["name"], c["arguments"], c["id"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "call_1", "shipped")]


def test_the_intake_keeps_langfuses_observations():
    from vigil.schemas.spans import is_genai

    assert is_genai({"langfuse.observation.type": "span", "langfuse.observation.input": "{}"})


def test_a_langfuse_observation_whose_level_is_error_failed_with_its_status_message():
    """``@observe`` sets the level ``ERROR`` and the status message when its function raises (and the span status,
    not relied on here): a run whose only model call failed so is a failed run with that error."""
    failed = {"langfuse.observation.level": "ERROR", "langfuse.observation.status_message": "Error code: 500"}
    spans = [langfuse_span("1", None, "span", "support_bot", 0, {"args": [ORDER_QUESTION], "kwargs": {}}, **failed),
             langfuse_span("2", "1", "generation", "OpenAI-generation", 1, OPENAI_TURN, **failed)]

    [turn] = assembly(spans).turns

    assert (turn["metadata"]["vigil.run"], turn["metadata"]["vigil.error"]) == ("failed", "Error code: 500")


def test_the_input_an_application_states_for_its_langfuse_trace_is_the_question_when_the_prompt_wraps_it():
    """``update_current_trace(input=…)`` on an ``@observe(as_type="agent")`` function whose own input is its
    arguments' packaging; the model is sent the question inside a prompt of the application's."""
    wrapped = [{"role": "user", "content": f"Context: none.\nQuestion: {ORDER_QUESTION}"}]
    spans = [langfuse_span("1", None, "agent", "support_bot", 0, {"args": [ORDER_QUESTION, []], "kwargs": {}},
                           "It shipped.", **{"langfuse.trace.input": ORDER_QUESTION, "langfuse.trace.name": "bot"}),
             langfuse_span("2", "1", "generation", "OpenAI-generation", 1, wrapped,
                           {"role": "assistant", "content": "It shipped."})]

    [turn] = assembly(spans).turns

    assert (turn["input"][-1]["content"], turn["output"], turn["agent"]) == (ORDER_QUESTION, "It shipped.", "bot")


@pytest.mark.parametrize(("said", "agent"), [
    pytest.param({"gen_ai.agent.id": "support-bot"}, "support-bot", id="only an id: the id names the agent"),
    pytest.param({"gen_ai.agent.id": "asst_7Qx", "agent.name": "Support bot"}, "Support bot",
                 id="a name any convention states wins over the id"),
])
def test_an_agent_that_states_only_its_id_is_named_by_it(said, agent):
    """The GenAI conventions' ``gen_ai.agent.id`` (Mastra's agent runs state it and no name): the run is that agent's,
    not the service's."""
    spans = [span("1", None, "agent.support-bot", 0, **{"gen_ai.operation.name": "invoke_agent", **said}),
             llm("2", "1", 1, QUESTION, ANSWER)]
    spans[0]["resource"] = {"service.name": "shop"}

    [turn] = assembly(spans).turns

    assert turn["agent"] == agent


@pytest.mark.parametrize(("scope", "setting"), [
    pytest.param("semantic_kernel.utils.telemetry.agent_diagnostics.decorators",
                 "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true", id="Semantic Kernel"),
    pytest.param("Microsoft.SemanticKernel.Diagnostics", "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE",
                 id="Semantic Kernel (.NET)"),
    pytest.param("agent_framework", "enable_sensitive_telemetry()", id="Microsoft Agent Framework"),
    pytest.param("opentelemetry.instrumentation.genai.openai", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                 id="an OTel GenAI instrumentation"),
])
def test_a_run_without_content_names_the_switch_of_the_framework_that_wrote_it(scope, setting):
    """A framework whose own telemetry writes the GenAI conventions has its own content switch: the user is told it,
    not OTel's variable, which it does not read."""
    spans = [span("1", None, "invoke_agent support_bot", 0, **{"gen_ai.operation.name": "invoke_agent"}),
             span("2", "1", "chat m", 1, **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})]
    for record in spans:
        record["scope"] = scope
    spans[1]["end"] = 11

    [turn] = assembly(spans).turns

    assert turn["metadata"]["vigil.content"] == "missing"
    assert setting in turn["metadata"]["vigil.content_setting"]


# Griptape's own observability (``schemas/conventions/griptape.py``): a span per ``@observable`` method, named
# ``<class>.<method>()``, its only attribute the decorator's ``tags``; the model client's LLM spans under its driver's
def griptape_run(tool_span: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``Agent.run()``: a model call asking for ``OrderTool_lookup_order`` (Griptape's name for the activity
    ``lookup_order`` of the tool ``OrderTool``), the tool's span, the call that answers; each model call the
    driver's ``PromptDriver.run()`` span around the client's LLM span."""
    driver = {"tags": ["PromptDriver.run()"]}
    return [span("1", None, "main", 0), span("2", "1", "Agent.run()", 1), span("3", "2", "Agent.try_run()", 1),
            span("4", "3", "OpenAiChatPromptDriver.run()", 2, **driver),
            model_call("5", "4", 2, wire=True, tool="OrderTool_lookup_order"), tool_span,
            span("7", "3", "OpenAiChatPromptDriver.run()", 5, **driver),
            model_call("8", "7", 5, wire=True, answer="It shipped.", tool="OrderTool_lookup_order")]


def test_griptapes_spans_alone_count_each_failed_run_with_its_error():
    """Griptape's own spans carry no content, but say a model call raised (status ERROR, an ``exception`` event on
    the driver's ``PromptDriver.run()`` span; Griptape's task catches it and the run ends with an ``ErrorArtifact``):
    each run is a failed turn with the error's text, so a failure rate can be watched without content."""
    turns, steps = turns_of("griptape_no_content_fail.json")

    assert len(turns) == 2 and steps == 0
    assert all(t.metadata["vigil.run"] == "failed" and t.metadata["span_name"] == "Agent.run()" for t in turns)
    assert all("InternalServerError: Error code: 500" in t.metadata["vigil.error"] for t in turns)


@pytest.mark.parametrize(("status", "events", "result", "error"), [
    pytest.param(None, [], '{"status": "shipped"}', None, id="the tool returned"),
    pytest.param({"code": 2, "message": ""}, [{"name": "exception", "time": 4, "attributes": {
        "exception.type": "ValueError", "exception.message": "database down"}}], None, "ValueError: database down",
        id="the tool raised"),
])
def test_griptapes_tool_span_is_the_models_call_of_its_tools_activity_with_the_error_it_raised(
        status, events, result, error):
    """Griptape's ``Tool.run()`` span names only its tool's class and says only whether the activity raised (Griptape
    then sends the model the error's text as the tool's result); the model's call of ``<tool>_<activity>`` gives the
    name, id and arguments, its tool message the result of a call that did not fail."""
    tool_span = {**span("6", "3", "OrderTool.try_run()", 4, tags=["Tool.run()"]), "events": events,
                 **({"status": status} if status else {})}

    [turn] = assembly(griptape_run(tool_span)).turns

    assert (turn["span_id"], turn["input"][0]["content"], turn["output"]) == ("2".rjust(16, "0"), ORDER_QUESTION,
                                                                            "It shipped.")
    [call] = turn["tool_calls"]
    assert (call["name"], call["arguments"], call["id"], call.get("result"), call.get("error")) == (
        "OrderTool_lookup_order", ORDER_ARGS, "call_1", result, error)


def test_a_tool_span_of_another_convention_is_never_paired_by_griptapes_activity_names():
    """The pairing by ``<tool>_<activity>`` is Griptape's: a tool span another convention names ``OrderTool``, with
    arguments of its own, stays a call of its own beside the model's ``OrderTool_lookup_order``."""
    tool_span = span("6", "3", "OrderTool", 4, **{"openinference.span.kind": "TOOL", "tool.name": "OrderTool",
                                                  "input.value": json.dumps({"order": "A-1001"})})

    [turn] = assembly(griptape_run(tool_span)).turns

    assert [(c["name"], c.get("id")) for c in turn["tool_calls"]] == [("OrderTool", None)]


@pytest.mark.parametrize(("attributes", "decided"), [
    pytest.param({"traceloop.span.kind": "task", "gen_ai.operation.name": "execute_tool"},
                 ("tool", "openllmetry", "gen_ai.operation.name"), id="the operation beside the span kind decides"),
    pytest.param({"traceloop.span.kind": "workflow"}, ("agent", "openllmetry", "traceloop.span.kind"),
                 id="the span kind alone"),
])
def test_explain_names_the_attribute_an_openllmetry_span_kind_was_decided_on(attributes, decided):
    from vigil.schemas.conventions import explain_kind

    assert explain_kind(span("1", None, "lookup_order.tool", 0, **attributes)) == decided


def test_runs_under_a_parent_not_arrived_yet_that_answer_different_words_are_each_a_turn():
    """A process-wide span (Griptape's ``Observability`` block: every run of an application under one ``main`` span,
    exported when the application stops) arrives long after its runs: each run is its own turn meanwhile, the same
    turns as when it has arrived, never one turn made of the first run's question and the last run's answer."""
    runs = [span("a1", "main", "Agent.run", 0), llm("c1", "a1", 1, "Where is A-1001?", "It shipped."),
            span("a2", "main", "Agent.run", 20), llm("c2", "a2", 21, "Where is B-7?", "It is late.")]
    main = span("main", None, "main", -1)
    main["end"] = 40

    first, before, after = assembly(runs[:2]).turns, assembly(runs).turns, assembly([*runs, main]).turns

    assert sorted((t["input"][-1]["content"], t["output"]) for t in before) == [("Where is A-1001?", "It shipped."),
                                                                                ("Where is B-7?", "It is late.")]
    assert sorted(t["span_id"] for t in before) == sorted(t["span_id"] for t in after)
    assert [t["span_id"] for t in first] == [t["span_id"] for t in after if t["output"] == "It shipped."]  # the
    # first run, alone so far, is already the turn it stays


def test_the_spans_of_one_run_whose_root_has_not_arrived_are_still_one_turn_under_its_id():
    """A slow agent's root is exported last: its step and its answering call, both asked the same words, are one run
    whose turn already has the root's span id."""
    step = llm("c1", "agent", 1, "Where is A-1001?", "")
    step["attributes"].update({"llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup_order",
                               "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1"})
    spans = [step, span("t1", "agent", "lookup_order", 12, **{"openinference.span.kind": "TOOL",
                                                             "tool.name": "lookup_order"}),
             llm("c2", "agent", 30, "Where is A-1001?", "It shipped.")]

    [turn] = assembly(spans).turns

    assert (turn["span_id"], turn["output"]) == ("agent".rjust(16, "0"), "It shipped.")


def test_every_recorded_span_is_decided_by_the_mapper_the_registry_names_in_order():
    """``decided_kind`` skips the mappers a span has no claim key of (their ``CLAIM_KEYS``): over every span of every
    recording it decides what asking each mapper of ``MAPPERS`` in order decides (``explain_kind``), by the same one."""
    from vigil.schemas.conventions import MAPPERS, decided_kind, explain_kind

    position = {name: at for at, (name, _keys, _mapper) in enumerate(MAPPERS)} | {"fallback": len(MAPPERS)}
    names = sorted(p.relative_to(FIXTURES).as_posix() for p in [*FIXTURES.glob("*.json"),
                                                                 *FIXTURES.glob("frameworks/*/*.json")]
                   if not p.name.endswith(".expected.json"))
    seen = 0
    for name in names:
        for spans in recorded(name).values():
            for span in spans:
                if span.get("log"):
                    continue
                found, mapper, _key = explain_kind(span)
                assert decided_kind(span) == (found, position[mapper]), (name, span["name"])
                seen += 1
    assert seen > 1000
