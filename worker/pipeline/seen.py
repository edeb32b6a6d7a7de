"""Which traces ingest has taken in, for negative feedback to look its trace up before it asks the writer for a
rescore (``vigil.worker.pipeline.feedback``): a Bloom filter in Redis, so the lookup costs a fixed 2 MiB whatever
the traffic and never reaches the store (on chDB only the writer process can read it).

Each ingest batch sets its traces' bits (``HASHES`` per trace, a trace named by its project and id:
``feedback.turn_ref``, so another project's trace of the same id is not known) in the bitmap of the current period
(``vigil.seen.<period>``, 2**23 bits = 1 MiB, periods of half ``VIGIL_FEEDBACK_SEEN_S``); a trace is known when all
its bits are set in the current or the previous period's bitmap. So a trace ingested within the last half window
(and at most a whole one) is never missed; a trace never ingested is taken for known about once in 200 at 500,000
traces a period, and then costs a rescore that finds nothing (``VIGIL_FEEDBACK_MAX_RESCORES`` still bounds those).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable

import redis

__all__ = ["BITS", "HASHES", "known", "mark", "positions"]

BITS = 2**23
HASHES = 3

# Whether every bit of each trace is set in KEYS[1] or KEYS[2]; ARGV: HASHES positions per trace. Returns 0/1 each.
_KNOWN = """
local out = {}
local n = tonumber(ARGV[1])
for i = 2, #ARGV, n do
  local found = 0
  for _, key in ipairs(KEYS) do
    local all = 1
    for j = 0, n - 1 do
      if redis.call('GETBIT', key, tonumber(ARGV[i + j])) == 0 then all = 0 break end
    end
    if all == 1 then found = 1 break end
  end
  out[#out + 1] = found
end
return out
"""


def positions(trace_id: str) -> list[int]:
    """The trace's ``HASHES`` bit positions (a pure function of its id)."""
    digest = hashlib.blake2b(trace_id.encode(), digest_size=4 * HASHES).digest()
    return [int.from_bytes(digest[4 * i:4 * i + 4], "big") % BITS for i in range(HASHES)]


def _period(window_s: int, now: float | None) -> int:
    return int((time.time() if now is None else now) // max(window_s // 2, 1))


def mark(pipe: redis.client.Pipeline, trace_ids: Iterable[str], *, window_s: int, now: float | None = None) -> None:
    """Queue on ``pipe`` the bits of ``trace_ids`` in the current period's bitmap."""
    key, ids = f"vigil.seen.{_period(window_s, now)}", set(trace_ids)
    for trace_id in ids:
        for position in positions(trace_id):
            pipe.setbit(key, position, 1)
    if ids:
        pipe.expire(key, window_s + 60)


def known(client: redis.Redis, trace_ids: list[str], *, window_s: int, now: float | None = None) -> set[str]:
    """Those of ``trace_ids`` ingest has taken in (this period or the one before), in one round trip."""
    if not trace_ids:
        return set()
    period = _period(window_s, now)
    found = client.register_script(_KNOWN)(keys=[f"vigil.seen.{period}", f"vigil.seen.{period - 1}"],
                                           args=[HASHES, *(p for t in trace_ids for p in positions(t))])
    return {trace_id for trace_id, hit in zip(trace_ids, found, strict=True) if hit}
