"""A chat completion as vigil reads it off the wire: the reply text and the usage, nothing more.

The transport sends the request body it built through the ``openai`` client's plain ``post`` and takes the
response's bytes (``cast_to=bytes``): the client still times the request out, and still raises its typed errors
for 4xx/5xx answers, timeouts and connection failures. What it no longer does per call is walk every nested dict of
the body through its parameter transform (a no-op for vigil's plain dicts) and build its full ``ChatCompletion``
model; this module validates the few fields vigil uses from the raw JSON in one pass (pydantic-core). A body that
is not a chat completion (HTML from a proxy, a truncated JSON) raises ``ValueError``.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["Completion", "Usage"]


class _PromptDetails(BaseModel):
    cached_tokens: int | None = None


class Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None

    @property
    def cached_prompt_tokens(self) -> int:
        """``prompt_tokens_details.cached_tokens``: the prompt tokens the provider's prefix cache served (0 when
        the endpoint does not say), never more than the prompt."""
        details = self.prompt_tokens_details
        cached = details.cached_tokens if details else None
        return min(max(int(cached or 0), 0), self.prompt_tokens or 0)


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message


class Completion(BaseModel):
    """The fields of an OpenAI chat completion vigil reads (every other field is ignored)."""

    choices: list[_Choice]
    usage: Usage | None = None

    @classmethod
    def parse(cls, raw: bytes) -> Completion:
        """The completion in a response body; ``ValueError`` (pydantic's ``ValidationError``) when it is not one."""
        return cls.model_validate_json(raw)

    @property
    def text(self) -> str:
        """The first choice's content ("" when there is none)."""
        return (self.choices[0].message.content or "") if self.choices else ""
