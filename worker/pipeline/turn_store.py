"""A sampled turn's text stored once in Redis while its scores are pending; score tasks carry a reference to it.

Before, every score task carried the whole turn, and every queued message sits in Redis twice (the list and the
delivery journal, ``vigil.schemas.broker``), base64-encoded by kombu: about 2.7 times the turn's JSON per waiting task.
Now ingest stores the turn's JSON once, in a hash ``vigil:turn:<id>`` (field ``turn``) with a TTL
(``VIGIL_TURN_TTL``, a guard against leaks, far longer than any backlog should last), and each score task carries
``(id, holder)``. A hash field per holder (``h:<holder>``) says which tasks still need the turn: a task parked for a
paused judge adds its parked copies as holders before it lets go of its own. When the last holder lets go, the
hash is deleted. A turn id begins with the second it was stored (``<seconds, 8 hex>-<random>``), so a task delivered
again after a crash that finds no turn tells *done* (stored less than ``VIGIL_TURN_TTL`` ago: every holder let go)
from *expired* (a dead letter naming ``VIGIL_TURN_TTL``) without a tombstone: the broker runs with ``noeviction``, so
nothing else removes a stored turn, and a flood of turns leaves nothing behind once scored (a tombstone per turn,
kept two hours, was ~115 bytes of Redis each).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import redis

__all__ = ["DONE", "EXPIRED", "TURN_PREFIX", "add_holders", "fetch", "release", "store"]

TURN_PREFIX = "vigil:turn:"
DONE, EXPIRED = "done", "expired"

# KEYS: the turn's key. ARGV: holder. Lets go of one holder; the last one deletes the turn.
_RELEASE = """
if redis.call('HEXISTS', KEYS[1], 'turn') == 0 then return 0 end
redis.call('HDEL', KEYS[1], 'h:' .. ARGV[1])
if redis.call('HLEN', KEYS[1]) <= 1 then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

# KEYS: the turn's key. ARGV: holder fields. Only on a stored turn (never recreates one without its text or TTL).
_ADD = """
if redis.call('HEXISTS', KEYS[1], 'turn') == 0 then return 0 end
for i = 1, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], 1) end
return #ARGV
"""


def _key(turn_id: str) -> str:
    return f"{TURN_PREFIX}{turn_id}"


def _stored_at(turn_id: str) -> float | None:
    """When a turn id says it was stored (None: an id of another form)."""
    seconds, dash, _ = turn_id.partition("-")
    try:
        return float(int(seconds, 16)) if dash and len(seconds) == 8 else None
    except ValueError:
        return None


def store(pipe: redis.client.Pipeline, raw: Any, *, ttl_s: int) -> tuple[str, str]:
    """Queue the commands that store ``raw`` (the turn as it came) with one holder; its (id, holder)."""
    turn_id, holder = f"{int(time.time()):08x}-{uuid.uuid4().hex[:24]}", uuid.uuid4().hex[:16]
    key = _key(turn_id)
    pipe.hset(key, mapping={"turn": json.dumps(raw, ensure_ascii=False, separators=(",", ":")), f"h:{holder}": 1})
    pipe.expire(key, ttl_s)
    return turn_id, holder


def fetch(client: redis.Redis, turn_id: str, *, ttl_s: int, now: float | None = None) -> Any:
    """The stored turn (decoded JSON), or ``DONE`` (every task that held it let go) or ``EXPIRED`` (stored
    ``ttl_s`` ago or more, or an id this store never made)."""
    text = client.hget(_key(str(turn_id)), "turn")
    if text is not None:
        return json.loads(text)
    stored_at = _stored_at(str(turn_id))
    now = time.time() if now is None else now
    return DONE if stored_at is not None and now - stored_at < ttl_s else EXPIRED


def add_holders(client: redis.Redis, turn_id: str, count: int) -> list[str]:
    """``count`` new holders of a stored turn (tasks parked for a paused judge), before the current one lets go."""
    holders = [uuid.uuid4().hex[:16] for _ in range(count)]
    if holders:
        client.register_script(_ADD)(keys=[_key(str(turn_id))], args=[f"h:{h}" for h in holders])
    return holders


def release(client: redis.Redis, turn_id: str, holder: str) -> bool:
    """This task is done with the turn; True when it was the last holder (the turn is gone)."""
    return bool(client.register_script(_RELEASE)(keys=[_key(str(turn_id))], args=[str(holder)]))
