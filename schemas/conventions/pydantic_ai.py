"""pydantic-ai's own instrumentation (``Agent.instrument_all()`` / ``instrument=True``, logfire or a plain OTel SDK),
formats 1 to 6 (``InstrumentationSettings(version=...)``). Its LLM and tool spans from format 2 on are the GenAI
conventions' (``schemas.conventions.genai``); this module reads what only pydantic-ai writes.

| what | read from |
| --- | --- |
| span kind | the run: ``agent_name`` with ``pydantic_ai.all_messages``, ``all_messages_events`` or ``final_result`` (format 1 has no ``gen_ai.operation.name``); a tool: ``gen_ai.tool.name`` on a span without an operation |
| messages, format 1 | ``events`` on an LLM span and ``all_messages_events`` on the run: JSON lists of GenAI events (``event.name`` ``gen_ai.user.message`` ... with ``content``, ``tool_calls``, ``id``; ``gen_ai.choice`` with ``message``). Logfire's own instrumentations write a call's ``events`` so too (``logfire.instrument_openai_agents()``), its response as ``gen_ai.assistant.message`` events after what it was sent, no ``gen_ai.choice``: **a call's events with no choice end with its response**, the assistant messages after the last message of another role |
| messages, formats 2-6 | the run's ``pydantic_ai.all_messages`` (GenAI messages of typed parts; its tool results travel as a ``user`` message of ``tool_call_response`` parts: a tool message) and ``final_result`` (text, or the structured output's JSON) |
| a tool span | ``tool_arguments`` / ``tool_response`` (formats 1-2), else the GenAI attributes |
| usage | the run's ``gen_ai.aggregated_usage.input_tokens`` / ``output_tokens`` (its stated totals) |
| content off | ``InstrumentationSettings(include_content=False)`` |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._parse import Io, Msg, json_value, message, msg, text, tool_call

__all__ = ["CLAIM_KEYS", "IO_KEYS", "KIND_KEY", "SETTING", "TOOL_KEYS", "io", "kind", "tool", "usage"]

SETTING = "InstrumentationSettings(include_content=True) (the default)"
KIND_KEY = "agent_name"
_RUN_KEYS = ("pydantic_ai.all_messages", "all_messages_events", "final_result")
CLAIM_KEYS = (KIND_KEY, "events", "gen_ai.tool.name", "tool_arguments")  # ``kind`` claims no span without one
# the keys ``io`` reads a run's or a call's messages from (its ``final_result`` only beside them): it is asked of no
# span with none of them (``conventions.gates``)
IO_KEYS = ("pydantic_ai.all_messages", "all_messages_events", "events")


def kind(attrs: Mapping[str, Any]) -> str | None:
    if "gen_ai.operation.name" in attrs:
        return None  # formats 2-6: the GenAI conventions say
    if "agent_name" in attrs and any(key in attrs for key in _RUN_KEYS):
        return "agent"
    if "events" in attrs and ("gen_ai.request.model" in attrs or "gen_ai.system" in attrs):
        return "llm"
    if "gen_ai.tool.name" in attrs or "tool_arguments" in attrs:
        return "tool"
    return None


def io(span: Mapping[str, Any]) -> Io:
    attrs = span["attributes"]
    if "pydantic_ai.all_messages" in attrs:
        raw = json_value(attrs["pydantic_ai.all_messages"])
        messages = [message(m, "user") for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
        inputs, outputs = _split_answer(messages)
    elif "all_messages_events" in attrs or "events" in attrs:
        inputs, outputs = _events(json_value(attrs.get("all_messages_events", attrs.get("events"))))
        if "all_messages_events" in attrs:
            inputs, outputs = _split_answer([*inputs, *outputs])
        elif not outputs:  # no gen_ai.choice: the response is the assistant's messages after what was sent
            inputs, outputs = _response_last(inputs)
    else:
        return [], [], ""
    final = attrs.get("final_result")
    if final not in (None, ""):  # the run's answer as it handed it back (text, or the structured output's JSON)
        outputs = [msg("assistant", final if isinstance(final, str) else text(final))]
    system = "\n".join(m["content"] for m in inputs if m["role"] == "system" and m["content"])
    return inputs, outputs, system


# ``tool`` reads nothing of a span without one of these (``conventions.gates``)
TOOL_KEYS = ("tool_arguments", "tool_response")


def tool(span: Mapping[str, Any]) -> dict[str, Any] | None:
    attrs = span["attributes"]
    if "tool_arguments" not in attrs and "tool_response" not in attrs:
        return None
    call = tool_call(attrs.get("gen_ai.tool.name") or span["name"], attrs.get("tool_arguments"),
                     attrs.get("gen_ai.tool.call.id"))
    if attrs.get("tool_response") is not None:
        call["result"] = text(attrs["tool_response"])
    return call


def usage(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    return attrs.get("gen_ai.aggregated_usage.input_tokens"), attrs.get("gen_ai.aggregated_usage.output_tokens")


def _split_answer(messages: list[Msg]) -> tuple[list[Msg], list[Msg]]:
    """A whole run's messages as (what was asked, the final answer): the answer is its last assistant text."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant" and m["content"]), default=None)
    if last is None or any(m["role"] == "user" for m in messages[last + 1:]):
        return messages, []
    return messages[:last], [messages[last]]


def _response_last(messages: list[Msg]) -> tuple[list[Msg], list[Msg]]:
    """A model call's messages, what it was sent followed by its response, as (sent, response): the response is the
    assistant messages after the last message of another role (a request ends with the user's words or a tool's
    result)."""
    cut = len(messages)
    while cut and messages[cut - 1]["role"] == "assistant":
        cut -= 1
    return messages[:cut], messages[cut:]


def _events(raw: Any) -> tuple[list[Msg], list[Msg]]:
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    for event in raw if isinstance(raw, list) else []:
        if not isinstance(event, dict):
            continue
        name = str(event.get("event.name", ""))
        if name == "gen_ai.choice":
            body = event.get("message") if isinstance(event.get("message"), dict) else event
            outputs.append(message({"role": "assistant", **body}, "assistant"))
        elif name.startswith("gen_ai.") and name.endswith(".message"):
            role_ = name[len("gen_ai."):-len(".message")]
            inputs.append(message({**event, "role": event.get("role", role_),
                                   "tool_call_id": event.get("tool_call_id", event.get("id"))}, role_))
    return inputs, outputs
