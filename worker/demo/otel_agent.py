"""The demo's plain-OpenTelemetry agent: replays recorded support-bot turns as an instrumented RAG agent would trace
them, with the OpenTelemetry SDK only (no vigil code: this module imports nothing of vigil's), exported with
``OTLPSpanExporter`` (HTTP/protobuf) to ``vigil intake``.

Each turn is one trace of four spans (and one more per tool call), with GenAI semantic-convention and OpenInference attributes:

- ``invoke_agent support-bot`` (the root: ``gen_ai.operation.name = invoke_agent``, ``gen_ai.agent.name``,
  ``gen_ai.conversation.id``, the conversation as ``gen_ai.input.messages`` and the answer as
  ``gen_ai.output.messages``), with three children:
- ``chat <model>``, the planning call: the question in, a search query out;
- ``retrieve knowledge-base``, the retriever (OpenInference ``RETRIEVER``: ``input.value`` and
  ``retrieval.documents.N.document.{id,content,score}``);
- ``execute_tool <name>`` for each tool the bot called (the order tools: ``gen_ai.tool.name``, the arguments and the
  result, and an error status with ``error.type`` when the call failed), one after the other;
- ``chat <model>``, the answering call: ``gen_ai.system_instructions``, the messages, ``gen_ai.response.model`` and
  the token usage.

The resource says ``service.name``, ``deployment.environment.name`` and ``vigil.project``; a recorded reference answer
(the demo's ground truth, not something a live agent knows) rides on the root as ``vigil.reference``. The span times
are the recorded ones, and the trace and root span ids too (an ``IdGenerator``, the SDK's own extension point), so
the replay is the same traffic every time: the same turns sampled, the same rows.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode, set_span_in_context

__all__ = ["export_turns"]


class _RecordedIds(IdGenerator):
    """The next trace's recorded trace id and root span id; random span ids for the children."""

    def __init__(self) -> None:
        self.trace_id = self.root_span_id = 0
        self._random = random.Random(0)

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        span_id, self.root_span_id = self.root_span_id, 0
        return span_id or self._random.getrandbits(64) or 1


def _ns(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1e9)


def _messages(messages: Iterable[dict[str, Any]]) -> str:
    return json.dumps([{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages],
                      ensure_ascii=False)


def export_turns(turns: list[dict[str, Any]], endpoint: str, *, service: str) -> int:
    """Trace each turn as the agent ``service`` and export the spans to ``endpoint`` (``…/v1/traces``); returns how
    many traces were exported. Raises RuntimeError when the exporter could not deliver them all."""
    ids = _RecordedIds()
    first = turns[0] if turns else {}
    resource = Resource.create({"service.name": service, "vigil.project": first.get("project", ""),
                                "deployment.environment.name": first.get("environment", "")})
    provider = TracerProvider(resource=resource, id_generator=ids)
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=30)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=256, schedule_delay_millis=200))
    tracer = provider.get_tracer("acme.support-bot")
    try:
        for turn in turns:
            ids.trace_id, ids.root_span_id = int(turn["trace_id"], 16), int(turn["span_id"], 16)
            _trace(tracer, turn, service)
        if not provider.force_flush(60_000):
            raise RuntimeError(f"the OpenTelemetry exporter did not deliver every span to {endpoint}")
    finally:
        provider.shutdown()
    return len(turns)


def _trace(tracer, turn: dict[str, Any], agent: str) -> None:
    start, end = _ns(turn["started_at"]), _ns(turn.get("ended_at") or turn["started_at"])
    step = max(end - start, 4) // 20  # the children's times, in twentieths of the turn
    question = next(m["content"] for m in reversed(turn["input"]) if m["role"] == "user")
    model = turn.get("model", "")
    output = [{"role": "assistant", "content": turn.get("output", "")}]
    root_attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
        "gen_ai.input.messages": _messages(turn["input"]), "gen_ai.output.messages": _messages(output),
    }
    if turn.get("session_id"):
        root_attributes["gen_ai.conversation.id"] = turn["session_id"]
    if turn.get("reference"):
        root_attributes["vigil.reference"] = turn["reference"]
    root = tracer.start_span(f"invoke_agent {agent}", attributes=root_attributes, start_time=start)
    context = set_span_in_context(root)

    def child(name: str, attributes: dict[str, Any], begin: int, finish: int, error: str | None = None) -> None:
        span = tracer.start_span(name, context=context, attributes=attributes, start_time=start + begin * step)
        if error:
            span.set_attribute("error.type", error.split(":")[0])
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=start + finish * step)

    child(f"chat {model}", {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
        "gen_ai.input.messages": _messages([{"role": "user", "content": question}]),
        "gen_ai.output.messages": _messages([{"role": "assistant", "content": f"search the knowledge base: {question}"}]),
    }, 1, 3)
    documents: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for n, doc in enumerate(turn.get("contexts") or ()):
        documents[f"retrieval.documents.{n}.document.content"] = doc["text"]
        if doc.get("id") is not None:
            documents[f"retrieval.documents.{n}.document.id"] = doc["id"]
        if doc.get("score") is not None:
            documents[f"retrieval.documents.{n}.document.score"] = doc["score"]
    child("retrieve knowledge-base", documents, 3, 5)
    tools = turn.get("tool_calls") or ()
    for n, call in enumerate(tools):
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call["name"],
                      "gen_ai.tool.call.arguments": json.dumps(call.get("arguments") or {})}
        if call.get("result") is not None:
            attributes["gen_ai.tool.call.result"] = call["result"]
        child(f"execute_tool {call['name']}", attributes, 5 + n, 6 + n, error=call.get("error"))
    answering = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.response.model": model,
        "gen_ai.input.messages": _messages(turn["input"]), "gen_ai.output.messages": _messages(output),
    }
    if turn.get("system"):
        answering["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": turn["system"]}],
                                                             ensure_ascii=False)
    usage = turn.get("usage") or {}
    for key, attribute in (("prompt_tokens", "gen_ai.usage.input_tokens"),
                           ("completion_tokens", "gen_ai.usage.output_tokens")):
        if usage.get(key) is not None:
            answering[attribute] = usage[key]
    child(f"chat {model}", answering, 5 + len(tools), 19)
    root.end(end_time=end)
