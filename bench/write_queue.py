"""What the write queue's byte budget and the writer's exact removal cost, against what they replaced, in the same
run on one redis-server: a push (the budget script vs a plain RPUSH) and clearing a flushed batch from an in-flight
list (exact removal when the list still begins with the batch, exact removal when it does not, vs LTRIM by count).

    python bench/write_queue.py [--pushes 5000] [--batch 1000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from hashlib import sha1
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.sinks.write_queue import WRITE_BYTES, WRITE_QUEUE, _push
from vigil.worker.sinks.writer import _REMOVE

ENTRY = json.dumps({"table": "scores", "rows": [{"trace_id": "t" * 32, "reason": "r" * 900}]}).encode()


def per_push_us(client: redis.Redis, push, pushes: int) -> float:
    client.delete(WRITE_QUEUE, WRITE_BYTES)
    started = time.perf_counter()
    for _ in range(pushes):
        push()
    return (time.perf_counter() - started) / pushes * 1e6


def clear_ms(client: redis.Redis, clear, batch: int, rounds: int, *, changed: bool) -> float:
    """Median time to clear a batch of ``batch`` entries; ``changed``: another entry was put at the list's head."""
    key, samples = "bench.inflight", []
    entries = [ENTRY + str(i).encode() for i in range(batch)]
    for _ in range(rounds):
        client.delete(key)
        client.rpush(key, *entries)
        if changed:
            client.lpush(key, b"moved here meanwhile")
        started = time.perf_counter()
        clear(key, entries)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pushes", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url)
        remove = client.register_script(_REMOVE)
        plain = per_push_us(client, lambda: client.rpush(WRITE_QUEUE, ENTRY), args.pushes)
        budget = per_push_us(client, lambda: _push(client, [ENTRY], 1 << 40), args.pushes)
        trim = clear_ms(client, lambda key, entries: client.ltrim(key, len(entries), -1), args.batch, args.rounds,
                        changed=False)

        def exact(key: str, entries: list[bytes]) -> None:
            remove(keys=[key, WRITE_BYTES], args=[sha1(e).hexdigest() for e in entries])

        head = clear_ms(client, exact, args.batch, args.rounds, changed=False)
        rebuilt = clear_ms(client, exact, args.batch, args.rounds, changed=True)
    print(f"write queue, {len(ENTRY)}-byte entries, one redis-server on 127.0.0.1")
    print(f"{'operation':<58}{'time':>12}{'ratio':>8}")
    print(f"{'push: plain RPUSH (before)':<58}{plain:>9.1f} us{1:>8.2f}")
    print(f"{'push: budget script (RPUSH + byte count, refusable)':<58}{budget:>9.1f} us{budget / plain:>8.2f}")
    print(f"{f'clear {args.batch} entries: LTRIM by count (before)':<58}{trim:>9.2f} ms{1:>8.2f}")
    print(f"{f'clear {args.batch} entries: exact, list begins with them':<58}{head:>9.2f} ms{head / trim:>8.2f}")
    print(f"{f'clear {args.batch} entries: exact, list changed (rebuilt)':<58}{rebuilt:>9.2f} ms{rebuilt / trim:>8.2f}")


if __name__ == "__main__":
    main()
