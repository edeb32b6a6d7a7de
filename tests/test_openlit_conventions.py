"""OpenLIT as it writes today (``openlit.init()``, 1.45): the current GenAI conventions' messages, a workflow span
around each run, and LangChain's tool spans printed in Python notation. Hand-made spans for each rule of
``schemas/conventions/openlit.py`` and ``genai.py`` that the recordings of ``frameworks/*_openlit`` needed; assembled
by ``vigil.schemas.spans``."""

from __future__ import annotations

import json
from typing import Any

from vigil.schemas import Turn, conventions
from vigil.schemas.spans import ERROR_METADATA, RUN_METADATA, assembly
from vigil.worker.intake.otlp import decode_traces

from tests.test_recorded_conventions import (
    ORDER_ARGS,
    ORDER_QUESTION,
    TRACE,
    genai,
    span,
)

RESULT = json.dumps({"order_id": "A-1001", "status": "shipped"})
ANSWER = "Order A-1001 has shipped."


def messages(role: str, *parts: dict[str, Any]) -> str:
    return json.dumps([{"role": role, "parts": list(parts)}])


def said(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


ASKED = {"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": json.dumps(ORDER_ARGS)}


def langgraph_run(*, failed: bool = False) -> list[dict[str, Any]]:
    """One LangGraph run as OpenLIT exports it: its ``invoke_workflow`` span, and under it, side by side, LangChain's
    span of each ``agent`` node (its model call inside), the graph's own span of the same node (the node's messages,
    no model call under it) and the tool's span (arguments and result printed in Python notation). ``failed``: the
    tool raised, the graph re-raised, and the workflow span names its workflow but no operation."""
    question = {"gen_ai.input.messages": messages("user", said(ORDER_QUESTION))}
    workflow = {"gen_ai.workflow.name": "support-bot"}
    spans = [span("1", None, "invoke_workflow support-bot", 0, **(workflow if failed else {
                 **workflow, "gen_ai.operation.name": "invoke_workflow",
                 "gen_ai.output.messages": messages("assistant", said(ANSWER))})),
             genai("2", "1", 1, "invoke_agent", **{"gen_ai.agent.name": "agent"}),
             genai("3", "2", 2, "chat", **{"gen_ai.request.model": "m", **question,
                                           "gen_ai.output.messages": messages("assistant", ASKED)}),
             genai("4", "1", 3, "invoke_agent", **{"gen_ai.agent.name": "agent", **question}),
             genai("5", "1", 4, "execute_tool", **{
                 "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.arguments": str(ORDER_ARGS),
                 **({} if failed else {"gen_ai.tool.call.result":
                                       f"content={RESULT!r} name='lookup_order' tool_call_id='call_1'"})})]
    if failed:
        spans[0]["status"] = spans[4]["status"] = {"code": 2, "message": "ValueError: order database unreachable"}
        return spans
    return [*spans,
            genai("6", "1", 5, "invoke_agent", **{"gen_ai.agent.name": "agent"}),
            genai("7", "6", 6, "chat", **{"gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps([
                {"role": "user", "parts": [said(ORDER_QUESTION)]}, {"role": "assistant", "parts": [ASKED]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": RESULT}]}]),
                "gen_ai.output.messages": messages("assistant", said(ANSWER))}),
            genai("8", "1", 7, "invoke_agent", **{"gen_ai.agent.name": "agent", **question,
                                                  "gen_ai.output.messages": messages("assistant", said(ANSWER))})]


def question(turn: dict[str, Any]) -> str:
    return Turn.model_validate({"agent": "service", **turn}).question


def test_a_workflow_span_is_the_run_and_the_agent_spans_under_it_are_its_steps():
    [turn] = assembly(langgraph_run()).turns

    assert turn["span_id"] == "1".rjust(16, "0")
    assert (question(turn), turn["output"]) == (ORDER_QUESTION, ANSWER)
    assert [(c["name"], c["arguments"]) for c in turn["tool_calls"]] == [("lookup_order", ORDER_ARGS)]


def test_a_span_that_names_a_workflow_but_no_operation_is_its_run_and_a_failed_one_is_a_failed_turn():
    [turn] = assembly(langgraph_run(failed=True)).turns

    assert turn["span_id"] == "1".rjust(16, "0")
    assert question(turn) == ORDER_QUESTION
    assert turn["metadata"][RUN_METADATA] == "failed"
    assert "order database unreachable" in turn["metadata"][ERROR_METADATA]


def test_a_tool_span_printed_in_python_notation_gives_the_arguments_object_and_the_tool_messages_content():
    call = conventions.tool(langgraph_run()[4])

    assert (call["arguments"], call["result"]) == (ORDER_ARGS, RESULT)


def test_an_openlit_span_with_the_current_genai_messages_is_read_from_them_not_its_flattened_tool_attributes():
    """OpenLIT's openai instrumentation names one tool of a parallel step in ``gen_ai.tool.name`` beside the output
    messages that hold both calls."""
    both = [ASKED, {**ASKED, "id": "call_2", "name": "get_shipping"}]
    chat = genai("3", "1", 2, "chat", **{
        "telemetry.sdk.name": "openlit", "gen_ai.request.model": "m",
        "gen_ai.input.messages": messages("user", said(ORDER_QUESTION)),
        "gen_ai.output.messages": messages("assistant", *both),
        "gen_ai.tool.name": "get_shipping", "gen_ai.tool.call.id": "call_2",
        "gen_ai.tool.args": json.dumps(ORDER_ARGS)})

    (_, [output], _), sources = conventions.io_sources(chat)

    assert [(c["name"], c["arguments"], c["id"]) for c in output["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, "call_1"), ("get_shipping", ORDER_ARGS, "call_2")]
    assert sources["outputs"] == "genai"


def test_a_root_answer_that_holds_the_models_answer_and_more_wraps_it_and_the_models_words_are_the_answer():
    """OpenLIT's streamed LangGraph run: its workflow span states every chunk of the stream joined, the tool's
    result before the model's answer."""
    spans = langgraph_run()
    spans[0]["attributes"]["gen_ai.output.messages"] = messages("assistant", said(RESULT + ANSWER))

    [turn] = assembly(spans).turns

    assert turn["output"] == ANSWER


TEMPLATE = f"\nCurrent Task: {ORDER_QUESTION}\n\nThis is the expected criteria for your final answer: a short answer."
FAILED = {"code": 2, "message": "InternalServerError: the model server is overloaded"}


def crew_run(*, failed: bool = False) -> list[dict[str, Any]]:
    """A CrewAI kickoff as OpenLIT exports it: the crew's workflow span (no input), its agent's span (the task's
    words as its input), the agent's executor (a flow: a span per flow method, each stating a coroutine's repr as its
    output) and the model calls, which are sent the task's prompt template. ``failed``: the model server fails; the
    crew's, agent's and executor's spans keep only their names and errors, and the executor retries."""
    if failed:
        spans = [span("1", None, "invoke_workflow crew", 0), span("2", "1", "invoke_agent support bot", 1)]
        for attempt, start in (("3", 2), ("6", 10)):
            spans += [span(attempt, "2", "invoke_workflow AgentExecutor", start),
                      genai(str(int(attempt) + 1), attempt, start + 1, "invoke_agent", **{"gen_ai.output.messages":
                            messages("assistant", said("<coroutine object Flow.run at 0x7f>"))}),
                      genai(str(int(attempt) + 2), attempt, start + 2, "chat", **{"gen_ai.request.model": "m"})]
        for s in spans:
            if s["name"] != "invoke_agent":
                s["status"] = FAILED
        return spans
    return [genai("1", None, 0, "invoke_workflow", **{"gen_ai.workflow.name": "crew",
                                                     "gen_ai.output.messages": messages("assistant", said(ANSWER))}),
            genai("2", "1", 1, "invoke_agent", **{"gen_ai.agent.name": "support bot",
                                                  "gen_ai.input.messages": messages("user", said(ORDER_QUESTION)),
                                                  "gen_ai.output.messages": messages("assistant", said(ANSWER))}),
            genai("3", "2", 2, "invoke_workflow", **{"gen_ai.workflow.name": "AgentExecutor"}),
            genai("4", "3", 3, "chat", **{"gen_ai.request.model": "m",
                                          "gen_ai.input.messages": messages("user", said(TEMPLATE)),
                                          "gen_ai.output.messages": messages("assistant", said(ANSWER))})]


def test_a_root_that_states_nothing_is_spoken_for_by_the_agent_under_it_whose_words_the_prompt_wraps():
    [turn] = assembly(crew_run()).turns

    assert (turn["span_id"], question(turn), turn["output"]) == ("1".rjust(16, "0"), ORDER_QUESTION, ANSWER)


def test_a_span_named_as_the_genai_conventions_name_an_agents_span_is_one_when_it_kept_nothing_else():
    [turn] = assembly(crew_run(failed=True)).turns

    assert turn["span_id"] == "1".rjust(16, "0")
    assert turn["metadata"][RUN_METADATA] == "failed"
    assert "overloaded" in turn["metadata"][ERROR_METADATA]


def smolagents_run() -> list[dict[str, Any]]:
    """A smolagents run as OpenLIT exports it: the agent's span (the task as its input), a span of the same agent
    per step, each around its model call; smolagents sends the tool's result as a user message (``Observation:``)."""
    step = {"gen_ai.agent.name": "support_bot"}
    return [genai("1", None, 0, "invoke_agent", **{**step,
                                                   "gen_ai.input.messages": messages("user", said(ORDER_QUESTION)),
                                                   "gen_ai.output.messages": messages("assistant", said(ANSWER))}),
            span("2", "1", "invoke_agent support_bot step_1", 1, **{"gen_ai.operation.name": "invoke_agent", **step}),
            genai("3", "2", 2, "chat", **{"gen_ai.request.model": "m", "gen_ai.output.messages": messages(
                "assistant", ASKED), "gen_ai.input.messages": messages("user", said(f"New task:\n{ORDER_QUESTION}"))}),
            genai("4", "2", 3, "execute_tool", **{"gen_ai.tool.name": "lookup_order",
                                                  "gen_ai.tool.call.arguments": json.dumps(ORDER_ARGS),
                                                  "gen_ai.tool.call.result": RESULT}),
            span("5", "1", "invoke_agent support_bot step_2", 5, **{"gen_ai.operation.name": "invoke_agent", **step}),
            genai("6", "5", 6, "chat", **{"gen_ai.request.model": "m",
                                          "gen_ai.input.messages": messages("user", said(f"Observation:\n{RESULT}")),
                                          "gen_ai.output.messages": messages("assistant", said(ANSWER))})]


def test_agent_spans_that_name_the_agent_above_them_are_its_steps_not_runs_it_contains():
    [turn] = assembly(smolagents_run()).turns

    assert (turn["span_id"], question(turn), turn["output"]) == ("1".rjust(16, "0"), ORDER_QUESTION, ANSWER)
    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("lookup_order", ORDER_ARGS, RESULT)]


def test_the_intake_keeps_the_error_of_a_span_that_kept_nothing_else_and_its_call_failed_with_it():
    """OpenLIT's smolagents tool span that failed: its name, its status, no attribute vigil reads."""
    spans = smolagents_run()
    tool = {"traceId": TRACE, "spanId": "4".rjust(16, "0"), "parentSpanId": "2".rjust(16, "0"), "name":
            "execute_tool lookup_order", "startTimeUnixNano": "3", "endTimeUnixNano": "4",
            "attributes": [{"key": "error.type", "value": {"stringValue": "AgentToolExecutionError"}}],
            "status": {"code": 2, "message": "AgentToolExecutionError: ValueError: order database unreachable"}}
    body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "openlit"}, "spans": [tool]}]}]}
    [decoded] = decode_traces(json.dumps(body).encode(), json_body=True).spans
    spans[3] = decoded

    [turn] = assembly(spans).turns

    assert decoded["status"]["code"] == 2
    [call] = turn["tool_calls"]
    assert (call["name"], call["arguments"]) == ("lookup_order", ORDER_ARGS)
    assert "order database unreachable" in call["error"]
