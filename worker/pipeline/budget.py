"""Judge budgets: what a monitor, and the whole deployment, may spend on its judges per UTC day (``budget:
{usd_per_day, tokens_per_day}`` in the config), kept by pacing the sampling rate, not by a cliff.

The rule. At any moment of the day the forecast is what is spent so far plus what the rest of the day would cost at
the traffic of the last hours: ``forecast = spent + due_per_s x seconds_left x rate/configured x cost_per_turn``,
where ``due_per_s`` counts the turns the monitor's configured rate samples (whatever the budget then did) and
``cost_per_turn`` is today's spend over today's judged turns. The rate is the configured one while that forecast is
under the budget, and otherwise the configured rate times the share of the remaining budget the rest of the day
would use (``remaining / expected``): spread evenly over the hours left, so no hour goes unmonitored. It never goes
above the configured rate. When the next turn would go over (``spent + cost_per_turn > limit``) the monitor pauses,
stage ``budget`` in the funnel with a log line naming the budget, and resumes at 00:00 UTC. The deployment's budget
paces every monitor by the same factor, from the sums.

Sampling stays deterministic on the trace id at the paced rate, so the turns kept are a uniform sample of the turns
due at each moment; every score records its inclusion probability (the rate it was sampled at), so means over a
period whose rate changed weigh each score by 1/probability (``weighted_mean``) and stay unbiased.

The ledger lives in the broker's Redis, shared by every worker:

- ``vigil.budget.<YYYY-MM-DD>`` (hash, kept 3 days): ``usd|<monitor>``, ``tokens|<monitor>``: spent today;
  ``admitted|<monitor>``: turns ingest sent to be scored; ``done|<monitor>``: turns whose score was written (the
  score task, ``record``). Admitted and not done are in flight: what they will spend is counted as committed, at
  today's cost per turn (yesterday's before today's first; with neither, ``PROBE_TURNS`` at a time), so a burst
  cannot start more turns than the budget has room for (``Pace.room``). A turn lost in flight (a crash) holds its
  place until the day ends.
- ``vigil.budget.due.<hour>`` (hash, kept 4 hours): ``<monitor>`` -> turns the configured rate sampled that hour
  (written by ingest, ``count``).
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vigil.schemas import MonitorConfig, Score
from vigil.schemas.config import Budget, VigilConfig

if TYPE_CHECKING:  # redis-py only names the clients here; `vigil alerts backtest` replays without importing it
    import redis

__all__ = ["BudgetLine", "Pace", "Spend", "both", "count", "current", "forecast", "lines", "pace", "paces", "read_spend", "record", "replay", "spend", "take",
           "weighted_mean"]

DAY_S = 86_400
HOUR_S = 3_600
TRAFFIC_HOURS = 3  # the forecast reads the traffic of the last hours (this one included)
DEPLOYMENT = "*"  # the ledger's name for every monitor together


def day_key(now: float) -> str:
    return "vigil.budget." + dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%d")


def due_key(hour: int) -> str:
    return f"vigil.budget.due.{hour}"


@dataclass(frozen=True)
class Spend:
    """One monitor's (or the deployment's) day so far: spent, the turns admitted and the turns done (a score
    written), the traffic due per second, and yesterday's cost per turn (the prior before today's first)."""

    usd: float = 0.0
    tokens: int = 0
    admitted: int = 0
    done: int = 0
    due_per_s: float = 0.0
    prior_usd: float | None = None
    prior_tokens: float | None = None

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.usd + other.usd, self.tokens + other.tokens, self.admitted + other.admitted,
                     self.done + other.done, self.due_per_s + other.due_per_s,
                     _sum(self.prior_usd, other.prior_usd), _sum(self.prior_tokens, other.prior_tokens))

    @property
    def in_flight(self) -> int:
        return max(0, self.admitted - self.done)

    def per_turn(self, what: str) -> float | None:
        """What one turn costs (``USD`` or ``tokens``): today's average, else yesterday's, else unknown."""
        spent = self.usd if what == "USD" else float(self.tokens)
        if self.done:
            return spent / self.done
        return self.prior_usd if what == "USD" else self.prior_tokens


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


@dataclass(frozen=True)
class Pace:
    """The rate to sample at now (``factor`` x the configured rate; 0 is paused), why when under 1, and ``room``:
    how many more turns may start now before what is spent and in flight reaches the budget (None: no limit)."""

    factor: float = 1.0
    reason: str = ""
    room: int | None = None

    @property
    def paused(self) -> bool:
        return self.factor <= 0.0 or self.room == 0


def _limits(budget: Budget | None, spend: Spend) -> list[tuple[str, float, float]]:
    """(what, limit, spent) for each limit the budget sets."""
    if budget is None:
        return []
    out = []
    if budget.usd_per_day is not None:
        out.append(("USD", budget.usd_per_day, spend.usd))
    if budget.tokens_per_day is not None:
        out.append(("tokens", float(budget.tokens_per_day), float(spend.tokens)))
    return out


def _amount(what: str, value: float) -> str:
    return f"${value:,.2f}" if what == "USD" else f"{value:,.0f} tokens"


PROBE_TURNS = 5  # with no cost known yet (a first day), turns in flight while the first costs come in


def pace(budget: Budget | None, spend: Spend, *, seconds_left: float, owner: str) -> Pace:
    """The pace for one budget, a pure function of the day so far. Per limit: what is spent plus what the turns in
    flight will spend is committed; ``room`` is how many more turns fit under the limit; the factor is 1 while the
    rest of the day at the configured rate fits in what is left, the share that fits otherwise. The smallest wins."""
    result = Pace()
    for what, limit, spent in _limits(budget, spend):
        per_turn = spend.per_turn(what)
        if per_turn is None:  # nothing known of the cost yet: a few turns at a time until it is
            room = max(0, PROBE_TURNS - spend.in_flight)
            candidate = Pace(1.0, f"{owner}: learning what a turn costs", room)
        else:
            left = limit - spent - spend.in_flight * per_turn
            room = max(0, math.floor(left / per_turn)) if per_turn > 0 else None
            if spent >= limit or room == 0:
                return Pace(0.0, f"{owner}'s judge budget of {_amount(what, limit)} a day is spent "
                                 f"({_amount(what, spent)}); it resumes at 00:00 UTC", 0)
            expected = spend.due_per_s * seconds_left * per_turn  # the rest of the day at the configured rate
            share = min(1.0, left / expected) if expected > 0 else 1.0
            candidate = Pace(share, f"{owner} paced to {share:.0%} of its rate to keep under "
                                    f"{_amount(what, limit)} a day" if share < 1 else "", room)
        result = Pace(min(result.factor, candidate.factor),
                      candidate.reason if candidate.factor < result.factor else result.reason or candidate.reason,
                      _min_room(result.room, candidate.room))
    return result


def _min_room(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def forecast(spend: Spend, factor: float, *, seconds_left: float) -> tuple[float, float]:
    """What the day will have cost at this pace: (USD, tokens)."""
    turns_left = spend.in_flight + spend.due_per_s * seconds_left * factor
    return (spend.usd + turns_left * (spend.per_turn("USD") or 0.0),
            spend.tokens + turns_left * (spend.per_turn("tokens") or 0.0))


def seconds_left(now: float) -> float:
    return DAY_S - (now % DAY_S)


def read_spend(client: redis.Redis, monitors: Iterable[str], now: float) -> dict[str, Spend]:
    """Today's ledger for each monitor and for the deployment (``DEPLOYMENT``), with the traffic of the last hours
    and yesterday's cost per turn."""
    names = list(monitors)
    hour = int(now // HOUR_S)
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(day_key(now))
    pipe.hgetall(day_key(now - DAY_S))
    for h in range(hour - TRAFFIC_HOURS + 1, hour + 1):
        pipe.hgetall(due_key(h))
    today, yesterday, *hours = (_floats(r) for r in pipe.execute())
    window_s = (TRAFFIC_HOURS - 1) * HOUR_S + (now % HOUR_S) or 1.0
    out = {}
    for name in names:
        before = yesterday.get(f"done|{name}", 0.0)
        out[name] = Spend(usd=today.get(f"usd|{name}", 0.0), tokens=int(today.get(f"tokens|{name}", 0)),
                          admitted=int(today.get(f"admitted|{name}", 0)), done=int(today.get(f"done|{name}", 0)),
                          due_per_s=sum(h.get(name, 0.0) for h in hours) / window_s,
                          prior_usd=yesterday.get(f"usd|{name}", 0.0) / before if before else None,
                          prior_tokens=yesterday.get(f"tokens|{name}", 0.0) / before if before else None)
    out[DEPLOYMENT] = sum(out.values(), Spend())
    return out


def _floats(raw: Mapping[bytes | str, bytes | str]) -> dict[str, float]:
    return {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}


def paces(client: redis.Redis, config: VigilConfig, now: float) -> dict[str, Pace]:
    """The pace of every monitor with a budget, its own and the deployment's together (the smaller factor and room
    win), and the deployment's own under ``DEPLOYMENT`` when it has a budget; monitors with neither are absent
    (their configured rate holds). Without a budget anywhere, no Redis is read."""
    budgeted = [m for m in config.monitors if m.budget is not None or config.budget is not None]
    if not budgeted:
        return {}
    spend = read_spend(client, [m.name for m in config.monitors], now)
    left = seconds_left(now)
    out = {}
    if config.budget is not None:
        out[DEPLOYMENT] = pace(config.budget, spend[DEPLOYMENT], seconds_left=left, owner="the deployment")
    for monitor in budgeted:
        own = pace(monitor.budget, spend[monitor.name], seconds_left=left, owner=f"monitor {monitor.name}")
        out[monitor.name] = both(own, out.get(DEPLOYMENT, Pace()))
    return out


def both(a: Pace, b: Pace) -> Pace:
    """Two paces at once: the smaller factor (with its reason) and the smaller room."""
    slower = a if a.factor <= b.factor else b
    reason = slower.reason or a.reason or b.reason
    return Pace(slower.factor, reason, _min_room(a.room, b.room))


def count(pipe: redis.client.Pipeline, due: Mapping[str, int], admitted: Mapping[str, int], now: float) -> None:
    """Add a batch's turns to the ledger: those each monitor's configured rate sampled (this hour's traffic) and
    those it admitted (in flight until their score is written)."""
    hour_key, today = due_key(int(now // HOUR_S)), day_key(now)
    for name, n in due.items():
        if n:
            pipe.hincrby(hour_key, name, n)
    for name, n in admitted.items():
        if n:
            pipe.hincrby(today, f"admitted|{name}", n)
    if any(due.values()):
        pipe.expire(hour_key, (TRAFFIC_HOURS + 1) * HOUR_S)
    if any(admitted.values()):
        pipe.expire(today, 3 * DAY_S)


def record(client: redis.Redis, scores: Iterable[Score], now: float) -> None:
    """Add each score to today's ledger, done, with what its judge calls cost (one round trip)."""
    key, pipe, rows = day_key(now), client.pipeline(transaction=False), list(scores)
    for row in rows:
        pipe.hincrbyfloat(key, f"usd|{row.monitor}", row.cost_usd)
        pipe.hincrby(key, f"tokens|{row.monitor}", row.prompt_tokens + row.completion_tokens)
        pipe.hincrby(key, f"done|{row.monitor}", 1)
    if rows:
        pipe.expire(key, 3 * DAY_S)
        pipe.execute()


def spend(client: redis.Redis, monitor: str, *, usd: float, tokens: int, turns: int, now: float) -> None:
    """Add spend that is not a live turn's score (an anchor run) to today's ledger; ``turns`` it stands for."""
    key, pipe = day_key(now), client.pipeline(transaction=False)
    pipe.hincrbyfloat(key, f"usd|{monitor}", usd)
    pipe.hincrby(key, f"tokens|{monitor}", tokens)
    if turns:
        pipe.hincrby(key, f"admitted|{monitor}", turns)
        pipe.hincrby(key, f"done|{monitor}", turns)
    pipe.expire(key, 3 * DAY_S)
    pipe.execute()


def weighted_mean(scores: Iterable[tuple[float, float]]) -> tuple[float, float] | None:
    """The mean of (score, inclusion probability) pairs weighted by 1/probability (Hajek), with its standard error
    (the linearised variance); None without scores. Equal probabilities give the plain mean."""
    pairs = [(s, 1.0 / p) for s, p in scores if p > 0]
    if not pairs:
        return None
    total = sum(w for _, w in pairs)
    mean = sum(s * w for s, w in pairs) / total
    n = len(pairs)
    if n < 2:
        return mean, math.nan
    var = sum((w * (s - mean)) ** 2 for s, w in pairs) / total**2 * n / (n - 1)
    return mean, math.sqrt(var)


def rate_for(monitor: MonitorConfig, pace: Pace | None) -> float:
    """The rate a monitor samples at now: its configured rate times its pace."""
    return monitor.sampling_rate * (pace.factor if pace else 1.0)


@dataclass(frozen=True)
class BudgetLine:
    """One row of ``vigil judge status``'s spend table: a monitor (or the deployment) today."""

    owner: str
    spent: str
    forecast: str
    budget: str
    state: str


def lines(client: redis.Redis, config: VigilConfig, now: float) -> list[BudgetLine]:
    """Spend today, the day's forecast at the current pace, and the budget, for every monitor that calls a judge
    and for the deployment when it has a budget."""
    judged = [m for m in config.monitors if m.judge and config.calls_judge(m)]
    spend = read_spend(client, [m.name for m in config.monitors], now)
    left, paced = seconds_left(now), paces(client, config, now)
    out = []
    owners: list[tuple[str, Budget | None, Spend, Pace]] = [
        (m.name, m.budget, spend[m.name], paced.get(m.name, Pace())) for m in judged]
    if config.budget is not None:
        owners.append(("(all monitors)", config.budget, spend[DEPLOYMENT],
                       pace(config.budget, spend[DEPLOYMENT], seconds_left=left, owner="the deployment")))
    for owner, limit, used, p in owners:
        usd, tokens = forecast(used, p.factor, seconds_left=left)
        out.append(BudgetLine(
            owner=owner, spent=f"${used.usd:,.4f} / {used.tokens:,} tokens ({used.done} turns)",
            forecast=f"${usd:,.4f} / {tokens:,.0f} tokens",
            budget=" / ".join(_amount(k, v) for k, v, _ in _limits(limit, used)) or "none",
            state="paused" if p.paused else f"paced to {p.factor:.0%}" if p.factor < 1 else "full rate"))
    return out


def take(paced: dict[str, Pace], name: str) -> None:
    """One turn admitted for monitor ``name`` in this batch: one place less in its room and the deployment's."""
    for key in (name, DEPLOYMENT):
        p = paced.get(key)
        if p is not None and p.room is not None:
            paced[key] = Pace(p.factor, p.reason, max(0, p.room - 1))


def current(paced: Mapping[str, Pace], name: str) -> Pace | None:
    """Monitor ``name``'s pace now, the deployment's room (shared by every monitor) included; None: no budget."""
    own = paced.get(name)
    if own is None or DEPLOYMENT not in paced:
        return own
    return both(own, paced[DEPLOYMENT])


def replay(ts: Sequence[float], points: Sequence[float], usd: Sequence[float], tokens: Sequence[float],
           limit: Budget, rate: float) -> list[bool]:
    """Which of a stream's turns a budget would have kept (``vigil alerts backtest``): each turn, in time order,
    through the same ``pace`` ingest uses, with the ledger kept in memory (the day's spend and done turns, the
    traffic of the hours the live forecast reads, yesterday's cost per turn). ``points``: the turns' sample points
    (``sampling.sample_point``); ``rate``: the configured rate they were sampled at; a turn is kept when its point
    falls under the paced rate, as ingest decides."""
    keep = [False] * len(ts)
    day, used_usd, used_tokens, done, prior = None, 0.0, 0.0, 0, (None, None)
    for i, at in enumerate(ts):
        if int(at // DAY_S) != day:
            if done:
                prior = (used_usd / done, used_tokens / done)
            day, used_usd, used_tokens, done = int(at // DAY_S), 0.0, 0.0, 0
        hour_start = (int(at // HOUR_S) - TRAFFIC_HOURS + 1) * HOUR_S
        due = i - bisect.bisect_left(ts, hour_start, 0, i)  # the turns due in the hours the forecast reads
        window_s = (TRAFFIC_HOURS - 1) * HOUR_S + (at % HOUR_S) or 1.0
        spend = Spend(usd=used_usd, tokens=int(used_tokens), admitted=done, done=done, due_per_s=due / window_s,
                      prior_usd=prior[0], prior_tokens=prior[1])
        p = pace(limit, spend, seconds_left=seconds_left(at), owner="")
        if not p.paused and points[i] < rate * p.factor:
            keep[i] = True
            used_usd, used_tokens, done = used_usd + usd[i], used_tokens + tokens[i], done + 1
    return keep
