"""The judge reply cache: an identical request within ``cache_ttl_s`` reuses the stored reply.

Identical means the same scorer version (the caller's ``extra``), endpoint, model, temperature, rendered messages
and response format; the key is a SHA-256 of their canonical JSON, so no trace text is readable in a key. Fence tags
are keyed per process (``vigil.worker.judge.fence``), so they are left out of the key: identical requests share an entry.

The cache never competes with the broker for memory (at ``maxmemory`` with ``noeviction`` the broker would refuse
turns because of cached replies). Where the replies live:

- ``VIGIL_CACHE_URL`` unset (the default): in each worker process, least recently used evicted first, within
  ``VIGIL_CACHE_MAX_BYTES`` (replies and keys counted in bytes); nothing is shared between workers.
- ``VIGIL_CACHE_URL=redis://cache-host:6379/0``: in that Redis, shared by every worker, each entry with its TTL.
  Give that server its own ``maxmemory`` and ``maxmemory-policy allkeys-lru``, so it evicts instead of refusing;
  ``vigil worker`` says so at start when it does not, or when it is the broker itself.

A cache that fails (its Redis down or full) is a miss, logged, never a failed judge call.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import structlog
from cachetools import TLRUCache
from redis.asyncio import Redis
from redis.exceptions import RedisError
from vigil.worker.judge.fence import untagged

__all__ = ["CachedReply", "LocalReplyCache", "RedisReplyCache", "ReplyCache", "cache_key", "cache_redis_problem",
           "local_cache"]

log = structlog.get_logger(__name__)

_ENTRY_OVERHEAD = 240  # bytes per entry beyond its key and text: the tuple, the reply object, the LRU links


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


class ReplyCache(Protocol):
    async def get(self, key: str) -> CachedReply | None: ...

    async def put(self, key: str, reply: CachedReply, ttl_s: int) -> None: ...


def entry_bytes(key: str, reply: CachedReply) -> int:
    """What one entry costs the process: its key and text as Python holds them, plus fixed overhead."""
    return sys.getsizeof(key) + sys.getsizeof(reply.text) + _ENTRY_OVERHEAD


class LocalReplyCache:
    """In this process: least recently used first out once the entries pass ``max_bytes``; each entry expires
    ``ttl_s`` after it was stored. Safe from any thread (Celery's pool threads each run their own event loop)."""

    def __init__(self, max_bytes: int, *, timer: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self._store: TLRUCache = TLRUCache(maxsize=max_bytes, ttu=lambda _key, entry, now: now + entry[1],
                                           timer=timer, getsizeof=lambda entry: entry[2])
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """Bytes the entries hold now (never more than ``max_bytes``)."""
        with self._lock:
            self._store.expire()
            return int(self._store.currsize)

    def __len__(self) -> int:
        with self._lock:
            self._store.expire()
            return len(self._store)

    async def get(self, key: str) -> CachedReply | None:
        with self._lock:
            entry = self._store.get(key)
        return None if entry is None else entry[0]

    async def put(self, key: str, reply: CachedReply, ttl_s: int) -> None:
        size = entry_bytes(key, reply)
        if size > self.max_bytes:  # would evict everything else and still not fit
            return
        with self._lock:
            self._store[key] = (reply, ttl_s, size)


class RedisReplyCache:
    """In a Redis of its own (``VIGIL_CACHE_URL``), each entry with its TTL; errors are misses."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def get(self, key: str) -> CachedReply | None:
        try:
            raw = await self.redis.get(key)
        except RedisError as exc:
            log.warning("judge reply cache unavailable; a miss", error=str(exc)[:200])
            return None
        return None if raw is None else CachedReply(**json.loads(raw))

    async def put(self, key: str, reply: CachedReply, ttl_s: int) -> None:
        try:
            await self.redis.set(key, json.dumps(asdict(reply)), ex=ttl_s)
        except RedisError as exc:
            log.warning("judge reply cache refused a reply; not cached", error=str(exc)[:200])


@functools.cache
def local_cache() -> LocalReplyCache:
    """This process's cache, within ``VIGIL_CACHE_MAX_BYTES`` whatever the number of judges and transports."""
    from vigil.worker.settings import get_settings

    return LocalReplyCache(get_settings().cache_max_bytes)


def cache_redis_problem(cache: Any, broker: Any) -> str | None:
    """What is wrong with ``VIGIL_CACHE_URL``'s Redis as a cache (sync clients of the cache and of the broker), or
    None: it must be another server than the broker, and evict rather than refuse when full."""
    if cache.info("server")["run_id"] == broker.info("server")["run_id"]:
        return ("VIGIL_CACHE_URL is the broker's Redis server: cached replies would compete with queued turns for "
                "its memory; point it at a Redis of its own, or unset it (an in-process cache)")
    settings = cache.config_get("maxmemory*")
    if int(settings.get("maxmemory", 0)) == 0 or settings.get("maxmemory-policy") == "noeviction":
        return ("VIGIL_CACHE_URL's Redis has no maxmemory or does not evict (maxmemory-policy "
                f"{settings.get('maxmemory-policy')}): set maxmemory and maxmemory-policy allkeys-lru on it")
    return None
