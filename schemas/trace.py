"""One agent turn, as the agent hands it to vigil.

Text fields longer than ``MAX_FIELD_CHARS`` are truncated and the truncation is recorded in ``truncated``;
a payload larger than ``MAX_PAYLOAD_BYTES`` is refused with an error naming its largest field (the worker
dead-letters it). Strings must be valid UTF-8: a lone surrogate (what undecodable bytes become) is an error
naming the field.

The wire contract is versioned (``WIRE_VERSION``; a turn without ``schema_version`` is version 1). A field vigil
does not know is an error naming it, unless the turn says it comes from a newer contract: then fields this version
does not know are ignored, so a newer SDK's optional field does not dead-letter every turn at an older worker.
Adding a field to these models: bump ``WIRE_VERSION``.
"""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_FIELD_CHARS = 32_000
MAX_PAYLOAD_BYTES = 2_000_000
WIRE_VERSION = 5  # the turn contract this code speaks (2: origin, 3: a tool call's error, 4: tool call ids and the
# assistant's tool calls in the input messages, 5: the spans' skeleton); a newer one has its unknown fields ignored
MAX_SPANS = 500  # spans a turn's skeleton keeps (the earliest; the intake's per-trace cap is lower by default)

__all__ = [
    "MAX_FIELD_CHARS",
    "MAX_PAYLOAD_BYTES",
    "MAX_SPANS",
    "ORIGINS",
    "ORIGIN_ATTRIBUTE",
    "ORIGIN_HEADER",
    "ORIGIN_METADATA_KEY",
    "RELEASE_KEY",
    "UNLABELLED",
    "WIRE_VERSION",
    "ContextDoc",
    "Message",
    "Origin",
    "SpanSummary",
    "TokenUsage",
    "ToolCall",
    "Turn",
]

Origin = Literal["live", "probe", "follow_up"]
"""Where a turn's traffic came from: ``live`` (real users), ``probe`` (vigil's golden-set probe asking the agent),
``follow_up`` (a multi-turn monitor's follow-up questions). vigil never samples its own traffic again."""
ORIGINS: tuple[str, ...] = ("live", "probe", "follow_up")
ORIGIN_HEADER = "X-Vigil-Origin"  # the HTTP header vigil's own calls to an agent carry; agents pass it to capture()
ORIGIN_METADATA_KEY = "vigil_origin"  # the same, in the OpenAI request's ``metadata``
ORIGIN_ATTRIBUTE = "vigil.origin"  # the same, as a span attribute (read by the span processor and vigil intake)
# The agent's release (a version, a deploy): a metadata key like any other, so it is a segment alerts blame and
# ``vigil compare --by release`` splits by. Set by the SDK's ``release=`` (VIGIL_RELEASE) or, over OpenTelemetry, by
# the resource's ``service.version``; a turn's own metadata says it first.
RELEASE_KEY = "release"
RELEASE_RESOURCE = "service.version"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)




class ContextDoc(_Strict):
    """A retrieved document the agent answered from."""

    text: str
    id: str | None = None
    score: float | None = None


class ToolCall(_Strict):
    """One tool call the agent made. A turn keeps its calls in call order (the OTLP intake orders tool spans by
    start time); ``error`` is the failure's text when the call failed (a tool span's error status), else null."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str | None = None
    error: str | None = None
    id: str | None = Field(default=None, max_length=256)  # the call's id, which its tool message answers


class Message(_Strict):
    """One message of the conversation. An assistant message may ask for tools (``tool_calls``); a tool message
    answers one of them (``tool_call_id``)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = Field(default=None, max_length=256)


class TokenUsage(_Strict):
    prompt_tokens: int = Field(default=0, ge=0, le=2**32 - 1)  # the columns are UInt32
    completion_tokens: int = Field(default=0, ge=0, le=2**32 - 1)


# The environment of a turn whose sender did not say (no `environment=`, no `deployment.environment.name`): never
# taken for production, so a monitor filtered on `environments: [production]` does not score a laptop's test turns.
UNLABELLED = "unlabelled"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SpanSummary(_Strict):
    """One span of the run a turn was made of, as its page draws it: where it sits in the tree, what kind of work it
    was (``schemas.conventions.kind``: agent, chain, step, server, llm, tool, retriever, other), when it started
    after the run's first span and how long it took, and its error if it failed."""

    span_id: str = Field(max_length=64)
    parent_id: str | None = Field(default=None, max_length=64)
    name: str = Field(default="", max_length=256)
    kind: str = Field(default="other", max_length=32)
    start_ms: float = Field(ge=0)
    duration_ms: float = Field(default=0.0, ge=0)
    error: str | None = Field(default=None, max_length=1000)


class Turn(_Strict):
    """One finished agent turn: what was asked, what was answered, and what it was answered from."""

    schema_version: int = Field(default=WIRE_VERSION, ge=1, strict=True)
    trace_id: str = Field(min_length=1, max_length=128)
    span_id: str | None = Field(default=None, max_length=64)
    session_id: str | None = Field(default=None, max_length=256)
    project: str = Field(default="default", min_length=1, max_length=128)
    agent: str = Field(min_length=1, max_length=128)
    environment: str = Field(default=UNLABELLED, min_length=1, max_length=64)
    started_at: datetime = Field(default_factory=_utcnow)
    ended_at: datetime | None = None
    system: str | None = None
    input: list[Message] = Field(min_length=1)
    output: str
    contexts: list[ContextDoc] = Field(default_factory=list)
    reference: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model: str | None = None
    usage: TokenUsage | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    truncated: list[str] = Field(default_factory=list)
    origin: Origin = "live"  # optional on the wire: older senders omit it
    spans: list[SpanSummary] = Field(default_factory=list, max_length=MAX_SPANS)  # from OTLP assembly only

    @model_validator(mode="before")
    @classmethod
    def _limit_size(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        try:
            size = len(json.dumps(data, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            if size > MAX_PAYLOAD_BYTES:
                field, length = _largest_field(data)
                raise ValueError(
                    f"payload is {size} bytes, over the limit of {MAX_PAYLOAD_BYTES}; largest field {field} "
                    f"holds {length} characters"
                )
            version = data.get("schema_version")
            if isinstance(version, int) and not isinstance(version, bool) and version > WIRE_VERSION:
                data = _known_only(data, cls)
            truncated = data.get("truncated") or []
            if not isinstance(truncated, list):  # not a list: the field's own validation names it
                return data
            truncated = list(truncated)
            data = _truncate(data, "", truncated)
        except RecursionError:
            raise ValueError("payload is nested too deeply (or refers to itself)") from None
        if truncated:
            data["truncated"] = truncated
        return data

    @model_validator(mode="after")
    def _valid_utf8(self) -> Turn:
        for path, text in _strings(self.model_dump(mode="python"), ""):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(f"field {path}: invalid UTF-8 (undecodable byte at position {exc.start})") from None
        return self

    @field_validator("started_at", "ended_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @property
    def question(self) -> str:
        """The last user message: what this turn answers."""
        for message in reversed(self.input):
            if message.role == "user":
                return message.content
        return ""

    @property
    def context_texts(self) -> list[str]:
        return [doc.text for doc in self.contexts]


def _known_only(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """``data`` without the keys ``model`` (and the models nested in it) does not declare."""
    kept = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            continue
        inner = _nested_model(field.annotation)
        if inner is not None and isinstance(value, dict):
            value = _known_only(value, inner)
        elif inner is not None and isinstance(value, list):
            value = [_known_only(v, inner) if isinstance(v, dict) else v for v in value]
        kept[key] = value
    return kept


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _nested_model(arg)) is not None:
            return found
    return None


def _truncate(value: Any, path: str, truncated: list[str]) -> Any:
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
        truncated.append(f"{path}:{len(value)}")
        return value[:MAX_FIELD_CHARS]
    if isinstance(value, dict):
        return {k: _truncate(v, f"{path}.{k}" if path else str(k), truncated) for k, v in value.items()}
    if isinstance(value, list):
        return [_truncate(v, f"{path}[{i}]", truncated) for i, v in enumerate(value)]
    return value


def _strings(value: Any, path: str):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _largest_field(data: dict[str, Any]) -> tuple[str, int]:
    best = ("", 0)
    for path, text in _strings(data, ""):
        if len(text) > best[1]:
            best = (path, len(text))
    return best
