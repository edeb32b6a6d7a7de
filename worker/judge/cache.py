"""The judge reply cache: an identical request within ``cache_ttl_s`` reuses the stored reply from Redis.

Identical means the same scorer version (the caller's ``extra``), endpoint, model, temperature, rendered messages
and response format; the key is a SHA-256 of their canonical JSON, so no trace text is readable in a key. Fence tags
are keyed per process (``worker.judge.fence``), so they are left out of the key: workers share the cache.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from worker.judge.fence import untagged

__all__ = ["CachedReply", "ReplyCache", "cache_key"]


@dataclass(frozen=True)
class CachedReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def cache_key(*, base_url: str | None, model: str, temperature: float, messages: list[dict[str, Any]],
              response_format: dict[str, Any] | None, extra: str = "") -> str:
    messages = [{**m, "content": untagged(m["content"])} if isinstance(m.get("content"), str) else m
                for m in messages]
    material = json.dumps([extra, base_url, model, temperature, messages, response_format],
                          sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "vigil:judge:reply:" + hashlib.sha256(material.encode()).hexdigest()


class ReplyCache:
    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self.redis = redis
        self.ttl_s = ttl_s

    async def get(self, key: str) -> CachedReply | None:
        raw = await self.redis.get(key)
        return None if raw is None else CachedReply(**json.loads(raw))

    async def put(self, key: str, reply: CachedReply) -> None:
        await self.redis.set(key, json.dumps(asdict(reply)), ex=self.ttl_s)
