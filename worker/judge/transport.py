"""One chat completion against an OpenAI-compatible endpoint, through the real ``openai`` async client.

The transport owns everything between "send these messages" and "here is the text": the pause check, the reply
cache, the global rate limit (``limiter``), retries with backoff (``backoff``) and one ``JudgeCall`` per attempt.
The structured-output layer above it (``vigil.worker.judge.client``) owns prompts' response formats and parsing.

Each attempt is the client's plain ``post`` of the body built here, read back as bytes (``vigil.worker.judge.completion``):
the client's timeout and typed errors stay, its per-call parameter transform and full ``ChatCompletion`` model go
(they were most of a judge call's CPU: ``bench/judge_call.py``). The body is the one ``chat.completions.create``
would send for the same arguments.

Shared state (limiter buckets, pauses) lives in Redis: the ``redis`` argument, else ``REDIS_URL``. Without either, a
transport still retries and caps concurrency, but its rate limit and pause are off. Cached replies never live in the
broker's Redis: in ``VIGIL_CACHE_URL``'s, else in the process within a byte budget (``vigil.worker.judge.cache``).
Make one transport per judge per process: ``max_concurrency`` and the per-monitor queues are the transport's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError
from vigil.schemas import JudgeCall, JudgeConfig
from vigil.schemas.broker import broker
from vigil.worker.judge.backoff import parse_retry_after, retry_delay
from vigil.worker.judge.base import JudgeFailed, JudgePaused
from vigil.worker.judge.cache import (
    CachedReply,
    RedisReplyCache,
    ReplyCache,
    cache_key,
    local_cache,
)
from vigil.worker.judge.completion import Completion
from vigil.worker.judge.key import api_key, key_note
from vigil.worker.judge.last_error import record_error
from vigil.worker.judge.limiter import (
    MAX_RETRY_AFTER_S,
    Limiter,
    RateLimits,
    RedisRateBackend,
)
from vigil.worker.judge.pause import config_fingerprint, is_paused, pause, resume
from vigil.worker.logs import Every
from vigil.worker.redact import redact
from vigil.worker.settings import get_settings

__all__ = ["CHAT_PATH", "ChatResult", "ModeRejected", "JudgeTransport", "judge_cost"]

log = structlog.get_logger(__name__)

CHAT_PATH = "/chat/completions"  # under the client's base_url, where chat.completions.create posts
PAUSING = frozenset({401, 402, 404})
RETRYABLE = frozenset({408, 409, 429})
# A 5xx whose message is about the requested format is the server refusing the mode, not a transient failure.
_FORMAT_COMPLAINT = re.compile(r"schema|grammar|response.?format|json", re.IGNORECASE)


class ModeRejected(Exception):
    """The server refused the request's ``response_format`` (HTTP 400/422, or a 5xx complaining about it)."""


@dataclass
class ChatResult:
    text: str
    calls: list[JudgeCall] = field(default_factory=list)
    limiter_wait_s: float = 0.0  # time spent waiting for the rate limit and concurrency, over all attempts


@dataclass
class _Retry:
    status: str  # the JudgeCall status and, when retries run out, the error type
    message: str
    retry_after: float | None = None


class JudgeTransport:
    def __init__(
        self, config: JudgeConfig, *, redis: Redis | None = None, limits: RateLimits | None = None,
        cache: ReplyCache | None = None, expected_completion_tokens: int = 256,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, rand: Callable[[], float] = random.random,
    ) -> None:
        """``limits`` overrides the bucket shape (tests use short windows); ``cache`` the reply cache (default:
        ``VIGIL_CACHE_URL``'s Redis, else this process's; none when ``cache_ttl_s`` is 0); ``clock`` and ``sleep``
        time the retries and ``rand`` jitters them."""
        self.config = config
        self.client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=api_key(config),
            timeout=config.timeout_s,
            max_retries=0,
        )
        self._owns_redis = redis is None and bool(os.environ.get("REDIS_URL"))
        if self._owns_redis:
            redis = broker(os.environ["REDIS_URL"]).async_redis(max_connections=get_settings().redis_connections)
        self.redis = redis
        self.limits = limits or RateLimits.of(config)
        if self.limits.limited and redis is None:
            log.warning("judge_rate_limit_off", judge=config.name, why="no redis (REDIS_URL unset)")
        limited = redis is not None and self.limits.limited
        self.backend = RedisRateBackend(redis, config.name, self.limits) if limited else None
        self.limiter = Limiter(self.backend, max_concurrency=config.max_concurrency)
        self._cache_redis: Redis | None = None
        if cache is None and config.cache_ttl_s:
            cache_url = get_settings().cache_url
            if cache_url:
                self._cache_redis = broker(cache_url).async_redis(max_connections=get_settings().redis_connections)
                cache = RedisReplyCache(self._cache_redis)
            else:
                cache = local_cache()
        self.cache = cache if config.cache_ttl_s else None
        self.fingerprint = config_fingerprint(config)
        self.expected_completion_tokens = expected_completion_tokens
        self.clock, self.sleep, self.rand = clock, sleep, rand
        self._pause_line = Every(60)  # every call in flight meets the same 401: one line, not one per call

    async def aclose(self) -> None:
        """Close the HTTP client, and the Redis client when the transport opened it from ``REDIS_URL``."""
        await self.client.close()
        if self._owns_redis and self.redis is not None:
            await self.redis.aclose()
        if self._cache_redis is not None:
            await self._cache_redis.aclose()

    async def chat(
        self, *, step: str, messages: list[dict[str, str]], response_format: dict[str, Any] | None = None,
        monitor: str = "", cache_key_extra: str = "",
    ) -> ChatResult:
        """Send one chat completion. Raises ``JudgePaused`` at once while the judge is paused and on 401/402/404,
        ``ModeRejected`` when the server refuses ``response_format``, ``JudgeFailed`` when retries run out or the
        request is bad. ``monitor`` shares the judge fairly; ``cache_key_extra`` (the scorer version) keys the cache."""
        await self._check_pause()
        key = None
        if self.cache is not None:
            key = cache_key(base_url=self.config.base_url, model=self.config.model,
                            temperature=self.config.temperature, messages=messages,
                            response_format=response_format, extra=cache_key_extra)
            started = self.clock()
            hit = await self.cache.get(key)
            if hit is not None:
                call = JudgeCall(step=step, model=self.config.model, status="cached", cached=True,
                                 latency_ms=(self.clock() - started) * 1000)
                return ChatResult(text=hit.text, calls=[call])
        result = await self._send(step, messages, response_format, monitor)
        if key is not None and self.cache is not None:
            ok = result.calls[-1]
            await self.cache.put(key, CachedReply(result.text, ok.prompt_tokens, ok.completion_tokens),
                                 self.config.cache_ttl_s)
        return result

    async def _check_pause(self) -> None:
        if self.redis is None:
            return
        paused = await is_paused(self.redis, self.config.name)
        if paused is None:
            return
        if paused.fingerprint and paused.fingerprint != self.fingerprint:
            await resume(self.redis, self.config.name)
            log.info("judge_resumed", judge=self.config.name, why="configuration changed since the refusal")
            return
        raise JudgePaused(self.config.name, paused.reason)

    def estimate_tokens(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> int:
        """Before the call: prompt characters / 4 plus the completion we expect at most."""
        chars = sum(len(str(m.get("content", ""))) for m in messages)
        if response_format is not None:
            chars += len(json.dumps(response_format))
        return chars // 4 + self.expected_completion_tokens

    async def _send(self, step: str, messages: list[dict[str, str]], response_format: dict[str, Any] | None,
                    monitor: str) -> ChatResult:
        body: dict[str, Any] = {"model": self.config.model, "messages": messages}  # in create's order
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        if response_format is not None:
            body["response_format"] = response_format
        body["temperature"] = self.config.temperature
        estimate = self.estimate_tokens(messages, response_format)
        calls: list[JudgeCall] = []
        started, waited = self.clock(), 0.0
        for attempt in itertools.count(1):
            remaining = self.config.max_retry_age_s - (self.clock() - started)
            try:
                async with asyncio.timeout(max(0.0, remaining)) as deadline:
                    async with self.limiter.slot(monitor, estimate) as slot:
                        deadline.reschedule(None)
                        waited += slot.wait_s
                        outcome = await self._attempt(body, step, attempt, calls)
                        await slot.reconcile(_tokens_used(outcome, estimate))
            except TimeoutError:
                raise JudgeFailed("rate_limit_wait", f"no capacity within {self.config.max_retry_age_s}s",
                                  calls) from None
            if not isinstance(outcome, _Retry):
                return ChatResult(text=outcome.text, calls=calls, limiter_wait_s=waited)
            if outcome.status == "http_429" and self.backend is not None:
                factor, cut = await self.backend.penalize(outcome.retry_after)
                if cut:
                    log.warning("judge_rate_lowered", judge=self.config.name, factor=round(factor, 3))
            delay = retry_delay(attempt, outcome.retry_after, rand=self.rand)
            if self.clock() - started + delay > self.config.max_retry_age_s:
                raise JudgeFailed(outcome.status, outcome.message, calls)
            log.info("judge_retry", judge=self.config.name, step=step, status=outcome.status, attempt=attempt,
                     delay_s=round(delay, 3))
            await self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, body: dict[str, Any], step: str, attempt: int,
                       calls: list[JudgeCall]) -> Completion | _Retry:
        """One HTTP request, recorded in ``calls``. Returns the completion or what to retry; raises the rest."""
        started = self.clock()
        call = JudgeCall(step=step, model=self.config.model, attempt=attempt)
        calls.append(call)
        try:
            completion = Completion.parse(await self.client.post(CHAT_PATH, body=body, cast_to=bytes))
        except openai.APIStatusError as exc:
            call.status, call.latency_ms = f"http_{exc.status_code}", (self.clock() - started) * 1000
            await self._note_error(call.status, self._refusal(exc))
            return await self._refused(exc, "response_format" in body, calls)
        except openai.APITimeoutError as exc:
            call.status, call.latency_ms = "timeout", (self.clock() - started) * 1000
            await self._note_error(call.status, redact(str(exc)))
            return _Retry("timeout", redact(str(exc)))
        except openai.APIConnectionError as exc:
            call.status, call.latency_ms = "connection_error", (self.clock() - started) * 1000
            await self._note_error(call.status, redact(str(exc)))
            return _Retry("connection_error", redact(str(exc)))
        except (ValueError, TypeError, openai.APIResponseValidationError) as exc:  # a 200 that is not a completion
            call.status, call.latency_ms = "bad_response", (self.clock() - started) * 1000
            message = (f"the judge answered with a body that is not a chat completion: "
                       f"{type(exc).__name__}: {redact(str(exc))[:200]}")
            await self._note_error(call.status, message)
            raise JudgeFailed("bad_response", message, calls) from None
        call.latency_ms = (self.clock() - started) * 1000
        usage = completion.usage
        if usage:
            call.prompt_tokens = usage.prompt_tokens or 0
            call.completion_tokens = usage.completion_tokens or 0
            call.cached_prompt_tokens = usage.cached_prompt_tokens
            call.cost_usd = judge_cost(self.config, call.prompt_tokens, call.completion_tokens,
                                       call.cached_prompt_tokens)
        return completion

    def _refusal(self, exc: openai.APIStatusError) -> str:
        """The refusal in words, credentials hidden (gateways echo API keys); a 401 names the key's variable."""
        reason = redact(f"HTTP {exc.status_code}: {exc.message}")
        return f"{reason} ({key_note(self.config)})" if exc.status_code == 401 else reason

    async def _note_error(self, status: str, message: str) -> None:
        """Keep it as the judge's last error for ``vigil judge status`` (never a reason for the call to fail)."""
        if self.redis is None:
            return
        try:
            await record_error(self.redis, self.config.name, status, message)
        except RedisError as exc:
            log.debug("judge_last_error_not_kept", judge=self.config.name, error=str(exc))

    async def _refused(self, exc: openai.APIStatusError, with_format: bool, calls: list[JudgeCall]) -> _Retry:
        status = exc.status_code
        if status in PAUSING:
            reason = self._refusal(exc)
            if self.redis is not None:
                await pause(self.redis, self.config.name, reason, fingerprint=self.fingerprint)
            if self._pause_line():
                log.error("judge_paused", judge=self.config.name, reason=reason)
            raise JudgePaused(self.config.name, reason) from exc
        # Only a refusal that names the format is a refused mode: a context overflow (400) must not downgrade it.
        if with_format and (status in (400, 422) or status >= 500) and _FORMAT_COMPLAINT.search(exc.message):
            raise ModeRejected(redact(str(exc))) from exc
        if status in RETRYABLE or status >= 500:
            retry_after = parse_retry_after(exc.response.headers, now=time.time())
            if retry_after is not None and retry_after > MAX_RETRY_AFTER_S:
                log.warning("judge_retry_after_capped", judge=self.config.name, asked_s=retry_after,
                            capped_s=MAX_RETRY_AFTER_S)
                retry_after = MAX_RETRY_AFTER_S
            return _Retry(f"http_{status}", redact(str(exc)), retry_after)
        raise JudgeFailed(f"http_{status}", redact(str(exc)), calls) from exc


def judge_cost(config: JudgeConfig, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float:
    """The price of one call: uncached and cached prompt tokens and completion tokens at the judge's prices
    (cached ones at ``price_per_cached_prompt_token``, else at the prompt price)."""
    cached_price = config.price_per_cached_prompt_token
    if cached_price is None:
        cached_price = config.price_per_prompt_token
    return ((prompt_tokens - cached_prompt_tokens) * config.price_per_prompt_token
            + cached_prompt_tokens * cached_price + completion_tokens * config.price_per_completion_token)


def _tokens_used(outcome: Completion | _Retry, estimate: int) -> int:
    """What the attempt cost against tokens per minute: the reported usage; nothing for a refusal; the estimate
    for a timeout (the server may have done the work)."""
    if isinstance(outcome, _Retry):
        return estimate if outcome.status == "timeout" else 0
    usage = outcome.usage
    if usage is None:
        return estimate
    if usage.total_tokens is not None:
        return usage.total_tokens
    return (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
