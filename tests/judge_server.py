"""A local OpenAI-compatible chat server, scripted per test: the only stand-in vigil's tests allow.

    with ScriptedJudge() as server:                       # or the ``judge_server`` fixture
        server.script = lambda request: Reply(json={...})  # or server.replies = [Reply(...), Reply(...)]
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test")

A script sees each request's JSON body and returns a ``Reply``: a status, a chat-completion content (``content``)
or a raw body (``body``), headers (Retry-After), a delay, and a ``gate`` (a ``threading.Event``) that holds the
reply until the test sets it, so every request of a wave arrives before any is answered. ``requests`` records every
request with its arrival time, so tests can count calls per 60-second window. ``rpm_limit`` makes the server enforce
its own limit and answer 429 above it (counted in ``refused``): at most ``rpm_limit`` accepted requests in any
``window_s`` seconds (60 unless a test shortens the window, scaling the limit's time with the limiter's
``RateLimits.window_s``).

``usage="chars"`` reports usage as a provider would, measured the same way for every client: prompt tokens are the
characters of the request's messages / 4, completion tokens the reply's / 4, and ``prompt_tokens_details.
cached_tokens`` is the longest prefix the request shares with any earlier one (its characters / 4), the way
OpenAI-style automatic prefix caching serves a repeated static prefix. The default (``"scripted"``) reports each
``Reply``'s own counts (and its ``cached_tokens``, when set).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

__all__ = ["Recorded", "Reply", "ScriptedJudge", "judge_server", "message_text"]


@dataclass
class Reply:
    content: str | None = None  # the assistant message; ignored when body is given
    status: int = 200
    body: str | None = None  # a raw response body (for broken JSON, error payloads)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int | None = None  # reported as usage.prompt_tokens_details.cached_tokens when set
    gate: threading.Event | None = None  # the reply waits until it is set

    @classmethod
    def json(cls, payload: Any, **kwargs: Any) -> Reply:
        return cls(content=json.dumps(payload), **kwargs)

    @classmethod
    def error(cls, status: int, message: str = "error", **kwargs: Any) -> Reply:
        body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}})
        return cls(status=status, body=body, **kwargs)


@dataclass
class Recorded:
    at: float  # time.monotonic() at arrival
    body: dict[str, Any]
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)  # as sent (HTTP header names are case-insensitive)

    @property
    def prompt(self) -> str:
        """The messages' text, in order (a content given as parts counts its text parts)."""
        return "\n".join(message_text(m) for m in self.body.get("messages", []))


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class ScriptedJudge:
    def __init__(self, script: Callable[[dict[str, Any]], Reply] | None = None, *, rpm_limit: int | None = None,
                 window_s: float = 60.0, usage: str = "scripted"):
        if usage not in ("scripted", "chars"):
            raise ValueError(f"usage must be 'scripted' or 'chars', not {usage!r}")
        self.usage = usage
        self.script = script
        self.replies: deque[Reply] = deque()
        self.rpm_limit = rpm_limit
        self.window_s = window_s
        self.requests: list[Recorded] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.replies:
            return self.replies.popleft()
        if self.script is not None:
            return self.script(body)
        return Reply.error(500, "no scripted reply left")

    def _over_limit(self, now: float) -> bool:
        if self.rpm_limit is None:
            return False
        accepted = [r for r in self.requests if r.status != 429 and now - r.at < self.window_s]
        return len(accepted) >= self.rpm_limit

    async def _chat(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": {"message": "bad json"}}, status=400)
        now = time.monotonic()
        with self._lock:
            record = Recorded(at=now, body=body, headers={k.lower(): v for k, v in request.headers.items()})
            if self._over_limit(now):
                record.status = 429
                self.refused += 1
                self.requests.append(record)
                return web.json_response({"error": {"message": "rate limit", "type": "rate_limit"}}, status=429)
            earlier = [r.prompt for r in self.requests if r.status == 200]
            self.requests.append(record)
            reply = self._next_reply(body)
            record.status = reply.status
        while reply.gate is not None and not reply.gate.is_set():
            await asyncio.sleep(0.02)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.body is not None:
            return web.Response(text=reply.body, status=reply.status, headers=reply.headers,
                                content_type="application/json")
        payload = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.content or ""}}],
            "usage": self._usage(record, reply, earlier),
        }
        return web.json_response(payload, status=reply.status, headers=reply.headers)

    def _usage(self, record: Recorded, reply: Reply, earlier: list[str]) -> dict[str, Any]:
        prompt, completion, cached = reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens
        if self.usage == "chars":
            text = record.prompt
            prompt = len(text) // 4
            completion = len(reply.content or "") // 4
            cached = min(prompt, max((_common_prefix(text, e) for e in earlier), default=0) // 4)
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return usage

    def start(self, port: int = 0) -> ScriptedJudge:
        ready = threading.Event()

        async def serve() -> None:
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_post("/v1/chat/completions", self._chat)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", port)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="scripted-judge", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted judge server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)  # type: ignore[union-attr]
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)  # type: ignore[union-attr]

    def max_in_window(self, window: float = 60.0) -> int:
        """The most accepted (non-429) requests that arrived within any ``window`` seconds."""
        times = sorted(r.at for r in self.requests if r.status != 429)
        best, start = 0, 0
        for end, t in enumerate(times):
            while t - times[start] >= window:
                start += 1
            best = max(best, end - start + 1)
        return best

    def __enter__(self) -> ScriptedJudge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def judge_server():
    with ScriptedJudge() as server:
        yield server
