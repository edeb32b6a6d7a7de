"""Who is looking at which turn: leases in Redis, so two reviewers never get the same item at once.

- ``vigil.review.lease.<trace>``: the reviewer holding the turn (``SET NX``, ``LEASE_S``). Asking again renews
  one's own lease; a lease left behind (a closed tab) lapses and the turn goes back to the queues.
- ``vigil.review.done.<monitor>.<trace>``: set when a label is sent, for ``DONE_S``: the label travels through the
  ingest queue to the store, and until it is there the queues must not offer the turn again.
- ``vigil.review.skip.<reviewer>.<trace>``: a turn this reviewer skipped is not offered to them again for ``SKIP_S``.

Leases live in the broker's Redis, beside the work, so reviewers on several ``vigil review`` processes share them.
``LocalLeases`` keeps the same keys in memory, for a page that holds the embedded store itself (no worker, no
broker): then no other process can serve the turns at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import redis

__all__ = ["DONE_S", "LEASE_S", "SKIP_S", "Leases", "LocalLeases"]

LEASE_S = 300
DONE_S = 600
SKIP_S = 86400


class Leases:
    def __init__(self, client: redis.Redis, *, lease_s: int = LEASE_S) -> None:
        self.redis = client
        self.lease_s = lease_s

    @staticmethod
    def _lease(trace_id: str) -> str:
        return f"vigil.review.lease.{trace_id}"

    @staticmethod
    def _done(monitor: str, trace_id: str) -> str:
        return f"vigil.review.done.{monitor}.{trace_id}"

    @staticmethod
    def _skip(reviewer: str, trace_id: str) -> str:
        return f"vigil.review.skip.{reviewer}.{trace_id}"

    def open_to(self, trace_ids: Sequence[str], monitor: str, reviewer: str) -> list[str]:
        """The turns of ``trace_ids`` (in order) that ``reviewer`` may be given: not leased to someone else, not
        labelled for ``monitor`` moments ago, not skipped by them. One round trip."""
        if not trace_ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for trace_id in trace_ids:
            pipe.get(self._lease(trace_id))
            pipe.exists(self._done(monitor, trace_id), self._skip(reviewer, trace_id))
        answers = pipe.execute()
        mine = reviewer.encode()
        return [trace_id for trace_id, holder, closed in zip(trace_ids, answers[::2], answers[1::2], strict=True)
                if (holder is None or holder == mine) and not closed]

    def take(self, trace_id: str, reviewer: str) -> bool:
        """Lease ``trace_id`` to ``reviewer`` (or renew their lease); False when someone else holds it."""
        key, mine = self._lease(trace_id), reviewer.encode()
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(key, mine, nx=True, ex=self.lease_s)
        pipe.get(key)
        _, holder = pipe.execute()
        if holder != mine:
            return False
        self.redis.expire(key, self.lease_s)
        return True

    def holder(self, trace_id: str) -> str | None:
        value = self.redis.get(self._lease(trace_id))
        return value.decode() if value is not None else None

    def release(self, trace_id: str, reviewer: str) -> None:
        """Give the turn back, if ``reviewer`` holds it (a lapsed lease someone else took is theirs)."""
        key = self._lease(trace_id)
        with self.redis.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                if pipe.get(key) == reviewer.encode():
                    pipe.multi()
                    pipe.delete(key)
                    pipe.execute()
            except redis.WatchError:
                pass  # it changed hands meanwhile: not ours to release

    def labelled(self, trace_id: str, monitors: Sequence[str], reviewer: str) -> None:
        """``reviewer`` labelled the turn for ``monitors``: keep it out of those queues until the store has it."""
        pipe = self.redis.pipeline(transaction=False)
        for monitor in monitors:
            pipe.set(self._done(monitor, trace_id), reviewer, ex=DONE_S)
        pipe.execute()

    def skipped(self, trace_id: str, reviewer: str) -> None:
        self.redis.set(self._skip(reviewer, trace_id), 1, ex=SKIP_S)


class LocalLeases:
    """The same leases in this process's memory, for a page that holds the embedded store itself (no worker runs,
    so no other process can serve these turns: chDB lets one process open the directory)."""

    def __init__(self, *, lease_s: int = LEASE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.lease_s = lease_s
        self.clock = clock
        self._keys: dict[str, tuple[str, float]] = {}  # the Redis keys above -> (value, expiry)
        self._lock = threading.Lock()

    def _get(self, key: str) -> str | None:
        found = self._keys.get(key)
        if found is None or found[1] <= self.clock():
            self._keys.pop(key, None)
            return None
        return found[0]

    def _set(self, key: str, value: str, ttl: float) -> None:
        self._keys[key] = (value, self.clock() + ttl)

    def open_to(self, trace_ids: Sequence[str], monitor: str, reviewer: str) -> list[str]:
        with self._lock:
            return [t for t in trace_ids if self._get(Leases._lease(t)) in (None, reviewer)
                    and self._get(Leases._done(monitor, t)) is None and self._get(Leases._skip(reviewer, t)) is None]

    def take(self, trace_id: str, reviewer: str) -> bool:
        with self._lock:
            if self._get(Leases._lease(trace_id)) not in (None, reviewer):
                return False
            self._set(Leases._lease(trace_id), reviewer, self.lease_s)
            return True

    def holder(self, trace_id: str) -> str | None:
        with self._lock:
            return self._get(Leases._lease(trace_id))

    def release(self, trace_id: str, reviewer: str) -> None:
        with self._lock:
            if self._get(Leases._lease(trace_id)) == reviewer:
                del self._keys[Leases._lease(trace_id)]

    def labelled(self, trace_id: str, monitors: Sequence[str], reviewer: str) -> None:
        with self._lock:
            for monitor in monitors:
                self._set(Leases._done(monitor, trace_id), reviewer, DONE_S)

    def skipped(self, trace_id: str, reviewer: str) -> None:
        with self._lock:
            self._set(Leases._skip(reviewer, trace_id), "1", SKIP_S)
