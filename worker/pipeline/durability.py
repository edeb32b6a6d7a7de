"""Whether the broker keeps what it holds across a restart: vigil's delivery guarantee assumes it does.

A Redis without AOF or RDB loses every queued turn when it restarts, and nothing downstream can notice except the
delivery accounting (``producer_batches``). ``vigil worker`` checks at start and says so loudly.
"""

from __future__ import annotations

import redis

__all__ = ["persistence_problem"]

ADVICE = "set appendonly yes and appendfsync everysec on the broker (see README, Delivery)"


def persistence_problem(client: redis.Redis) -> str | None:
    """What the broker will lose on a restart, or None when it persists (AOF, or at least RDB snapshots)."""
    try:
        aof = client.config_get("appendonly").get("appendonly")
        save = client.config_get("save").get("save")
    except redis.ResponseError:  # CONFIG renamed or refused (managed Redis): INFO still says whether AOF is on
        info = client.info("persistence")
        if info.get("aof_enabled"):
            return None
        return f"cannot read the broker's persistence settings and AOF is off: a restart may lose queued turns; {ADVICE}"
    if aof == "yes":
        return None
    if not save:
        return f"the broker has neither AOF nor RDB persistence: a Redis restart loses every queued turn; {ADVICE}"
    return f"the broker persists RDB snapshots only ({save}): a restart loses what arrived since the last one; {ADVICE}"
