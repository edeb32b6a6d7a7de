"""Whole traces become turns (``vigil.schemas.spans.assemble``), the rules one at a time; and the in-process
``GenAISpanProcessor`` runs the same assembly on the real OpenTelemetry SDK's spans."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from vigil.producers import GenAISpanProcessor
from vigil.schemas import Turn
from vigil.schemas.spans import assemble, assembly, waiting_for_parent

from tests.test_sdk import make_monitor, turns  # noqa: F401 - the fixture is shared

TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(span_id: str, parent: str | None, start: int, **attributes: Any) -> dict[str, Any]:
    return {"trace_id": TRACE, "span_id": span_id.ljust(16, "0"), "parent_id": parent and parent.ljust(16, "0"),
            "name": span_id, "start": start, "end": start + 10, "attributes": attributes,
            "resource": {"service.name": "shop"}}


def chat(span_id: str, parent: str | None, start: int, question: str, answer: str, **extra: Any) -> dict[str, Any]:
    return span(span_id, parent, start, **{"gen_ai.operation.name": "chat", "gen_ai.prompt": question,
                                           "gen_ai.completion": answer, **extra})


def test_without_an_agent_root_each_top_level_llm_span_is_its_own_turn():
    spans = [span("a1", None, 0), chat("b1", "a1", 1, "first?", "one"), chat("c1", "a1", 30, "second?", "two")]

    result = assemble(spans)

    assert [(t["span_id"][:2], t["output"]) for t in result] == [("b1", "one"), ("c1", "two")]


def test_a_turn_keeps_the_skeleton_of_its_spans_for_its_page():
    """Every span of the run: its parent, its kind, when it started after the first and how long it took, its error."""
    failed = span("t1", "a1", 20, **{"gen_ai.tool.name": "lookup_order", "gen_ai.operation.name": "execute_tool"})
    failed["status"] = {"code": 2, "message": "order not found"}
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent"}),
             chat("c1", "a1", 1_000_000, "Where is my order?", "let me look"), failed,
             chat("c2", "a1", 5_000_000, "tool said: not found", "I could not find it.")]

    [turn] = assemble(spans)

    skeleton = {s["span_id"][:2]: s for s in turn["spans"]}
    assert [s["span_id"][:2] for s in turn["spans"]] == ["a1", "t1", "c1", "c2"]
    assert skeleton["a1"]["kind"] == "agent" and "parent_id" not in skeleton["a1"]
    assert (skeleton["c1"]["kind"], skeleton["c1"]["parent_id"][:2]) == ("llm", "a1")
    assert skeleton["t1"]["kind"] == "tool" and skeleton["t1"]["error"]
    assert skeleton["c2"]["start_ms"] == 5.0 and skeleton["c2"]["duration_ms"] == 10 / 1e6
    assert Turn.model_validate({**turn, "agent": "shop"}).spans[1].span_id == turn["spans"][1]["span_id"]


def test_nested_agents_make_one_turn_for_the_outermost():
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.prompt": "q", "gen_ai.completion": "a"}),
             span("a2", "a1", 1, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub"}),
             chat("c1", "a2", 2, "inner?", "inner")]

    [turn] = assemble(spans)

    assert (turn["span_id"][:2], turn["agent"], turn["output"]) == ("a1", "sub", "a")


def asks(question: str, tool: str, call_id: str, arguments: str, before: list | None = None) -> str:
    """An LLM call's conversation as JSON: the messages before, the user's words, and the model asking for a tool."""
    return json.dumps([*(before or []), {"role": "user", "content": question}, {"role": "assistant", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}]}])


def test_a_tool_that_runs_an_agent_is_a_call_and_so_are_the_calls_of_the_agent_under_it():
    """pydantic-ai's agent delegation: the triage agent's tool runs the orders agent, whose model calls lookup_order."""
    tool = {"gen_ai.operation.name": "execute_tool"}
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}),
             chat("c1", "a1", 1, "Where is A-1001?",
                  asks("Where is A-1001?", "ask_orders_bot", "d1", '{"query": "A-1001"}')),
             span("t1", "a1", 2, **tool, **{"gen_ai.tool.name": "ask_orders_bot", "gen_ai.tool.call.id": "d1",
                                             "gen_ai.tool.call.arguments": '{"query": "A-1001"}',
                                             "gen_ai.tool.call.result": "It has shipped."}),
             span("a2", "t1", 3, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orders_bot"}),
             chat("c2", "a2", 4, "A-1001", asks("A-1001", "lookup_order", "l1", '{"order_id": "A-1001"}')),
             span("t2", "a2", 5, **tool, **{"gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "l1",
                                             "gen_ai.tool.call.arguments": '{"order_id": "A-1001"}',
                                             "gen_ai.tool.call.result": "shipped"}),
             chat("c3", "a2", 6, "A-1001", "It has shipped."),
             chat("c4", "a1", 7, "Where is A-1001?", "Order A-1001 has shipped.")]

    [turn] = assemble(spans)

    assert (Turn.model_validate({**turn, "agent": "shop"}).question, turn["output"]) == (
        "Where is A-1001?", "Order A-1001 has shipped.")
    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("ask_orders_bot", {"query": "A-1001"}, "It has shipped."), ("lookup_order", {"order_id": "A-1001"}, "shipped")]


def test_a_handoff_span_is_the_models_transfer_call_with_the_result_the_model_was_sent():
    """OpenInference's span of an OpenAI Agents SDK handoff names no tool the model asked for (``handoff to <agent>``,
    the agents handing over and taking over as its input and output): it is the ``transfer_to_<agent>`` call."""
    transfer = [{"role": "user", "content": "Where is A-1001?"}, {"role": "assistant", "tool_calls": [
        {"id": "h1", "type": "function", "function": {"name": "transfer_to_orders_bot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "h1", "content": '{"assistant": "orders_bot"}'}]
    spans = [span("a1", None, 0, **{"openinference.span.kind": "AGENT", "agent.name": "triage"}),
             chat("c1", "a1", 1, "Where is A-1001?", json.dumps(transfer[1:2])),
             {**span("h0", "a1", 2, **{"openinference.span.kind": "TOOL", "input.value": "triage",
                                       "output.value": "orders_bot"}), "name": "handoff to orders_bot"},
             span("a2", None, 3, **{"openinference.span.kind": "AGENT", "agent.name": "orders_bot"}),
             chat("c2", "a2", 4, json.dumps(transfer), "Order A-1001 has shipped.")]
    spans[3]["parent_id"] = spans[0]["parent_id"] = "w1".ljust(16, "0")
    spans.insert(0, span("w1", None, 0, **{"openinference.span.kind": "AGENT"}))

    [turn] = assemble(spans)

    assert (Turn.model_validate({**turn, "agent": "shop"}).question, turn["output"]) == (
        "Where is A-1001?", "Order A-1001 has shipped.")
    assert [(c["name"], c["arguments"], c.get("id"), c["result"]) for c in turn["tool_calls"]] == [
        ("transfer_to_orders_bot", {}, "h1", '{"assistant": "orders_bot"}')]


def test_a_handoff_tool_that_answers_with_a_command_is_answered_by_the_tool_message_the_command_carries():
    """LangGraph's handoff tool returns ``Command(goto="orders_bot", update={"messages": [..., tool message]},
    graph=Command.PARENT)``, which OpenInference writes whole as the tool span's output: the model is sent the tool
    message, and that is the call's result."""
    command = {"graph": "__parent__", "goto": "orders_bot", "resume": None, "update": {"messages": [
        {"type": "human", "data": {"content": "Where is A-1001?", "type": "human"}},
        {"type": "ai", "data": {"content": "", "type": "ai", "tool_calls": [
            {"name": "transfer_to_orders_bot", "args": {}, "id": "h1", "type": "tool_call"}]}},
        {"role": "tool", "content": "Successfully transferred to orders_bot", "name": "transfer_to_orders_bot",
         "tool_call_id": "h1"}]}}
    spans = [span("a1", None, 0, **{"openinference.span.kind": "CHAIN", "input.value": "Where is A-1001?"}),
             chat("c1", "a1", 1, "Where is A-1001?", asks("Where is A-1001?", "transfer_to_orders_bot", "h1", "{}")),
             span("t1", "a1", 2, **{"openinference.span.kind": "TOOL", "tool.name": "transfer_to_orders_bot",
                                    "output.value": json.dumps(command)}),
             chat("c2", "a1", 3, "Where is A-1001?", "Order A-1001 has shipped.")]

    [turn] = assemble(spans)

    assert [(c["name"], c["result"]) for c in turn["tool_calls"]] == [
        ("transfer_to_orders_bot", "Successfully transferred to orders_bot")]


def test_a_printed_command_is_answered_by_the_tool_message_it_carries():
    """OpenLIT writes ``str()`` of what a LangGraph handoff tool returned, the ``Command`` printed with its messages
    (LangChain's printed as their classes, the tool's own as a dict): the result is that tool message's content."""
    printed = ("Command(graph='__parent__', update={'messages': [HumanMessage(content='Where is A-1001?', "
               "additional_kwargs={}), AIMessage(content='', tool_calls=[{'name': 'transfer_to_orders_bot', 'args': "
               "{}, 'id': 'h1', 'type': 'tool_call'}]), {'role': 'tool', 'content': 'Successfully transferred to "
               "orders_bot', 'name': 'transfer_to_orders_bot', 'tool_call_id': 'h1'}], 'remaining_steps': 9}, "
               "goto='orders_bot')")
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}),
             chat("c1", "a1", 1, "Where is A-1001?", asks("Where is A-1001?", "transfer_to_orders_bot", "h1", "{}")),
             span("t1", "a1", 2, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_to_orders_bot",
                                    "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": printed}),
             chat("c2", "a1", 3, "Where is A-1001?", "Order A-1001 has shipped.")]

    [turn] = assemble(spans)

    assert [(c["name"], c["result"]) for c in turn["tool_calls"]] == [
        ("transfer_to_orders_bot", "Successfully transferred to orders_bot")]


def test_a_langchain_callbacks_packaging_is_unwrapped_to_its_inputs_even_when_the_call_has_none():
    """OpenLLMetry's LangChain instrumentation writes ``on_tool_start``'s packaging as the tool's input (and as
    ``gen_ai.tool.call.arguments``): a LangGraph handoff tool takes no arguments, its ``inputs`` are ``{}``, and the
    ``kwargs`` beside them are the callback's own (``color``, ``tool_call_id``), not the tool's."""
    packaging = json.dumps({"input_str": "{}", "tags": ["seq:step:1"], "metadata": {"langgraph_node": "tools"},
                            "inputs": {}, "kwargs": {"color": "green", "name": None, "tool_call_id": "h1"}})
    spans = [span("a1", None, 0, **{"traceloop.span.kind": "workflow", "traceloop.entity.name": "LangGraph"}),
             chat("c1", "a1", 1, "Where is A-1001?", asks("Where is A-1001?", "transfer_to_orders_bot", "h1", "{}")),
             span("t1", "a1", 2, **{"traceloop.span.kind": "tool", "traceloop.entity.name": "transfer_to_orders_bot",
                                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_to_orders_bot",
                                    "traceloop.entity.input": packaging, "gen_ai.tool.call.arguments": packaging}),
             chat("c2", "a1", 3, "Where is A-1001?", "Order A-1001 has shipped.")]

    [turn] = assemble(spans)

    assert [(c["name"], c["arguments"]) for c in turn["tool_calls"]] == [("transfer_to_orders_bot", {})]


def test_agent_runs_each_sent_the_words_their_root_states_wrapped_are_one_run_of_that_request():
    """A Strands ``Swarm``: its ``invoke_swarm`` span states the user's words, and each agent it runs is sent them
    wrapped in what the swarm tells it (``Context:\nUser Request: …``): one request, one run; runs whose words do not
    all hold the root's stay runs of their own (a conversation)."""
    def swarm(first: str, second: str) -> list[dict[str, Any]]:
        return [span("s1", None, 0, **{"gen_ai.operation.name": "invoke_swarm", "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "content": "Where is A-1001?"}])}),
                span("a1", "s1", 1, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}),
                chat("c1", "a1", 2, first, "Let me hand this over."),
                span("a2", "s1", 3, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orders_bot"}),
                chat("c2", "a2", 4, second, "Order A-1001 has shipped.")]

    [turn] = assemble(swarm("Context:\nUser Request: Where is A-1001?\n\nOther agents: orders_bot.",
                            "Context:\nHandoff Message: look it up\n\nUser Request: Where is A-1001?"))
    conversation = assemble(swarm("Context:\nUser Request: Where is A-1001?", "And the kettle?"))

    assert (turn["span_id"][:2], Turn.model_validate({**turn, "agent": "shop"}).question, turn["output"]) == (
        "s1", "Where is A-1001?", "Order A-1001 has shipped.")
    assert [t["output"] for t in conversation] == ["Let me hand this over.", "Order A-1001 has shipped."]


@pytest.mark.parametrize("said", [
    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delegate_task_to_member", "gen_ai.tool.call.id": "d1",
     "gen_ai.tool.call.result": "<generator object _delegate.<locals>.delegate_task_to_member at 0x7f3a2c1e06c0>"},
    {"traceloop.span.kind": "tool", "traceloop.entity.name": "delegate_task_to_member",
     "traceloop.entity.output": "status='success' result=<generator object _delegate.<locals>.delegate_task_to_member "
                                "at 0x7f3a2c1e06c0> error=None images=None"}], ids=["openlit", "openllmetry"])
def test_a_result_that_is_an_objects_identity_is_none_and_the_tool_message_the_model_was_sent_is(said):
    """Agno's ``delegate_task_to_member`` is a generator function: OpenLIT and OpenLLMetry write ``str()`` of what
    it returned, the generator, before the member ran. The leader's model is then sent the member's answer for the
    call's id: that is the result."""
    sent = json.loads(asks("Where is A-1001?", "delegate_task_to_member", "d1", '{"member_id": "orders_bot"}')) + [
        {"role": "tool", "tool_call_id": "d1", "content": "It has shipped."}]
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}),
             chat("c1", "a1", 1, "Where is A-1001?", json.dumps(sent[1:2])),
             span("t1", "a1", 2, **said),
             chat("c2", "a1", 3, json.dumps(sent), "Order A-1001 has shipped.")]

    [turn] = assemble(spans)

    assert [(c["name"], c["result"]) for c in turn["tool_calls"]] == [("delegate_task_to_member", "It has shipped.")]


def test_a_call_the_model_made_and_was_answered_is_a_call_though_no_span_records_it():
    """An OpenAI Agents SDK handoff under the OTel GenAI instrumentation: no span for ``transfer_to_orders_bot``, the
    SDK's answer to it in the next agent's conversation; ``lookup_order`` has its span."""
    sent = json.loads(asks("Where is A-1001?", "transfer_to_orders_bot", "h1", "{}")) + [
        {"role": "tool", "tool_call_id": "h1", "content": '{"assistant": "orders_bot"}'}]
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "l1",
            "gen_ai.tool.call.arguments": '{"order_id": "A-1001"}', "gen_ai.tool.call.result": "shipped"}
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}),
             chat("c1", "a1", 1, "Where is A-1001?", json.dumps(sent[1:2])),
             chat("c2", "a1", 2, json.dumps(sent), asks("x", "lookup_order", "l1", '{"order_id": "A-1001"}')),
             span("t1", "a1", 3, **tool),
             chat("c3", "a1", 4, json.dumps(sent), "Order A-1001 has shipped.")]

    [turn] = assemble(spans)

    assert sorted((c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]) == [
        ("lookup_order", {"order_id": "A-1001"}, "shipped"),
        ("transfer_to_orders_bot", {}, '{"assistant": "orders_bot"}')]


def handed_over(workflow: str, start: int, question: str, *, answer: str = "Order A-1001 has shipped.") -> list[dict]:
    """One request as Google ADK's ``sub_agents`` transfer runs it: the triage agent's model calls transfer_to_agent
    and answers nothing; the orders agent is sent the user's words and then, as user messages ADK writes itself, what
    triage did (``For context: [triage] called tool …``); its model calls lookup_order and answers."""
    said = [{"role": "user", "content": question},
            {"role": "user", "content": "For context: [triage] called tool `transfer_to_agent` with parameters: "
                                        "{'agent_name': 'orders_bot'}"},
            {"role": "user", "content": "For context: [triage] `transfer_to_agent` tool returned result: "
                                        "{'result': None}"}]
    looked = [*said, {"role": "assistant", "tool_calls": [{"id": f"l{start}", "type": "function", "function": {
        "name": "lookup_order", "arguments": '{"order_id": "A-1001"}'}}]},
              {"role": "tool", "tool_call_id": f"l{start}", "content": "shipped"}]
    tool = {"gen_ai.operation.name": "execute_tool"}
    agent = {"gen_ai.operation.name": "invoke_agent"}
    return [span(f"a{start}", workflow, start, **agent, **{"gen_ai.agent.name": "triage"}),
            chat(f"c{start}", f"a{start}", start + 1, question,
                 asks(question, "transfer_to_agent", f"h{start}", '{"agent_name": "orders_bot"}'),
                 **{"gen_ai.agent.name": "triage"}),
            span(f"t{start}", f"a{start}", start + 2, **tool, **{
                "gen_ai.tool.name": "transfer_to_agent", "gen_ai.tool.call.id": f"h{start}",
                "gen_ai.tool.call.arguments": '{"agent_name": "orders_bot"}', "gen_ai.tool.call.result": '{"result": null}'}),
            span(f"b{start}", workflow, start + 3, **agent, **{"gen_ai.agent.name": "orders_bot"}),
            chat(f"d{start}", f"b{start}", start + 4, json.dumps(said), json.dumps(looked[3:4]),
                 **{"gen_ai.agent.name": "orders_bot"}),
            span(f"u{start}", f"b{start}", start + 5, **tool, **{
                "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": f"l{start}",
                "gen_ai.tool.call.arguments": '{"order_id": "A-1001"}', "gen_ai.tool.call.result": "shipped"}),
            chat(f"e{start}", f"b{start}", start + 6, json.dumps(looked), answer, **{"gen_ai.agent.name": "orders_bot"})]


def test_a_hand_over_keeps_the_request_the_entry_agent_was_asked():
    """The user speaks to the run's entry agent; the user messages the framework writes to the agent it hands over
    to (what the agent before did) are not the question, and both agents' calls are the one run's."""
    spans = [span("w1", None, 0, **{"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "triage"}),
             *handed_over("w1", 10, "Where is A-1001?")]

    [turn] = assemble(spans)

    assert (Turn.model_validate({**turn, "agent": "shop"}).question, turn["output"]) == (
        "Where is A-1001?", "Order A-1001 has shipped.")
    assert (turn["span_id"][:2], turn["agent"]) == ("w1", "triage")
    assert [m["role"] for m in turn["input"]] == ["user", "assistant", "tool"]
    assert [(c["name"], c["arguments"], c["result"]) for c in turn["tool_calls"]] == [
        ("transfer_to_agent", {"agent_name": "orders_bot"}, "null"), ("lookup_order", {"order_id": "A-1001"}, "shipped")]


def test_a_hand_over_whose_workflow_span_has_not_arrived_is_one_run_of_the_entry_agent():
    """ADK exports its ``invoke_workflow`` span last: until it comes, the two agents' spans are the trace's tops."""
    [turn] = assemble(handed_over("w1", 10, "Where is A-1001?"))

    assert (Turn.model_validate({**turn, "agent": "shop"}).question, turn["output"]) == (
        "Where is A-1001?", "Order A-1001 has shipped.")
    assert (turn["span_id"][:3], turn["agent"], len(turn["tool_calls"])) == ("a10", "triage", 2)


def test_requests_handed_over_inside_a_conversation_are_a_run_each():
    """A conversation span around two requests, each handed from triage to the orders agent: two runs, not four."""
    spans = [span("s1", None, 0, **{"gen_ai.operation.name": "invoke_workflow", "gen_ai.conversation.id": "conv-1"}),
             *handed_over("s1", 10, "Where is A-1001?"),
             *handed_over("s1", 30, "Can I return A-1002?", answer="Yes, within 30 days.")]

    turns = assemble(spans)

    assert [(Turn.model_validate({**t, "agent": "shop"}).question, t["output"], t["span_id"][:3]) for t in turns] == [
        ("Where is A-1001?", "Order A-1001 has shipped.", "a10"), ("Can I return A-1002?", "Yes, within 30 days.", "a30")]
    assert {t["session_id"] for t in turns} == {"conv-1"}
    assert [len(t["tool_calls"]) for t in turns] == [2, 2]


def test_an_agent_root_without_its_own_messages_takes_the_first_llm_input_and_the_last_llm_output():
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent"}),
             chat("c1", "a1", 1, "What is the refund window?", "let me look"),
             chat("c2", "a1", 50, "tool said 30 days", "30 days.", **{"gen_ai.request.model": "big"})]

    [turn] = assemble(spans)

    assert (turn["input"][-1]["content"], turn["output"], turn["model"]) == ("What is the refund window?", "30 days.",
                                                                              "big")


def test_tool_calls_come_from_the_llm_output_when_the_trace_has_no_tool_spans():
    asked = json.dumps([{"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]}])
    conversation = json.dumps([{"role": "user", "content": "Weather in Oslo?"}, json.loads(asked)[0],
                               {"role": "tool", "tool_call_id": "x", "content": "rain"}])
    spans = [span("a1", None, 0), chat("c1", "a1", 1, "Weather in Oslo?", asked),
             chat("c2", "a1", 20, conversation, "Rain in Oslo.")]

    [turn] = assemble(spans)

    assert (turn["span_id"][:2], turn["output"]) == ("c2", "Rain in Oslo.")
    assert turn["tool_calls"] == [{"name": "weather", "arguments": {"city": "Oslo"}, "id": "x", "result": "rain"}]
    assert turn["input"][1] == {"role": "assistant", "content": "",
                                "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}, "id": "x"}]}
    assert turn["input"][2] == {"role": "tool", "content": "rain", "tool_call_id": "x"}


def test_a_call_that_only_asks_for_a_tool_is_a_step_never_a_turn_with_an_empty_answer():
    asked = json.dumps([{"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]}])

    result = assembly([chat("c1", None, 0, "Weather in Oslo?", asked)])

    assert (result.turns, result.steps) == ([], ["c1".ljust(16, "0")])


def test_a_vigil_reference_attribute_on_any_span_of_the_turn_is_its_reference_answer():
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.prompt": "Refund window?",
                                    "gen_ai.completion": "30 days."}),
             chat("c1", "a1", 1, "Refund window?", "30 days.", **{"vigil.reference": "Thirty days from delivery."})]

    [turn] = assemble(spans)

    assert turn["reference"] == "Thirty days from delivery."


def test_a_span_delivered_twice_counts_once():
    spans = [chat("c1", None, 0, "q?", "a"), chat("c1", None, 0, "q?", "a")]

    assert len(assemble(spans)) == 1


def test_a_trace_without_genai_content_has_no_turns():
    assert assemble([span("a1", None, 0, **{"http.route": "/x"}), span("b1", "a1", 1)]) == []


def test_assembled_turns_are_valid_turns():
    spans = [span("a1", None, 0, **{"openinference.span.kind": "AGENT", "input.value": json.dumps({"input": "hi"}),
                                    "output.value": "hello", "agent.name": "greeter"}),
             span("r1", "a1", 1, **{"openinference.span.kind": "RETRIEVER",
                                    "retrieval.documents.0.document.content": "greetings doc",
                                    "retrieval.documents.0.document.id": 7})]

    [turn] = assemble(spans)

    model = Turn.model_validate(turn)
    assert (model.question, model.output, model.contexts[0].id) == ("hi", "hello", "7")


def test_the_span_processor_makes_one_turn_of_an_in_process_agent_trace(redis_url, make_monitor):  # noqa: F811
    monitor = make_monitor(redis_url)
    provider = TracerProvider()
    provider.add_span_processor(GenAISpanProcessor(monitor))
    tracer = provider.get_tracer("agent")

    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        with tracer.start_as_current_span("plan", attributes={"gen_ai.operation.name": "chat",
                                                             "gen_ai.prompt": "Can I pay by invoice?",
                                                             "gen_ai.completion": "search billing docs"}):
            pass
        with tracer.start_as_current_span("retrieve", attributes={
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.content": "Invoices are accepted for business accounts."}):
            pass
        with tracer.start_as_current_span("answer", attributes={"gen_ai.operation.name": "chat",
                                                               "gen_ai.prompt": "Can I pay by invoice?",
                                                               "gen_ai.completion": "Yes, on business accounts."}):
            pass
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    turn = Turn.model_validate(wire)
    assert turn.span_id == format(root.get_span_context().span_id, "016x")
    assert (turn.question, turn.output) == ("Can I pay by invoice?", "Yes, on business accounts.")
    assert turn.context_texts == ["Invoices are accepted for business accounts."]
    assert monitor.counters().captured == 1


def test_the_span_processor_makes_one_turn_of_a_tool_loop_under_an_http_span_with_the_tool_error(
        redis_url, make_monitor):  # noqa: F811
    from opentelemetry.trace import SpanKind, Status, StatusCode

    monitor = make_monitor(redis_url)
    provider = TracerProvider()
    provider.add_span_processor(GenAISpanProcessor(monitor))
    tracer = provider.get_tracer("web")
    asked = json.dumps([{"role": "assistant", "tool_calls": [
        {"id": "c7", "type": "function", "function": {"name": "stock", "arguments": '{"sku": "K1"}'}}]}])

    with tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER) as root:
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat",
                                                             "gen_ai.prompt": "Is K1 in stock?",
                                                             "gen_ai.completion": asked}):
            pass
        with tracer.start_as_current_span("execute_tool stock", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "stock"}) as tool:
            tool.set_status(Status(StatusCode.ERROR, "inventory service timed out"))
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat",
                                                             "gen_ai.prompt": "Is K1 in stock?",
                                                             "gen_ai.completion": "I could not check."}):
            pass
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    turn = Turn.model_validate(wire)
    assert (turn.span_id, turn.output) == (format(root.get_span_context().span_id, "016x"), "I could not check.")
    assert [(c.name, c.error) for c in turn.tool_calls] == [("stock", "inventory service timed out")]


def test_spans_whose_parent_has_not_arrived_are_one_turn_under_that_parents_id():
    asked = json.dumps([{"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{}"}}]}])
    spans = [chat("c1", "a1", 1, "q?", asked), span("t1", "a1", 5, **{"gen_ai.operation.name": "execute_tool",
                                                                       "gen_ai.tool.name": "f"}),
             chat("c2", "a1", 20, "q?", "the answer")]

    [turn] = assemble(spans)

    assert (turn["span_id"], turn["output"]) == ("a1".ljust(16, "0"), "the answer")
    assert waiting_for_parent(spans) and not waiting_for_parent([{**s, "parent_remote": True} for s in spans])


def test_tool_calls_are_in_start_order_whatever_order_their_spans_arrive_in():
    spans = [span("a1", None, 0, **{"gen_ai.operation.name": "invoke_agent"}),
             span("t2", "a1", 30, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "second",
                                     "error.type": "TimeoutError"}),
             span("t1", "a1", 10, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "first"}),
             chat("c1", "a1", 40, "q?", "done")]

    [turn] = assemble(spans)

    assert [(c["name"], c.get("error")) for c in turn["tool_calls"]] == [("first", None), ("second", "TimeoutError")]


RETRIEVER = {"openinference.span.kind": "RETRIEVER",
             "retrieval.documents.0.document.content": "Orders ship within two business days."}


def agent_root(tracer):
    return tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent",
                                                         "gen_ai.prompt": "When does my order ship?",
                                                         "gen_ai.completion": "Within two business days."})


def test_the_span_processor_waits_for_a_child_that_ends_after_its_root(redis_url, make_monitor):  # noqa: F811
    monitor = make_monitor(redis_url)
    provider = TracerProvider()
    provider.add_span_processor(GenAISpanProcessor(monitor, late_grace_s=600))
    tracer = provider.get_tracer("agent")

    root = agent_root(tracer)
    late = tracer.start_span("retrieve (async)", context=trace.set_span_in_context(root), attributes=RETRIEVER)
    root.end()
    assert monitor.flush(timeout=10) and turns(redis_url) == [], "the root ended, its child not yet"
    late.end()
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    turn = Turn.model_validate(wire)
    assert turn.span_id == format(root.get_span_context().span_id, "016x")
    assert turn.context_texts == ["Orders ship within two business days."]


def test_a_child_ending_after_the_grace_makes_the_trace_assembled_again_under_the_same_turn_id(  # noqa: F811
        redis_url, make_monitor):
    monitor = make_monitor(redis_url)
    provider = TracerProvider()
    provider.add_span_processor(GenAISpanProcessor(monitor, late_grace_s=0.05))
    tracer = provider.get_tracer("agent")

    root = agent_root(tracer)
    late = tracer.start_span("retrieve (streaming)", context=trace.set_span_in_context(root), attributes=RETRIEVER)
    root.end()
    deadline = time.monotonic() + 60  # the grace runs out on the processor's timer thread
    while not turns(redis_url) and time.monotonic() < deadline:
        monitor.flush(timeout=10)
        time.sleep(0.05)
    [first] = turns(redis_url)
    late.end()
    assert monitor.flush(timeout=10)

    first_turn, second_turn = (Turn.model_validate(wire) for wire in turns(redis_url))
    assert first_turn.context_texts == [], "assembled when the grace ran out, without the child"
    assert second_turn.context_texts == ["Orders ship within two business days."], "assembled again, whole"
    assert (first_turn.trace_id, first_turn.span_id) == (second_turn.trace_id, second_turn.span_id)


def test_many_span_batches_within_a_second_schedule_one_sweep(redis_url):
    import redis as redis_client
    from vigil.worker.assembly.traces import schedule_sweep

    client = redis_client.Redis.from_url(redis_url)
    countdowns: list[float] = []
    due = math.floor(time.time()) + 10.25  # 50 batches, 1 ms apart, all due within the same second

    scheduled = [schedule_sweep(client, "vigil.intake.sweep", due + i / 1000, countdowns.append) for i in range(50)]

    assert scheduled.count(True) == 1 and len(countdowns) == 1
    assert countdowns[0] >= 9  # the sweep is not due before the settle delay


def test_a_sweep_that_could_not_be_published_is_scheduled_by_the_retry(redis_url):
    import redis as redis_client
    from vigil.worker.assembly.traces import schedule_sweep

    client = redis_client.Redis.from_url(redis_url)
    due = time.time() + 10

    def refused(countdown: float) -> None:
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        schedule_sweep(client, "vigil.intake.sweep", due, refused)

    assert schedule_sweep(client, "vigil.intake.sweep", due, lambda countdown: None)


def test_a_log_event_delivered_twice_is_attached_to_its_span_once():
    from vigil.schemas.spans import log_record

    chat_span = span("c1", None, 0, **{"gen_ai.operation.name": "chat"})
    choice = {"name": "gen_ai.choice", "time": 5, "attributes": {"message": {"role": "assistant", "content": "Yes."}}}
    asked = {"name": "gen_ai.user.message", "time": 4, "attributes": {"content": "Open on Sunday?"}}
    logs = [log_record(TRACE, chat_span["span_id"], event, {}) for event in (asked, choice, choice)]

    [turn] = assemble([*logs, chat_span])

    assert (turn["input"], turn["output"]) == ([{"role": "user", "content": "Open on Sunday?"}], "Yes.")


def test_a_trace_nested_two_thousand_deep_is_one_turn_under_its_topmost_container():
    tasks = [span(f"{i:04x}", f"{i - 1:04x}" if i else None, i, **{"traceloop.span.kind": "task"})
             for i in range(2000)]

    [turn] = assemble([*tasks, chat("c1", f"{1999:04x}", 3000, "q?", "a")])

    assert (turn["span_id"], turn["output"], turn["metadata"]["spans"]) == ("0000".ljust(16, "0"), "a", "2001")
