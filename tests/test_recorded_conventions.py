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


def test_without_captured_content_each_run_is_a_turn_marked_with_the_setting_that_turns_it_on():
    turns, steps = turns_of("openai_v2_no_content.json")

    assert len(turns) == 2 and steps == 0
    assert all(t.metadata["vigil.content"] == "missing" for t in turns)
    assert all("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in t.metadata["vigil.content_setting"]
               for t in turns)
