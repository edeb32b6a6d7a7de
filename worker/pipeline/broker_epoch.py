"""Broker epochs: how vigil knows the broker came back empty, so the work it lost is counted and named.

Redis restarted without persistence (or flushed) keeps nothing: the queued score tasks and the turns they point to
are gone, while their turns' ``sampled`` stage is already in ClickHouse. vigil keeps one key in the broker,
``vigil.broker.epoch``, set once with ``SET NX``; the writer looks for it at start and every few seconds. Finding it
missing, the writer starts a new epoch and records it in ``broker_epochs`` with the one it replaces: from then on a
turn sampled before the reset that never got an outcome (scored, abstained, unscored, not_applicable, failed) is **lost** in the
coverage funnel, the report and the dashboard. The reset time is the broker's start when its run id changed (a
restart: work queued after it is in the new broker; Redis states it to the second, so the end of that second), else
the moment the key was found missing (a flush). Lost is
counted when read: a task that was running during the reset and writes its outcome afterwards is not lost.

What this does not see: a broker that persists only RDB snapshots loses what arrived since the last one but keeps
the key; an eviction policy other than ``noeviction`` could evict the key and count a reset that lost nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from vigil.schemas.rows import BrokerEpoch

__all__ = ["EPOCH_KEY", "Epoch", "abandon", "begin", "epoch_row", "reset_at"]

EPOCH_KEY = "vigil.broker.epoch"


@dataclass(frozen=True)
class Epoch:
    """An epoch this process started: its id, the broker's run id and how long the broker had been up then."""

    id: str
    run_id: str
    uptime_s: float
    started: float


def begin(client: redis.Redis, *, now: float | None = None) -> Epoch | None:
    """Start an epoch when the broker has none (one ``SET NX``: of writers racing, one wins); None when it has one."""
    now = time.time() if now is None else now
    server = client.info("server")
    epoch = Epoch(id=uuid.uuid4().hex, run_id=str(server.get("run_id", "")),
                  uptime_s=float(server.get("uptime_in_seconds", 0)), started=now)
    if not client.set(EPOCH_KEY, json.dumps({"id": epoch.id, "run_id": epoch.run_id, "started": now}), nx=True):
        return None
    return epoch


_ABANDON = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def abandon(client: redis.Redis, epoch: Epoch) -> None:
    """Take back an epoch that could not be recorded (the store refused it), so the next check starts it again."""
    value = client.get(EPOCH_KEY)
    if value is not None and json.loads(value).get("id") == epoch.id:
        client.eval(_ABANDON, 1, EPOCH_KEY, value)  # still ours: another writer may have started one since


def reset_at(epoch: Epoch, previous_run_id: str) -> float:
    """When the broker lost its work: the end of the second it started in, if it restarted since the previous epoch,
    else now (a flush).

    Redis knows its start only to the second (``uptime_in_seconds`` counts from ``time(NULL)`` at start), so the
    restart happened in the second after ``started - uptime``: dated from that second's start, a turn sampled on the
    old broker in the same second (the reset noticed seconds later) was not counted lost. Dated from its end, a turn
    sampled on the new broker in its first second counts as lost only until its outcome is written."""
    if previous_run_id and previous_run_id != epoch.run_id:
        return min(epoch.started, epoch.started - epoch.uptime_s + 1.0)
    return epoch.started


def epoch_row(epoch: Epoch, previous: tuple[str, str] | None) -> BrokerEpoch:
    """The ``broker_epochs`` row for a new epoch; ``previous`` is the last recorded (epoch, run id), if any."""
    prev_epoch, prev_run = previous or ("", "")
    when = reset_at(epoch, prev_run) if prev_epoch else epoch.started
    return BrokerEpoch(epoch=epoch.id, previous=prev_epoch, run_id=epoch.run_id,
                       reset_at=datetime.fromtimestamp(when, UTC), started_at=datetime.fromtimestamp(epoch.started, UTC))
