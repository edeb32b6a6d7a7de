"""Work for a paused judge waits in Redis, not in a worker's memory.

A score task whose judge is paused (401/402/404, ``vigil.worker.judge.pause``) used to retry with a countdown; Celery
keeps such ETA tasks in the worker that received them (prefetch does not bound them), so a long pause under load
grew every worker's memory by every waiting turn. Now the task publishes the monitors still to do onto the judge's
own list, ``vigil.parked.<judge>`` (journaled like every queue: kill -9 loses nothing), and is acked. No worker
consumes those lists. Every worker runs a mover (a thread, every ``VIGIL_PAUSED_RETRY`` seconds): for each judge
with parked work that this worker would call (no pause, or a pause recorded for a configuration other than this
worker's, which its first call lifts), it moves the oldest parked tasks back onto the score queue, atomically (one
``LMOVE`` and the journal entry in one script), no more than the score queue's bound has room for. ``vigil judge
resume`` moves them at once.
"""

from __future__ import annotations

import json
import threading

import redis
import structlog
from vigil.schemas.broker import JOURNAL, PARKED_PREFIX, SCORE_QUEUE
from vigil.worker.judge.pause import PAUSED_KEY, config_fingerprint

__all__ = ["MOVE_BATCH", "PARKED_JUDGES", "Mover", "fingerprints", "parked", "parked_queue", "register", "release",
           "room", "start_mover"]

log = structlog.get_logger("vigil.parked")

MOVE_BATCH = 1000  # tasks moved per script call
PARKED_JUDGES = "vigil.parked:judges"  # a set: the judges whose lists to look at

# KEYS: parked list, score queue, journal. ARGV: how many. Moves the oldest items and points their journal entries
# at the score queue (the recovery sweep looks for a journaled message in the list its entry names).
_MOVE = """
local moved = 0
for i = 1, tonumber(ARGV[1]) do
  local item = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not item then break end
  local ok, message = pcall(cjson.decode, item)
  if ok and type(message) == 'table' and type(message.properties) == 'table' then
    local tag = message.properties.delivery_tag
    if type(tag) == 'string' and redis.call('HEXISTS', KEYS[3], tag) == 1 then
      redis.call('HSET', KEYS[3], tag, cjson.encode({item, KEYS[2]}))
    end
  end
  moved = moved + 1
end
return moved
"""


def parked_queue(judge: str) -> str:
    return f"{PARKED_PREFIX}{judge}"


def register(client: redis.Redis, judges: list[str]) -> None:
    """Remember that these judges have (or had) parked work: ``parked`` looks only at them, never SCANs the keys."""
    if judges:
        client.sadd(PARKED_JUDGES, *judges)


def parked(client: redis.Redis) -> dict[str, int]:
    """Parked score tasks per judge."""
    judges = sorted(j.decode() if isinstance(j, bytes) else j for j in client.smembers(PARKED_JUDGES))
    if not judges:
        return {}
    pipe = client.pipeline(transaction=False)
    for judge in judges:
        pipe.llen(parked_queue(judge))
    return dict(zip(judges, pipe.execute(), strict=True))


def release(client: redis.Redis, judge: str, limit: int) -> int:
    """Move up to ``limit`` of ``judge``'s parked tasks (oldest first) onto the score queue; how many moved."""
    moved, script = 0, client.register_script(_MOVE)
    while moved < limit:
        step = int(script(keys=[parked_queue(judge), SCORE_QUEUE, JOURNAL], args=[min(MOVE_BATCH, limit - moved)]))
        moved += step
        if step == 0:
            break
    return moved


def room(client: redis.Redis, bound: int) -> int:
    """How many tasks the score queue takes before its bound (``VIGIL_SCORE_QUEUE_MAX``; 0: no bound)."""
    return MOVE_BATCH * 10 if bound <= 0 else max(0, bound - client.llen(SCORE_QUEUE))


class Mover:
    """The thread that releases parked work for judges this worker would call."""

    def __init__(self, client: redis.Redis, fingerprints: dict[str, str], *, interval: float, bound: int):
        self.client, self.fingerprints, self.interval, self.bound = client, fingerprints, interval, bound
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vigil-parked-mover", daemon=True)

    def callable_judges(self, waiting: list[str]) -> list[str]:
        """Of the judges with parked work, those this worker would call now."""
        pauses = self.client.hmget(PAUSED_KEY, waiting) if waiting else []
        out = []
        for judge, raw in zip(waiting, pauses, strict=True):
            if raw is not None:
                refused = json.loads(raw).get("fingerprint", "")
                mine = self.fingerprints.get(judge)
                if not refused or mine is None or mine == refused:
                    continue  # still paused for this worker's configuration
            out.append(judge)
        return out

    def tick(self) -> int:
        waiting = [judge for judge, n in parked(self.client).items() if n]
        moved = 0
        for judge in self.callable_judges(waiting):
            room_left = room(self.client, self.bound)
            if room_left <= 0:
                break
            step = release(self.client, judge, room_left)
            if step:
                log.info("paused judge's work released", judge=judge, tasks=step)
            moved += step
        return moved

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except (redis.ConnectionError, redis.TimeoutError) as exc:  # the broker watch says so, once per interval
                log.debug("could not release parked work; trying again", error=str(exc)[:200])
            except redis.RedisError as exc:
                log.warning("could not release parked work; trying again", error=str(exc)[:200])

    def start(self) -> Mover:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval + 5)


def fingerprints(config) -> dict[str, str]:
    return {judge.name: config_fingerprint(judge) for judge in config.judges}


def start_mover() -> Mover:
    """This worker process's mover, on the runtime's Redis client and config."""
    from vigil.worker.pipeline.runtime import runtime
    from vigil.worker.settings import get_settings

    rt, settings = runtime(), get_settings()
    return Mover(rt.redis, fingerprints(rt.config), interval=settings.paused_retry_s,
                 bound=settings.score_queue_max).start()
