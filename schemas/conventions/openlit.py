"""openlit: GenAI attributes, with the messages flattened to role-prefixed text (before 1.35), or the current GenAI
conventions' messages (``gen_ai.input.messages`` / ``gen_ai.output.messages``, read by ``schemas.conventions.genai``).

| what | read from |
| --- | --- |
| which spans | ``telemetry.sdk.name = openlit`` on the span, or a ``gen_ai.prompt`` whose text starts with a role prefix |
| current format | a span that carries ``gen_ai.input.messages`` or ``gen_ai.output.messages`` is read by ``genai`` alone: the flattened forms beside them (``gen_ai.tool.name`` / ``gen_ai.tool.args`` on an LLM span) say less (one tool of a parallel step, no arguments) |
| runs | ``invoke_workflow`` (``gen_ai.workflow.name``): the run of a LangGraph graph or an OpenAI Agents SDK trace, its agents' and tools' spans under it (``genai``: an agent span, also when it failed before OpenLIT set its operation); each agent's creation, ``create_agent <name>``, is a trace of its own with no LLM call |
| a streamed LangGraph run | its workflow span (``gen_ai.execution.mode = stream``) states as its output every chunk of the stream joined, the tool messages' among them: a root's answer that wraps the model's, which loses to the answering call's text (``schemas.spans``, *answer*) |
| the OpenAI Agents SDK, streamed | no model call is exported (``Runner.run_streamed``: the openai client's spans never end; the HTTP spans under them name a parent that never comes) and the SDK's own spans carry no messages: no turn, "no LLM call" |
| LangChain's tool spans | ``gen_ai.tool.call.arguments`` as a printed Python dict (``{'order_id': …}``), ``gen_ai.tool.call.result`` as the printed ``ToolMessage`` (``content='…' name='…' tool_call_id='…'``): read as the object and as the message's content (``_parse.tool_call``, ``_parse.result_text``) |
| messages | ``gen_ai.prompt`` (and the ``gen_ai.content.prompt`` event's): ``"system: …\\nuser: …\\ntool: …"``, one message per role-prefixed line, continuation lines kept with theirs; openlit writes an assistant message that asked for tools as a ``user:`` line holding the whole message list in Python notation, which is read as the conversation (its tool calls and ids kept); ``gen_ai.completion`` the answer |
| a step's tool call | ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.args`` on the LLM span that asked for it |
| the rest | as ``schemas.conventions.genai`` (operation, model, usage, tool and retrieval spans) |
| content off | ``openlit.init(capture_message_content=False)`` (default True), or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=false``, which ``openlit.init`` obeys |
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from ._parse import Io, Msg, message, msg, role, tool_call

__all__ = ["CLAIM_KEYS", "SETTING", "claims", "io"]

SETTING = ("openlit.init(capture_message_content=True) (the default), with "
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT not set to false (OpenLIT obeys it)")
_PREFIX = re.compile(r"^(system|user|assistant|tool|developer|human|ai|function): ?", re.IGNORECASE)
_LIST_REPR_LIMIT = 200_000
_CURRENT = frozenset({"gen_ai.input.messages", "gen_ai.output.messages"})
_SDK = "telemetry.sdk.name"
CLAIM_KEYS = (_SDK, "gen_ai.prompt")  # ``claims`` claims no span without one of these (``conventions.gates``)


def claims(span: Mapping[str, Any]) -> bool:
    attrs = span["attributes"]
    if attrs.get(_SDK) == "openlit":
        return True
    prompt = attrs.get("gen_ai.prompt")
    return isinstance(prompt, str) and bool(_PREFIX.match(prompt))


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    if _CURRENT.intersection(attrs):
        return [], [], ""  # the current GenAI messages: genai's to read, whole
    prompt, completion = attrs.get("gen_ai.prompt"), attrs.get("gen_ai.completion")
    for event in span.get("events") or ():
        event_attrs = event.get("attributes") or {}
        if event["name"] == "gen_ai.content.prompt" and prompt in (None, ""):
            prompt = event_attrs.get("gen_ai.prompt")
        elif event["name"] == "gen_ai.content.completion" and completion in (None, ""):
            completion = event_attrs.get("gen_ai.completion")
    inputs = split(prompt) if isinstance(prompt, str) else []
    outputs = [msg("assistant", completion)] if isinstance(completion, str) and completion else []
    if attrs.get("gen_ai.tool.name"):  # the call asked for a tool: that is its output
        names = str(attrs["gen_ai.tool.name"]).split(", ")
        ids = str(attrs.get("gen_ai.tool.call.id") or "").split(", ")
        args = str(attrs.get("gen_ai.tool.args") or "")
        calls = [tool_call(name, args if len(names) == 1 else None, ids[i] if i < len(ids) else None)
                 for i, name in enumerate(names)]
        outputs = [*outputs, msg("assistant", "", calls)] if not outputs else [{**outputs[0], "tool_calls": calls}]
    return inputs, outputs, ""


def split(prompt: str) -> list[Msg]:
    """``"system: …\nuser: …"`` as messages. A line holding the whole message list in Python notation (how openlit
    writes a conversation with an assistant's tool calls) is read as that list: it keeps the tool calls and ids."""
    out: list[Msg] = []
    for line in prompt.split("\n"):
        match = _PREFIX.match(line)
        if match or not out:
            out.append(msg(role(match.group(1), "user") if match else "user", line[match.end():] if match else line))
        else:
            out[-1]["content"] += "\n" + line
    for candidate in out:
        listed = _message_list(candidate["content"])
        if listed is not None:
            return [message(m, "user") for m in listed]
    return out


def _message_list(content: str) -> list[dict[str, Any]] | None:
    """openlit's rendering of a message list (Python notation) inside one line: ``[{'role': 'system', …}, …]``."""
    if not content.startswith("[{") or len(content) > _LIST_REPR_LIMIT:
        return None
    try:
        value = ast.literal_eval(content)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return value
    return None
