"""The digests that say which turn ids are stored (``vigil.worker.pipeline.ownership``), on a real redis-server: how
long they are kept, and what each costs, since every stored turn leaves one (issue 26: a flood of one-span traces
must leave Redis within 30 MB of idle)."""

from __future__ import annotations

import time

import redis
from vigil.schemas import Turn
from vigil.worker.pipeline import ownership

DAY = 86400


def _turns(count: int, answer: str = "fine", prefix: str = "t") -> list[Turn]:
    return [Turn(project="acme", agent="bot", trace_id=f"{prefix}{i:031x}", span_id=f"{i:016x}", input=[{"role": "user", "content": "q?"}],
                 output=answer) for i in range(count)]


def _raws(turns: list[Turn]) -> list[dict]:
    return [t.model_dump(mode="json") for t in turns]


def test_a_digest_is_found_for_at_least_the_owned_time_and_gone_after_twice_it(redis_url):
    client = redis.Redis.from_url(redis_url)
    turns = _turns(3)
    start = (time.time() // DAY + 0.999) * DAY  # the end of a period: the shortest a digest can be kept
    ownership.claim(client, turns, [ownership._digest(r) for r in _raws(turns)], ttl_s=DAY, now=start)

    for now in (start, start + DAY - 1):
        again = ownership.screen(client, turns, _raws(turns), ttl_s=DAY, now=now)
        assert (again.keep, again.repeats) == ([], 3)
        other = ownership.screen(client, turns, _raws(_turns(3, answer="changed")), ttl_s=DAY, now=now)
        assert [e.stage for e in other.conflicts] == ["conflict"] * 3
    later = ownership.screen(client, turns, _raws(turns), ttl_s=DAY, now=start + 2 * DAY)
    assert [i for i, _ in later.keep] == [0, 1, 2]  # two periods on: taken as new
    deadline = max(client.ttl(k) for k in client.scan_iter("vigil.turn.*"))
    assert 0 < deadline  # the period's hashes expire on their own (at the end of the next period)


def test_a_stored_turn_id_costs_redis_tens_of_bytes_not_a_key_each(redis_url):
    client = redis.Redis.from_url(redis_url)
    turns = _turns(20_000, prefix="f")
    idle = client.info("memory")["used_memory"]
    for start in range(0, len(turns), 1000):
        batch = turns[start:start + 1000]
        ownership.claim(client, batch, [ownership._digest(r) for r in _raws(batch)], ttl_s=DAY)
    per_turn = (client.info("memory")["used_memory"] - idle) / len(turns)
    assert per_turn < 60, per_turn  # a key per turn id was ~165 bytes
