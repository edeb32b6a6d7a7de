"""One chat completion against an OpenAI-compatible endpoint, through the real ``openai`` async client.

The transport owns everything between "send these messages" and "here is the text": (later) the global rate
limit, retries with backoff, pausing, the reply cache and the per-call accounting. The structured-output layer
above it (``worker.judge.client``) owns prompts' response formats and parsing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import openai

from schemas import JudgeCall, JudgeConfig
from worker.judge.base import JudgeFailed, JudgePaused

__all__ = ["ChatResult", "ModeRejected", "Transport"]


class ModeRejected(Exception):
    """The server refused the request's ``response_format`` (HTTP 400/422/500 with it set)."""


@dataclass
class ChatResult:
    text: str
    calls: list[JudgeCall] = field(default_factory=list)


class Transport:
    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=os.environ.get(config.api_key_env) or "not-needed",
            timeout=config.timeout_s,
            max_retries=0,
        )

    async def chat(
        self, *, step: str, messages: list[dict[str, str]], response_format: dict[str, Any] | None = None
    ) -> ChatResult:
        """Send one chat completion. Raises ``ModeRejected`` when the server refuses ``response_format``,
        ``JudgePaused`` on 401/402/404, ``JudgeFailed`` otherwise."""
        kwargs: dict[str, Any] = {"model": self.config.model, "messages": messages,
                                  "temperature": self.config.temperature}
        if response_format is not None:
            kwargs["response_format"] = response_format
        started = time.perf_counter()
        try:
            completion = await self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status in (401, 402, 404):
                raise JudgePaused(self.config.name, f"HTTP {status}: {exc.message}") from exc
            if response_format is not None and status in (400, 422, 500):
                raise ModeRejected(str(exc)) from exc
            raise JudgeFailed(f"http_{status}", str(exc)) from exc
        except openai.APITimeoutError as exc:
            raise JudgeFailed("timeout", str(exc)) from exc
        except openai.APIConnectionError as exc:
            raise JudgeFailed("connection_error", str(exc)) from exc
        latency_ms = (time.perf_counter() - started) * 1000
        usage = completion.usage
        prompt_tokens = usage.prompt_tokens if usage else 0
        completion_tokens = usage.completion_tokens if usage else 0
        text = completion.choices[0].message.content or "" if completion.choices else ""
        call = JudgeCall(
            step=step,
            model=self.config.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=prompt_tokens * self.config.price_per_prompt_token
            + completion_tokens * self.config.price_per_completion_token,
            latency_ms=latency_ms,
        )
        return ChatResult(text=text, calls=[call])
