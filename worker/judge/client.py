"""The LLM judge: structured output over any OpenAI-compatible endpoint, degrading gracefully.

Modes, best first: ``json_schema`` (strict), ``json_object`` with the schema (what llama.cpp's server takes; it
answers 500 to ``json_schema``), then plain text from which the last JSON object is taken. The first mode that
works for an endpoint (base_url + model) is remembered for the life of the process; a remembered mode that is
later refused falls through to the next, which is then remembered. The schema is said once: ``json_schema`` carries
it in the response format (the provider shows it to the model), the other modes state it after the instructions,
so the system message stays the same for every call of a step (a static prefix the provider can cache).

The reply is validated against the request's pydantic model. One repair attempt sends the validation error
back; if that reply fails too, the answer is ``JudgeReply(output=None, error="parse_error: …")`` with the raw
reply kept, which scorers turn into *unscored*. Every HTTP request made is in ``JudgeReply.calls``.
"""

from __future__ import annotations

import functools
import json
import re
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from vigil.schemas import JudgeCall, JudgeConfig
from vigil.worker.judge.base import JudgeFailed, JudgeReply, JudgeRequest
from vigil.worker.judge.transport import ModeRejected, JudgeTransport

__all__ = ["LLMJudge", "Mode", "last_json_object", "parse_output", "remembered_mode", "strict_schema"]

T = TypeVar("T", bound=BaseModel)


class Mode(StrEnum):
    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    TEXT = "text"


_ORDER = (Mode.JSON_SCHEMA, Mode.JSON_OBJECT, Mode.TEXT)
_MODES: dict[tuple[str, str], Mode] = {}  # (base_url, model) -> the first mode that worked

SCHEMA_INSTRUCTION = "Reply with one JSON object, and nothing else, that matches this JSON schema:\n{schema}"
REPAIR_PROMPT = (
    "Your reply could not be used: {error}\n"
    "Reply again with only the corrected JSON object, matching the schema exactly."
)
_CODE_FENCE = re.compile(r"```[A-Za-z0-9_-]*")


def remembered_mode(base_url: str, model: str) -> Mode | None:
    """The structured-output mode this process found working for an endpoint, if any yet."""
    return _MODES.get((base_url, model))


@functools.cache
def strict_schema(output_type: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema in OpenAI's strict form: every property required, no extra ones, no defaults.

    Built once per output type (the same dict every time: do not mutate it)."""

    def tighten(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: tighten(v) for k, v in node.items() if k not in ("title", "default")}
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            return node
        if isinstance(node, list):
            return [tighten(v) for v in node]
        return node

    return tighten(output_type.model_json_schema())


def last_json_object(text: str) -> dict[str, Any]:
    """The last top-level JSON object in ``text`` (code fences ignored). Raises ValueError when there is none."""
    text = _CODE_FENCE.sub("", text)
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found = value
        position = text.find("{", end)
    if found is None:
        raise ValueError("no JSON object in the reply")
    return found


def parse_output(text: str, output_type: type[T]) -> T:
    """The reply's last JSON object validated as ``output_type``. Raises ValueError saying what is wrong."""
    data = last_json_object(text)
    try:
        return output_type.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(root)'}: {error['msg']}" for error in exc.errors()[:8]
        )
        raise ValueError(f"the JSON does not match the schema ({problems})") from None


@functools.cache
def _schema_instruction(output_type: type[BaseModel]) -> str:
    schema = json.dumps(strict_schema(output_type), ensure_ascii=False, separators=(",", ":"))
    return SCHEMA_INSTRUCTION.format(schema=schema)


@functools.lru_cache(maxsize=1024)
def _response_format(mode: Mode, step: str, output_type: type[BaseModel]) -> dict[str, Any] | None:
    """What ``mode`` sends as ``response_format`` for a step: built once per (mode, step, output type), the same
    dict on every call (do not mutate it)."""
    schema = strict_schema(output_type)
    if mode is Mode.JSON_SCHEMA:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", step)[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode is Mode.JSON_OBJECT:
        return {"type": "json_object", "schema": schema}
    return None


class LLMJudge:
    """A judge backed by an OpenAI-compatible chat endpoint."""

    def __init__(self, config: JudgeConfig, transport: JudgeTransport | None = None) -> None:
        self.config = config
        self.name = config.name
        self.model = config.model
        self.transport = transport or JudgeTransport(config)
        self._endpoint = (config.base_url or "", config.model)

    async def ask(self, request: JudgeRequest[T]) -> JudgeReply[T]:
        stated = request.instructions + "\n\n" + _schema_instruction(request.output_type)
        messages = [{"role": "system", "content": request.instructions}, {"role": "user", "content": request.prompt}]
        calls: list[JudgeCall] = []
        raw = await self._complete(request, messages, calls, stated)
        try:
            return JudgeReply(output=parse_output(raw, request.output_type), raw=raw, calls=calls)
        except ValueError as exc:
            calls[-1] = calls[-1].model_copy(update={"status": "parse_error"})
            first_error = str(exc)
        messages += [{"role": "assistant", "content": raw},
                     {"role": "user", "content": REPAIR_PROMPT.format(error=first_error)}]
        raw = await self._complete(request, messages, calls, stated)
        try:
            return JudgeReply(output=parse_output(raw, request.output_type), raw=raw, calls=calls)
        except ValueError as exc:
            calls[-1] = calls[-1].model_copy(update={"status": "parse_error"})
            return JudgeReply(output=None, raw=raw, calls=calls,
                              error=f"parse_error: {exc} (after one repair; first reply: {first_error})")

    async def aclose(self) -> None:
        """Close the HTTP client (before the event loop that used it closes)."""
        await self.transport.client.close()

    async def _complete(
        self, request: JudgeRequest[Any], messages: list[dict[str, str]], calls: list[JudgeCall], stated: str,
    ) -> str:
        """One completion in the best mode the endpoint takes; refused modes are recorded and skipped. The request's
        call context reaches the transport: its monitor for fairness, its scorer version for the cache key. Outside
        ``json_schema`` the system message is ``stated``: the instructions followed by the schema."""
        step, context = request.step, request.context
        remembered = _MODES.get(self._endpoint)
        modes = _ORDER[_ORDER.index(remembered):] if remembered else _ORDER
        for mode in modes:
            sent = messages if mode is Mode.JSON_SCHEMA else [{"role": "system", "content": stated}, *messages[1:]]
            try:
                result = await self.transport.chat(
                    step=step, messages=sent, response_format=_response_format(mode, step, request.output_type),
                    monitor=context.monitor, cache_key_extra=context.cache_tag,
                )
            except ModeRejected:
                calls.append(JudgeCall(step=step, model=self.model, status=f"mode_rejected:{mode}"))
                continue
            except JudgeFailed as exc:
                raise JudgeFailed(exc.error_type, str(exc), calls=[*calls, *exc.calls]) from exc
            _MODES[self._endpoint] = mode
            calls.extend(result.calls)
            return result.text
        raise AssertionError("text mode sends no response_format, so it cannot be refused")
