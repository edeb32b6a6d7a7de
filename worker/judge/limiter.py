"""The global rate limit of one judge, shared by every worker process on every host through Redis.

Two token buckets per judge (requests and tokens) live in one Redis hash and are updated by one Lua script, so
checking both and taking from both is atomic. A denied caller is told how long until the bucket holds what it
needs, and sleeps exactly that long: no polling loop. Why not ``limits`` or ``pyrate-limiter``: both keep a log of
timestamps in which a weighted hit is stored as ``weight`` entries (thousands per call for tokens per minute), they
cannot refund tokens when the reported usage comes back lower than the estimate, they check requests and tokens in
separate calls (a hit on one leaks when the other refuses), and neither shares a judge fairly between monitors.

**Never over the limit.** A bucket of capacity ``B`` refilled at ``r`` per second grants fewer than ``B + r*T``
calls in any ``T`` seconds. With ``r = (L - B + 1) / (window + guard)`` at most ``L`` calls fall in any ``window``
even when a call reaches the server up to ``guard`` seconds later than it was granted (scheduling, the network).
At 600 rpm with the defaults that is 593 granted per minute, steadily, instead of 600 in a burst.

**Adaptive.** A 429 multiplies the judge's rate by ``decrease`` (once per ``cooldown_s``: the server needs a window
to forget); the factor then recovers linearly by ``recovery_per_window`` per window. A 429 also holds the whole
judge: for the server's Retry-After when it sent one, else for ``refusal_hold_s``, doubled each time the first
call after a hold is refused again (a window that is still full), up to a quarter window. Factor and hold live in
the same Redis hash, so every worker slows down together.

**Fair.** Each monitor has a virtual time in Redis (start-time fair queueing): a grant advances the monitor's time
by one, a monitor that comes back from idle starts at the judge's current virtual time (no banked credit), and
while several monitors wait, only one whose time is not ahead of any other waiting monitor may take a token. So
two busy monitors alternate, whatever the number of their queued calls or the processes they run in. In each
process, ``Limiter`` keeps one FIFO per monitor and asks Redis for them in round-robin, one request at a time, and
counts calls in flight against ``max_concurrency`` before it takes a token (a token taken and then held back by
a local semaphore would let late sends bunch up over the limit).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from redis.asyncio import Redis
from vigil.schemas import JudgeConfig

__all__ = ["MAX_RETRY_AFTER_S", "Decision", "Limiter", "RateBackend", "RateLimits", "RedisRateBackend", "Slot",
           "clear_hold", "limiter_key"]

# The longest Retry-After honoured (what the openai client itself honours): one server's "come back tomorrow" must
# not hold every worker for a day; a judge still refusing after that is refused again and held again.
MAX_RETRY_AFTER_S = 60.0

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RateLimits:
    """A judge's limits and the shape of its buckets. ``None`` rpm/tpm: that dimension is not limited."""

    rpm: int | None
    tpm: int | None = None
    window_s: float = 60.0  # the provider's window: ``rpm`` calls per this many seconds
    guard_s: float = 0.5  # the most a call may arrive later than its grant and still be counted right
    burst: int = 3  # requests the bucket holds when idle, at most 0.5% of rpm
    token_burst_fraction: float = 0.02  # of tpm
    decrease: float = 0.95
    min_factor: float = 0.25
    cooldown_s: float | None = None  # None: one window
    recovery_per_window: float = 0.05
    refusal_hold_s: float = 1.0
    hold_s: float = 1.0  # how long a denied monitor still counts as waiting after its told wait

    @classmethod
    def of(cls, config: JudgeConfig, **shape: float) -> RateLimits:
        return cls(rpm=config.rpm, tpm=config.tpm, **shape)  # type: ignore[arg-type]

    @property
    def limited(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    @property
    def request_capacity(self) -> float:
        return float(max(1, min(self.burst, int((self.rpm or 0) * 0.005))))

    @property
    def request_rate(self) -> float:
        """Requests per second at factor 1; 0 means unlimited."""
        if self.rpm is None:
            return 0.0
        return (self.rpm - self.request_capacity + 1) / (self.window_s + self.guard_s)

    @property
    def token_capacity(self) -> float:
        return max(1.0, (self.tpm or 0) * self.token_burst_fraction)

    @property
    def token_rate(self) -> float:
        if self.tpm is None:
            return 0.0
        return (self.tpm - self.token_capacity) / (self.window_s + self.guard_s)

    @property
    def recovery_per_s(self) -> float:
        return self.recovery_per_window / self.window_s


# Shared by both scripts: bring the buckets and the adaptive factor up to ``now``.
_REFILL = """
redis.replicate_commands()
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local req_rate, req_cap = tonumber(ARGV[2]), tonumber(ARGV[3])
local tok_rate, tok_cap = tonumber(ARGV[4]), tonumber(ARGV[5])
local recover, ttl = tonumber(ARGV[6]), tonumber(ARGV[7])
local s = redis.call('HMGET', KEYS[1], 'req', 'tok', 'at', 'factor', 'cut_at', 'held_until', 'streak')
local at = tonumber(s[3]) or now
local dt = math.max(0, now - at)
local factor = math.min(1, (tonumber(s[4]) or 1) + recover * dt)
local req = math.min(req_cap, (tonumber(s[1]) or req_cap) + dt * req_rate * factor)
local tok = math.min(tok_cap, (tonumber(s[2]) or tok_cap) + dt * tok_rate * factor)
local cut_at, held_until, streak = tonumber(s[5]) or 0, tonumber(s[6]) or 0, tonumber(s[7]) or 0
local function num(x) return string.format('%.17g', x) end
local function save()
  redis.call('HSET', KEYS[1], 'req', num(req), 'tok', num(tok), 'at', num(math.max(at, now)),
             'factor', num(factor), 'cut_at', num(cut_at), 'held_until', num(held_until), 'streak', streak)
  redis.call('EXPIRE', KEYS[1], ttl)
end
"""

# KEYS: state, virtual times, waiting monitors. ARGV[8..12]: monitor, tokens, hold_s, more (1: the caller has more
# calls queued for this monitor, so it keeps counting as waiting after this grant), refund (tokens the caller's
# earlier calls used fewer than estimated, given back here; never past the bucket's capacity).
_ACQUIRE = _REFILL + """
local monitor, tokens, hold, more = ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11] == '1'
local refund = tonumber(ARGV[12]) or 0
if refund > 0 then tok = math.min(tok_cap, tok + refund) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local vnow = tonumber(redis.call('HGET', KEYS[2], '*')) or 0
local mine = math.max(tonumber(redis.call('HGET', KEYS[2], monitor)) or 0, vnow)
local turn = true
for _, other in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if other ~= monitor and mine > (tonumber(redis.call('HGET', KEYS[2], other)) or 0) then turn = false end
end
local need = math.min(tokens, tok_cap)
local req_ok = req_rate == 0 or req >= 1 - 1e-9
local tok_ok = tok_rate == 0 or tok >= need - 1e-6
if req_ok and tok_ok and turn then
  req = req - 1
  tok = tok - tokens
  redis.call('HSET', KEYS[2], monitor, num(mine + 1), '*', num(math.max(vnow, mine)))
  redis.call('EXPIRE', KEYS[2], ttl)
  if more then
    local next_in = 0
    if req_rate > 0 then next_in = math.max(0, 1 - req) / (req_rate * factor) end
    redis.call('ZADD', KEYS[3], 'GT', now + next_in + hold, monitor)
    redis.call('EXPIRE', KEYS[3], ttl)
  end
  save()
  return {1, '0', num(factor)}
end
local wait = 0
if not req_ok then wait = (1 - req) / (req_rate * factor) end
if not tok_ok then wait = math.max(wait, (need - tok) / (tok_rate * factor)) end
if wait == 0 then
  if req_rate > 0 then wait = math.min(hold, 1 / (req_rate * factor)) else wait = hold / 10 end
end
redis.call('HSET', KEYS[2], monitor, num(mine))
redis.call('ZADD', KEYS[3], 'GT', now + wait + hold, monitor)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
save()
return {0, num(wait), num(factor)}
"""

# KEYS: state. ARGV[8..12]: decrease, min_factor, cooldown_s, refusal_hold_s, retry_after ('' when none).
_PENALIZE = _REFILL + """
local decrease, min_factor, cooldown = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local base_hold, retry_after = tonumber(ARGV[11]), tonumber(ARGV[12])
local cut = 0
if now - cut_at >= cooldown then
  factor = math.max(min_factor, factor * decrease)
  cut_at = now
  cut = 1
end
local hold = 0
if retry_after then
  hold = retry_after
elseif now >= held_until then  -- refused after the last hold ended: the window is still full
  if now - held_until > cooldown then streak = 0 end
  hold = math.min(cooldown / 4, base_hold * 2 ^ streak)
  streak = streak + 1
end
held_until = math.max(held_until, now + hold)
req = math.min(req, -(held_until - now) * req_rate * factor)
tok = math.min(tok, -(held_until - now) * tok_rate * factor)
save()
return {num(factor), cut}
"""

# KEYS: state. Lifts a hold (negative buckets, held_until); keeps the adaptive factor. 1 when one was in force.
_CLEAR_HOLD = """
local s = redis.call('HMGET', KEYS[1], 'req', 'tok', 'held_until')
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local held = (tonumber(s[3]) or 0) > now or (tonumber(s[1]) or 0) < 0 or (tonumber(s[2]) or 0) < 0
if not held then return 0 end
redis.call('HSET', KEYS[1], 'req', math.max(tonumber(s[1]) or 0, 0), 'tok', math.max(tonumber(s[2]) or 0, 0),
           'held_until', 0, 'streak', 0)
return 1
"""

# KEYS: state. ARGV: the Lua refill arguments. Only reads.
_FACTOR = _REFILL + "return num(factor)"


async def clear_hold(redis: Redis, judge: str) -> bool:
    """Lift a 429 hold on ``judge`` for every worker (``vigil judge resume``); False when none was in force."""
    return bool(int(await redis.eval(_CLEAR_HOLD, 1, limiter_key(judge))))


def limiter_key(judge: str) -> str:
    """The Redis hash holding a judge's buckets and adaptive factor (``vigil judge status`` reads it)."""
    return f"vigil:judge:{{{judge}}}:limiter"


@dataclass(frozen=True)
class Decision:
    granted: bool
    wait_s: float = 0.0
    factor: float = 1.0


class RateBackend(Protocol):
    """Where the buckets live. The one production backend is Redis; the seam is for the next store."""

    async def acquire(self, monitor: str, tokens: int, *, more: bool = False, refund: int = 0) -> Decision: ...

    async def reconcile(self, delta_tokens: int) -> None: ...

    async def penalize(self, retry_after: float | None = None) -> tuple[float, bool]: ...


class RedisRateBackend:
    """One judge's buckets in Redis. ``clock`` (Unix seconds) is for tests; by default Redis's own ``TIME`` is the
    clock, so hosts with skewed clocks still agree."""

    _TTL_S = 86_400

    def __init__(self, redis: Redis, judge: str, limits: RateLimits, *,
                 clock: Callable[[], float] | None = None) -> None:
        self.limits = limits
        self.clock = clock
        self.keys = [limiter_key(judge), f"vigil:judge:{{{judge}}}:vtime", f"vigil:judge:{{{judge}}}:waiting"]
        self._acquire = redis.register_script(_ACQUIRE)
        self._penalize = redis.register_script(_PENALIZE)
        self._factor = redis.register_script(_FACTOR)
        self._redis = redis

    def _refill_args(self) -> list[str | float]:
        lim = self.limits
        return ["" if self.clock is None else repr(self.clock()), lim.request_rate, lim.request_capacity,
                lim.token_rate, lim.token_capacity, lim.recovery_per_s, self._TTL_S]

    async def acquire(self, monitor: str, tokens: int, *, more: bool = False, refund: int = 0) -> Decision:
        """Take a request (and ``tokens``) for ``monitor`` if the buckets hold them and it is the monitor's turn;
        else say how long to wait. ``more``: this caller has further calls queued for the monitor. ``refund``:
        tokens earlier calls used fewer than estimated, put back first (granted or not)."""
        granted, wait, factor = await self._acquire(
            keys=self.keys,
            args=[*self._refill_args(), monitor, max(0, tokens), self.limits.hold_s, "1" if more else "0",
                  max(0, refund)])
        return Decision(bool(int(granted)), float(wait), float(factor))

    async def reconcile(self, delta_tokens: int) -> None:
        """The call used ``delta_tokens`` more than estimated (negative: fewer, refunded)."""
        if delta_tokens and self.limits.tpm is not None:
            await self._redis.hincrbyfloat(self.keys[0], "tok", -delta_tokens)

    async def penalize(self, retry_after: float | None = None) -> tuple[float, bool]:
        """The judge answered 429: hold every worker and slow them down. Returns the factor, and whether this 429
        cut it (one per cooldown does; the rest of a storm only extends the hold)."""
        lim = self.limits
        cooldown = lim.window_s if lim.cooldown_s is None else lim.cooldown_s
        if retry_after is not None:
            retry_after = min(retry_after, MAX_RETRY_AFTER_S)
        args = [*self._refill_args(), lim.decrease, lim.min_factor, cooldown, lim.refusal_hold_s,
                "" if retry_after is None else repr(retry_after)]
        factor, cut = await self._penalize(keys=self.keys[:1], args=args)
        return float(factor), bool(int(cut))

    async def factor(self) -> float:
        """The judge's current rate factor (1: full rate)."""
        return float(await self._factor(keys=self.keys[:1], args=self._refill_args()))


@dataclass
class _Waiter:
    tokens: int
    future: asyncio.Future[Decision]


@dataclass
class Slot:
    """Permission for one call. ``reconcile`` corrects the token estimate with the reported usage."""

    tokens: int
    wait_s: float
    limiter: Limiter = field(repr=False)

    async def reconcile(self, used_tokens: int) -> None:
        await self.limiter.reconcile(used_tokens - self.tokens)


class Limiter:
    """One judge in one process: per-monitor FIFOs, a round-robin dispatcher, ``max_concurrency`` calls in flight.

    ``async with limiter.slot(monitor, tokens) as slot:`` waits for a local concurrency slot and a global token;
    ``backend=None`` limits concurrency only (no rpm/tpm configured)."""

    def __init__(self, backend: RateBackend | None, *, max_concurrency: int) -> None:
        self.backend = backend
        self.max_concurrency = max_concurrency
        self.in_flight = 0
        self._queues: dict[str, deque[_Waiter]] = {}
        self._order: deque[str] = deque()
        self._wake = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._owed = 0  # tokens this process's calls used fewer than estimated, given back with its next acquire

    @asynccontextmanager
    async def slot(self, monitor: str = "", tokens: int = 0) -> AsyncIterator[Slot]:
        started = time.monotonic()
        await self._admit(monitor, tokens)
        try:
            yield Slot(tokens=tokens, wait_s=time.monotonic() - started, limiter=self)
        finally:
            self._release()

    async def reconcile(self, delta_tokens: int) -> None:
        """A call used ``delta_tokens`` more than its estimate. More is taken from the judge's bucket at once, so no
        worker is granted tokens that are gone; fewer (the usual case: the estimate counts a full reply) is owed
        and given back with this process's next acquire, not in a Redis round trip of its own. Until then the
        judge runs a little under its limit, never over; a process that makes no further call gives nothing back,
        which the bucket's refill makes up."""
        if self.backend is None or delta_tokens == 0:
            return
        if delta_tokens < 0:
            self._owed -= delta_tokens
            return
        await self.backend.reconcile(delta_tokens)

    def waiting(self) -> dict[str, int]:
        """Calls queued per monitor in this process."""
        counts = {m: sum(1 for w in q if not w.future.done()) for m, q in self._queues.items()}
        return {m: n for m, n in counts.items() if n}

    async def _admit(self, monitor: str, tokens: int) -> None:
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        queue = self._queues.get(monitor)
        if queue is None:
            queue = self._queues[monitor] = deque()
            self._order.append(monitor)
        queue.append(_Waiter(tokens, future))
        if len(queue) == 1:
            self._wake.set()
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch(), name="vigil-limiter")
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # granted in the same tick as the cancellation
            raise

    def _release(self) -> None:
        self.in_flight -= 1
        if self.in_flight == self.max_concurrency - 1:
            self._wake.set()

    def _live_head(self, monitor: str) -> _Waiter | None:
        queue = self._queues[monitor]
        while queue and queue[0].future.done():
            queue.popleft()
        if not queue:
            del self._queues[monitor]
            self._order.remove(monitor)
            return None
        return queue[0]

    async def _dispatch(self) -> None:
        try:
            while self._order:
                self._wake.clear()  # at the start of a pass: a wake-up during the pass is not lost
                waits: list[float] = []
                granted = False
                for monitor in list(self._order):
                    if self.in_flight >= self.max_concurrency:
                        break
                    waiter = self._live_head(monitor)
                    if waiter is None:
                        continue
                    more = len(self._queues[monitor]) > 1
                    decision = await self._acquire(monitor, waiter.tokens, more)
                    if not decision.granted:
                        waits.append(decision.wait_s)
                        continue
                    waiter = self._live_head(monitor)  # the head may have given up while Redis answered
                    if waiter is not None:
                        self._queues[monitor].popleft()
                        self.in_flight += 1
                        waiter.future.set_result(decision)
                        granted = True
                self._order.rotate(-1)
                if not granted and self._order:
                    await self._sleep(min(waits) if waits else None)  # None: until a call in flight ends
        except Exception as exc:  # Redis is gone: every waiter learns it, none hangs
            log.error("judge_limiter_failed", error=repr(exc))
            for queue in self._queues.values():
                for waiter in queue:
                    if not waiter.future.done():
                        waiter.future.set_exception(exc)
            self._queues.clear()
            self._order.clear()

    async def _acquire(self, monitor: str, tokens: int, more: bool) -> Decision:
        if self.backend is None:
            return Decision(True)
        refund, self._owed = self._owed, 0
        return await self.backend.acquire(monitor, tokens, more=more, refund=refund)

    async def _sleep(self, timeout: float | None) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            pass
