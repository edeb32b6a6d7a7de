"""Who is looking at which turn: leases in Redis, so two reviewers never get the same item at once.

Every key names a turn by its project and trace id (``<turn>``: ``vigil.worker.assembly.traces.trace_name``, the
name its trace has in the intake's keys: trace ids are a project's own), so a lease, a label's mark or a skip of one
project's turn never touches another project's turn of the same trace id.

- ``vigil.review.lease.<turn>``: the reviewer holding the turn (``SET NX``, ``LEASE_S``). Asking again renews
  one's own lease; a lease left behind (a closed tab) lapses and the turn goes back to the queues.
- ``vigil.review.done.<monitor>.<turn>``: set when a label is sent, for ``DONE_S``: the label travels through the
  ingest queue to the store, and until it is there the queues must not offer the turn again.
- ``vigil.review.skip.<reviewer>.<turn>``: a turn this reviewer skipped is not offered to them again for ``SKIP_S``.
- ``vigil.review.rate.<reviewer>``: when the reviewer's labels of the last ``RATE_WINDOW_S`` were given (a sorted
  set, at most the limit's entries): a label over the limit waits until the oldest leaves the window.

A label is accepted only for a turn leased to its reviewer (``holder``); the page renews its lease while the turn
is open (``renew``), so reading slowly never loses it, and a lease is never taken by labelling.

Leases live in the broker's Redis, beside the work, so reviewers on several ``vigil review`` processes share them.
``LocalLeases`` keeps the same keys in memory, for a page that holds the embedded store itself (no worker, no
broker): then no other process can serve the turns at all.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence

import redis

__all__ = ["DONE_S", "LEASE_S", "RATE_WINDOW_S", "SKIP_S", "Leases", "LocalLeases"]

LEASE_S = 300
DONE_S = 600
SKIP_S = 86400
RATE_WINDOW_S = 60.0

# KEYS[1] the lease; ARGV: the reviewer, the lease's seconds. 1 when renewed (it was theirs), else 0.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
# KEYS[1] the reviewer's rate key; ARGV: now, window, limit, a unique member. Nil when the label may go (and it is
# counted), else the seconds until the oldest label in the window leaves it.
_RATE = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return tostring(tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(window))
return false
"""


class Leases:
    def __init__(self, client: redis.Redis, *, lease_s: int = LEASE_S) -> None:
        self.redis = client
        self.lease_s = lease_s
        self._renew = client.register_script(_RENEW)
        self._rate = client.register_script(_RATE)

    @staticmethod
    def _lease(turn: str) -> str:
        return f"vigil.review.lease.{turn}"

    @staticmethod
    def _done(monitor: str, turn: str) -> str:
        return f"vigil.review.done.{monitor}.{turn}"

    @staticmethod
    def _skip(reviewer: str, turn: str) -> str:
        return f"vigil.review.skip.{reviewer}.{turn}"

    @staticmethod
    def _rate_key(reviewer: str) -> str:
        return f"vigil.review.rate.{reviewer}"

    def open_to(self, turns: Sequence[str], monitor: str, reviewer: str) -> list[str]:
        """The turns of ``turns`` (in order) that ``reviewer`` may be given: not leased to someone else, not
        labelled for ``monitor`` moments ago, not skipped by them. One round trip."""
        if not turns:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for turn in turns:
            pipe.get(self._lease(turn))
            pipe.exists(self._done(monitor, turn), self._skip(reviewer, turn))
        answers = pipe.execute()
        mine = reviewer.encode()
        return [turn for turn, holder, closed in zip(turns, answers[::2], answers[1::2], strict=True)
                if (holder is None or holder == mine) and not closed]

    def take(self, turn: str, reviewer: str) -> bool:
        """Lease ``turn`` to ``reviewer`` (or renew their lease); False when someone else holds it."""
        key, mine = self._lease(turn), reviewer.encode()
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(key, mine, nx=True, ex=self.lease_s)
        pipe.get(key)
        _, holder = pipe.execute()
        if holder != mine:
            return False
        self.redis.expire(key, self.lease_s)
        return True

    def holder(self, turn: str) -> str | None:
        value = self.redis.get(self._lease(turn))
        return value.decode() if value is not None else None

    def renew(self, turn: str, reviewer: str) -> bool:
        """Extend ``reviewer``'s lease of ``turn``; False when it is not theirs (lapsed, or someone else's)."""
        return bool(self._renew(keys=[self._lease(turn)], args=[reviewer, self.lease_s]))

    def wait_to_label(self, reviewer: str, per_minute: int) -> float | None:
        """None when ``reviewer`` may give one more label now (and it is counted), else the seconds until they may:
        at most ``per_minute`` labels in any ``RATE_WINDOW_S``."""
        wait = self._rate(keys=[self._rate_key(reviewer)],
                          args=[time.time(), RATE_WINDOW_S, per_minute, uuid.uuid4().hex])
        return None if wait is None else max(float(wait), 0.0)

    def release(self, turn: str, reviewer: str) -> None:
        """Give the turn back, if ``reviewer`` holds it (a lapsed lease someone else took is theirs)."""
        key = self._lease(turn)
        with self.redis.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                if pipe.get(key) == reviewer.encode():
                    pipe.multi()
                    pipe.delete(key)
                    pipe.execute()
            except redis.WatchError:
                pass  # it changed hands meanwhile: not ours to release

    def labelled(self, turn: str, monitors: Sequence[str], reviewer: str) -> None:
        """``reviewer`` labelled the turn for ``monitors``: keep it out of those queues until the store has it."""
        pipe = self.redis.pipeline(transaction=False)
        for monitor in monitors:
            pipe.set(self._done(monitor, turn), reviewer, ex=DONE_S)
        pipe.execute()

    def skipped(self, turn: str, reviewer: str) -> None:
        self.redis.set(self._skip(reviewer, turn), 1, ex=SKIP_S)


class LocalLeases:
    """The same leases in this process's memory, for a page that holds the embedded store itself (no worker runs,
    so no other process can serve these turns: chDB lets one process open the directory)."""

    def __init__(self, *, lease_s: int = LEASE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.lease_s = lease_s
        self.clock = clock
        self._keys: dict[str, tuple[str, float]] = {}  # the Redis keys above -> (value, expiry)
        self._labels: dict[str, deque[float]] = {}  # reviewer -> when their labels of the window were given
        self._lock = threading.Lock()

    def _get(self, key: str) -> str | None:
        found = self._keys.get(key)
        if found is None or found[1] <= self.clock():
            self._keys.pop(key, None)
            return None
        return found[0]

    def _set(self, key: str, value: str, ttl: float) -> None:
        self._keys[key] = (value, self.clock() + ttl)

    def open_to(self, turns: Sequence[str], monitor: str, reviewer: str) -> list[str]:
        with self._lock:
            return [t for t in turns if self._get(Leases._lease(t)) in (None, reviewer)
                    and self._get(Leases._done(monitor, t)) is None and self._get(Leases._skip(reviewer, t)) is None]

    def take(self, turn: str, reviewer: str) -> bool:
        with self._lock:
            if self._get(Leases._lease(turn)) not in (None, reviewer):
                return False
            self._set(Leases._lease(turn), reviewer, self.lease_s)
            return True

    def holder(self, turn: str) -> str | None:
        with self._lock:
            return self._get(Leases._lease(turn))

    def renew(self, turn: str, reviewer: str) -> bool:
        with self._lock:
            if self._get(Leases._lease(turn)) != reviewer:
                return False
            self._set(Leases._lease(turn), reviewer, self.lease_s)
            return True

    def wait_to_label(self, reviewer: str, per_minute: int) -> float | None:
        with self._lock:
            now, given = self.clock(), self._labels.setdefault(reviewer, deque())
            while given and given[0] <= now - RATE_WINDOW_S:
                given.popleft()
            if len(given) >= per_minute:
                return given[0] + RATE_WINDOW_S - now
            given.append(now)
            return None

    def release(self, turn: str, reviewer: str) -> None:
        with self._lock:
            if self._get(Leases._lease(turn)) == reviewer:
                del self._keys[Leases._lease(turn)]

    def labelled(self, turn: str, monitors: Sequence[str], reviewer: str) -> None:
        with self._lock:
            for monitor in monitors:
                self._set(Leases._done(monitor, turn), reviewer, DONE_S)

    def skipped(self, turn: str, reviewer: str) -> None:
        with self._lock:
            self._set(Leases._skip(reviewer, turn), "1", SKIP_S)
