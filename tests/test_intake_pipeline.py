"""Plain OpenTelemetry to scores, on real parts: the OTel SDK's `OTLPSpanExporter` (HTTP/protobuf) -> a real
`vigil intake` process -> Redis -> a real `vigil worker` (settle, assemble, ingest, score, write) -> chDB.

One scenario runs once for the module (a worker run is the slow part): every trace below is exported by the SDK as
an agent would, the pipeline drains, a late span is sent for one assembled trace, the pipeline drains again, and the
worker stops. Each test then reads its own trace's rows back from chDB.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from vigil.worker.pipeline.sampling import sampled
from vigil.worker.store import connect

from tests.pipeline import intake_and_worker, wait_drained

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"
SETTLE_S = 3.0


def messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


class Agent:
    """An instrumented agent: a tracer whose spans go to the intake as they end (one export request each)."""

    def __init__(self, endpoint: str, service: str = "support-bot") -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        self.tracer = self.provider.get_tracer("agent")

    def span(self, name: str, attributes: dict[str, Any], **kwargs: Any):
        return self.tracer.start_as_current_span(name, attributes=attributes, **kwargs)


def ids(span) -> tuple[str, str]:
    context = span.get_span_context()
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def current_genai(agent: Agent) -> tuple[str, str]:
    with agent.span("chat gpt-4o-mini", {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.agent.name": "billing-bot",
        "gen_ai.conversation.id": "conv-1", "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Answer from the invoice only."}]),
        "gen_ai.input.messages": messages("user", "Why was I charged twice?"),
        "gen_ai.output.messages": messages("assistant", "The second charge is a pending hold."),
    }) as span:
        pass
    return ids(span)


def older_events(agent: Agent) -> tuple[str, str]:
    with agent.span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) as span:
        span.add_event("gen_ai.system.message", {"content": "Reply in one word."})
        span.add_event("gen_ai.user.message", {"content": "Capital of Peru?"})
        span.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                         "message": json.dumps({"role": "assistant", "content": "Lima."})})
    return ids(span)


def prompt_completion(agent: Agent) -> tuple[str, str]:
    with agent.span("completion m", {"gen_ai.system": "openai", "gen_ai.prompt": "What is 7 times 6?",
                                     "gen_ai.completion": "42"}) as span:
        pass
    return ids(span)


def openinference_llm(agent: Agent) -> tuple[str, str]:
    with agent.span("ChatCompletion", {
        "openinference.span.kind": "LLM", "llm.model_name": "llama-3-8b", "session.id": "sess-9",
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be terse.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.type": "text",
        "llm.input_messages.1.message.contents.0.message_content.text": "Which planet is largest?",
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Jupiter.",
        "llm.token_count.prompt": 17, "llm.token_count.completion": 2,
    }) as span:
        pass
    return ids(span)


def genai_agent(agent: Agent) -> tuple[str, str]:
    """invoke_agent -> planning chat, retriever, tool, answering chat: one turn."""
    with agent.span("invoke_agent support", {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-bot",
        "gen_ai.conversation.id": "conv-42",
        "gen_ai.input.messages": messages("user", "Can I return a damaged kettle?"),
        "gen_ai.output.messages": messages("assistant", "Yes: damaged items are refunded in full within 30 days."),
    }) as root:
        with agent.span("chat planner", {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "planner-small",
            "gen_ai.input.messages": messages("user", "Plan: Can I return a damaged kettle?"),
            "gen_ai.output.messages": messages("assistant", "search the returns policy"),
        }):
            pass
        with agent.span("retrieve policy", {
            "openinference.span.kind": "RETRIEVER", "input.value": "damaged kettle return",
            "retrieval.documents.0.document.id": "policy-7",
            "retrieval.documents.0.document.content": "Damaged items are refunded in full within 30 days.",
            "retrieval.documents.0.document.score": 0.92,
            "retrieval.documents.1.document.id": "policy-2",
            "retrieval.documents.1.document.content": "Returns need the order number.",
            "retrieval.documents.1.document.score": 0.41,
        }):
            pass
        with agent.span("execute_tool lookup_order", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
            "gen_ai.tool.call.arguments": json.dumps({"order": "A-17"}), "gen_ai.tool.call.result": "delivered",
        }):
            pass
        with agent.span("chat answer", {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "answerer-large",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Answer from the policy."}]),
            "gen_ai.input.messages": messages("user", "Can I return a damaged kettle?"),
            "gen_ai.output.messages": messages("assistant", "Yes: damaged items are refunded in full within 30 days."),
            "gen_ai.usage.input_tokens": 300, "gen_ai.usage.output_tokens": 25,
        }):
            pass
    return ids(root)


def openinference_chain(agent: Agent) -> tuple[str, str]:
    with agent.span("query", {"openinference.span.kind": "CHAIN", "agent.name": "docs-bot",
                              "input.value": "How do I rotate the API key?",
                              "output.value": "Open Settings, then Keys, then Rotate."}) as root:
        with agent.span("retrieve", {"openinference.span.kind": "RETRIEVER",
                                     "retrieval.documents.0.document.content": "Keys are rotated under Settings."}):
            pass
        with agent.span("llm", {"openinference.span.kind": "LLM", "llm.model_name": "mistral-7b",
                                "input.value": "How do I rotate the API key?",
                                "output.value": "Open Settings, then Keys, then Rotate."}):
            pass
    return ids(root)


def slow_agent(agent: Agent) -> tuple[str, str]:
    """The LLM call is exported well before its agent root, within the settle delay."""
    with agent.span("invoke_agent slow", {"gen_ai.operation.name": "invoke_agent",
                                          "gen_ai.input.messages": messages("user", "Is the shop open on Sunday?"),
                                          "gen_ai.output.messages": messages("assistant", "Yes, 10 to 4.")}) as root:
        with agent.span("chat", {"gen_ai.operation.name": "chat",
                                 "gen_ai.input.messages": messages("user", "Is the shop open on Sunday?"),
                                 "gen_ai.output.messages": messages("assistant", "Yes, 10 to 4.")}):
            pass
        time.sleep(SETTLE_S / 2)
    return ids(root)


def late_agent_first_part(agent: Agent) -> tuple[str, str]:
    question, answer = messages("user", "What does shipping cost?"), messages("assistant", "Shipping is free.")
    root = agent.span("invoke_agent late", {"gen_ai.operation.name": "invoke_agent",
                                            "gen_ai.input.messages": question, "gen_ai.output.messages": answer})
    chat = agent.span("chat", {"gen_ai.operation.name": "chat",
                               "gen_ai.input.messages": question, "gen_ai.output.messages": answer})
    with root as root_span, chat:
        pass
    return ids(root_span)


def late_retriever(agent: Agent, trace_id: str, root_span_id: str) -> None:
    parent = SpanContext(int(trace_id, 16), int(root_span_id, 16), is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with agent.span("retrieve late", {"openinference.span.kind": "RETRIEVER",
                                      "retrieval.documents.0.document.content": "Shipping is free over 20 euros."},
                    context=trace.set_span_in_context(NonRecordingSpan(parent))):
        pass


SCENARIO = {"current_genai": current_genai, "older_events": older_events, "prompt_completion": prompt_completion,
            "openinference_llm": openinference_llm, "genai_agent": genai_agent,
            "openinference_chain": openinference_chain, "slow_agent": slow_agent, "late": late_agent_first_part}


@pytest.fixture(scope="module")
def scenario(redis_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("intake-pipeline")
    with intake_and_worker(redis_server.url, home, CONFIG, VIGIL_INTAKE_SETTLE_S=str(SETTLE_S)) as (intake, worker):
        agent = Agent(f"{intake.url}/v1/traces")
        sent = {name: make(agent) for name, make in SCENARIO.items()}
        wait_drained(redis_server.url, worker)
        assert redis.Redis.from_url(redis_server.url).zcard("vigil.intake.pending") == 0
        late_retriever(agent, *sent["late"])
        wait_drained(redis_server.url, worker)
    store = connect(worker.dsn)
    yield sent, store
    store.close()


def turns_of(store, trace_id: str) -> list[dict[str, Any]]:
    result = store.query("SELECT span_id, agent, session_id, system, question, output, contexts_json, "
                         "tool_calls_json, model, prompt_tokens, completion_tokens, input_json "
                         "FROM traces FINAL WHERE trace_id = {t:String} ORDER BY span_id", parameters={"t": trace_id})
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def test_a_current_genai_chat_span_is_one_turn_with_its_own_ids(scenario):
    sent, store = scenario
    trace_id, span_id = sent["current_genai"]

    [turn] = turns_of(store, trace_id)

    assert turn["span_id"] == span_id
    assert (turn["agent"], turn["session_id"], turn["model"]) == ("billing-bot", "conv-1", "gpt-4o-mini-2024-07-18")
    assert (turn["system"], turn["question"]) == ("Answer from the invoice only.", "Why was I charged twice?")
    assert turn["output"] == "The second charge is a pending hold."
    assert (turn["prompt_tokens"], turn["completion_tokens"]) == (120, 30)


def test_the_older_genai_span_events_are_read(scenario):
    sent, store = scenario

    [turn] = turns_of(store, sent["older_events"][0])

    assert (turn["system"], turn["question"], turn["output"]) == ("Reply in one word.", "Capital of Peru?", "Lima.")
    assert turn["agent"] == "support-bot"  # the resource's service.name


def test_gen_ai_prompt_and_completion_are_read(scenario):
    sent, store = scenario

    [turn] = turns_of(store, sent["prompt_completion"][0])

    assert (turn["question"], turn["output"]) == ("What is 7 times 6?", "42")


def test_an_openinference_llm_span_is_read(scenario):
    sent, store = scenario

    [turn] = turns_of(store, sent["openinference_llm"][0])

    assert (turn["system"], turn["question"], turn["output"]) == ("Be terse.", "Which planet is largest?", "Jupiter.")
    assert (turn["model"], turn["session_id"]) == ("llama-3-8b", "sess-9")
    assert (turn["prompt_tokens"], turn["completion_tokens"]) == (17, 2)


def test_an_agent_trace_with_two_llm_calls_a_retriever_and_a_tool_is_exactly_one_turn(scenario):
    sent, store = scenario
    trace_id, root_span_id = sent["genai_agent"]

    [turn] = turns_of(store, trace_id)

    assert turn["span_id"] == root_span_id
    assert (turn["agent"], turn["session_id"]) == ("support-bot", "conv-42")
    assert turn["question"] == "Can I return a damaged kettle?"
    assert turn["output"] == "Yes: damaged items are refunded in full within 30 days."
    assert [(d["id"], d["text"], d["score"]) for d in json.loads(turn["contexts_json"])] == [
        ("policy-7", "Damaged items are refunded in full within 30 days.", 0.92),
        ("policy-2", "Returns need the order number.", 0.41)]
    assert [(c["name"], c["arguments"], c["result"]) for c in json.loads(turn["tool_calls_json"])] == [
        ("lookup_order", {"order": "A-17"}, "delivered")]
    # the last LLM call gives the system prompt, the model and the usage; not the planner's
    assert (turn["system"], turn["model"]) == ("Answer from the policy.", "answerer-large")
    assert (turn["prompt_tokens"], turn["completion_tokens"]) == (300, 25)


def test_the_agent_trace_is_scored_once_per_monitor(scenario):
    sent, store = scenario
    trace_id, root_span_id = sent["genai_agent"]

    rows = store.query("SELECT monitor, span_id, status FROM scores FINAL WHERE trace_id = {t:String}",
                       parameters={"t": trace_id}).result_rows

    expected = ["relevancy", "relevancy-half"] if sampled(trace_id, 0.5) else ["relevancy"]
    assert sorted(r[0] for r in rows) == expected
    assert all(r[1] == root_span_id and r[2] == "scored" for r in rows)


def test_an_openinference_chain_root_is_one_turn_with_its_retrieved_documents(scenario):
    sent, store = scenario
    trace_id, root_span_id = sent["openinference_chain"]

    [turn] = turns_of(store, trace_id)

    assert (turn["span_id"], turn["agent"], turn["model"]) == (root_span_id, "docs-bot", "mistral-7b")
    assert (turn["question"], turn["output"]) == ("How do I rotate the API key?",
                                                   "Open Settings, then Keys, then Rotate.")
    assert [d["text"] for d in json.loads(turn["contexts_json"])] == ["Keys are rotated under Settings."]


def test_spans_arriving_within_the_settle_delay_make_one_turn_under_the_root(scenario):
    sent, store = scenario
    trace_id, root_span_id = sent["slow_agent"]

    assert [t["span_id"] for t in turns_of(store, trace_id)] == [root_span_id]


def test_a_late_span_reassembles_its_trace_under_the_same_turn_id_replacing_the_scores(scenario):
    sent, store = scenario
    trace_id, root_span_id = sent["late"]

    [turn] = turns_of(store, trace_id)
    scores = store.query("SELECT monitor, count() FROM scores FINAL WHERE trace_id = {t:String} GROUP BY monitor",
                         parameters={"t": trace_id}).result_rows

    assert turn["span_id"] == root_span_id
    assert [d["text"] for d in json.loads(turn["contexts_json"])] == ["Shipping is free over 20 euros."]
    assert scores and all(count == 1 for _, count in scores)
