"""A paused judge: its credentials or model are wrong (HTTP 401/402/404), so its work waits instead of failing.

The state is one Redis hash shared by every worker (``vigil:judges:paused``: judge name -> reason, since, and the
fingerprint of the configuration that was refused). ``vigil judge resume NAME`` lifts a pause by hand; a worker
whose configuration differs from the refused one (a new key, endpoint or model) lifts it by itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass

from redis.asyncio import Redis
from vigil.schemas import JudgeConfig

__all__ = ["PAUSED_KEY", "Pause", "config_fingerprint", "is_paused", "pause", "paused_judges", "resume"]

PAUSED_KEY = "vigil:judges:paused"


@dataclass(frozen=True)
class Pause:
    judge: str
    reason: str
    since: float  # Unix time of the first refusal
    fingerprint: str = ""  # of the configuration that was refused


def config_fingerprint(config: JudgeConfig) -> str:
    """What a judge's requests depend on: endpoint, model and (a hash of) the API key's value."""
    key = os.environ.get(config.api_key_env, "")
    material = json.dumps([config.base_url, config.model, config.api_key_env, key])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


async def pause(redis: Redis, judge: str, reason: str, *, fingerprint: str = "", now: float | None = None) -> Pause:
    """Pause ``judge``; a judge already paused keeps its first reason and time."""
    record = Pause(judge, reason, time.time() if now is None else now, fingerprint)
    await redis.hsetnx(PAUSED_KEY, judge, json.dumps(asdict(record)))
    return await is_paused(redis, judge) or record


async def resume(redis: Redis, judge: str) -> bool:
    """Lift the pause; False when the judge was not paused."""
    return bool(await redis.hdel(PAUSED_KEY, judge))


async def is_paused(redis: Redis, judge: str) -> Pause | None:
    raw = await redis.hget(PAUSED_KEY, judge)
    return None if raw is None else Pause(**json.loads(raw))


async def paused_judges(redis: Redis) -> dict[str, Pause]:
    """Every paused judge, by name."""
    return {(k.decode() if isinstance(k, bytes) else k): Pause(**json.loads(v))
            for k, v in (await redis.hgetall(PAUSED_KEY)).items()}
