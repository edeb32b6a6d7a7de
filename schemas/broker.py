"""The queue contract: Celery's Redis transport with a journal, so a delivery lost to a kill is delivered again.

kombu's Redis transport pops a message with BRPOP and only then records it as unacked; a process killed between
the two loses the message for good. Every publish here (the SDK's and the worker's) also records the message in a
journal, in the same MULTI/EXEC as the LPUSH; an ack or a final reject removes it. The periodic sweep that restores
unacked messages also looks at journal entries older than the visibility timeout: one that is neither unacked nor
still waiting in its queue was lost in that window, and goes back on its queue. Redelivery may duplicate work,
never lose it (vigil's rows have deterministic ids).

Both sides use it through Celery: ``broker_transport = "schemas.broker:Transport"`` with a ``redis://`` URL.
"""

from __future__ import annotations

from time import time

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.json import dumps, loads

__all__ = [
    "ALERTS_QUEUE", "INGEST_QUEUE", "INGEST_TASK", "JOURNAL", "JOURNAL_INDEX", "SCORE_QUEUE", "TRANSPORT", "Channel",
    "QoS", "Transport",
]

INGEST_TASK = "vigil.ingest"  # args: [batch], a list of turn dicts (schemas.Turn, validated by the worker)
INGEST_QUEUE = "vigil.ingest"
SCORE_QUEUE = "vigil.score"
ALERTS_QUEUE = "vigil.alerts"  # consumed only by writer processes: the alert check needs the store
JOURNALED = frozenset({INGEST_QUEUE, SCORE_QUEUE, ALERTS_QUEUE})  # not Celery's pidbox replies and the like
TRANSPORT = "schemas.broker:Transport"
JOURNAL = "vigil.journal"  # delivery tag -> [message as pushed, list key]
JOURNAL_INDEX = "vigil.journal.index"  # delivery tag -> when last known to be safe (published, restored, seen)
_MUTEX = "vigil.journal.mutex"

# One entry, atomically: gone (acked) -> forget it; unacked, or still waiting in its list (searched from the tail,
# where the oldest messages are) -> look again a timeout later; else it was lost between pop and record -> push back.
_RECOVER = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
local entry = cjson.decode(raw)
if redis.call('LPOS', entry[2], entry[1], 'RANK', -1) then return 0 end
redis.call('RPUSH', entry[2], entry[1])
return 1
"""


def _tag(message: dict) -> str:
    return message["properties"]["delivery_tag"]


class QoS(kombu_redis.QoS):
    def ack(self, delivery_tag: str) -> None:
        self._remove_from_indices(delivery_tag).hdel(JOURNAL, delivery_tag).zrem(JOURNAL_INDEX, delivery_tag).execute()
        virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if requeue:
            self.restore_by_tag(delivery_tag, leftmost=True)
        else:
            self._remove_from_indices(delivery_tag).hdel(JOURNAL, delivery_tag).zrem(
                JOURNAL_INDEX, delivery_tag).execute()
        virtual.QoS.ack(self, delivery_tag)

    def restore_visible(self, start: int = 0, num: int = 10, interval: int = 10) -> None:
        super().restore_visible(start, num, interval)
        if (self._vrestore_count - 1) % (interval or 1):
            return
        with self.channel.conn_or_acquire() as client:
            try:
                with kombu_redis.Mutex(client, _MUTEX, self.unacked_mutex_expire):
                    self._recover_lost(client, num)
            except kombu_redis.MutexHeld:
                pass

    def _recover_lost(self, client, num: int) -> None:
        """Put back journal entries that are older than the visibility timeout and nowhere else."""
        now = time()
        recover = client.register_script(_RECOVER)
        for tag in client.zrangebyscore(JOURNAL_INDEX, 0, now - self.visibility_timeout, start=0, num=num):
            recover(keys=[JOURNAL, JOURNAL_INDEX, self.unacked_key], args=[tag, now])


class Channel(kombu_redis.Channel):
    QoS = QoS

    def _put(self, queue: str, message: dict, **kwargs) -> None:
        if queue not in JOURNALED:
            return super()._put(queue, message, **kwargs)
        key = self._q_for_pri(queue, self._get_message_priority(message, reverse=False))
        payload = dumps(message)
        journal = (("lpush", key, payload), ("hset", JOURNAL, _tag(message), dumps([payload, key])),
                   ("zadd", JOURNAL_INDEX, {_tag(message): time()}))
        batch = kwargs.pop("_publish_batch", None)
        if batch is not None:
            for command in journal:
                batch.add(*command)
            return
        with self.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=True)
            for name, *args in journal:
                getattr(pipe, name)(*args)
            pipe.execute()

    def _do_restore_message(self, payload: dict, exchange: str, routing_key: str, pipe, leftmost: bool = False):
        super()._do_restore_message(payload, exchange, routing_key, pipe, leftmost)
        for queue in set(self._lookup(exchange, routing_key)) & JOURNALED:
            key = self._q_for_pri(queue, self._get_message_priority(payload, reverse=False))
            pipe.hset(JOURNAL, _tag(payload), dumps([dumps(payload), key])).zadd(JOURNAL_INDEX, {_tag(payload): time()})


    def _purge(self, queue: str) -> int:
        """A purged message is gone on purpose: drop its journal entries too, or the sweep would bring it back."""
        if queue in JOURNALED:
            with self.conn_or_acquire() as client:
                for key in (self._q_for_pri(queue, pri) for pri in self.priority_steps):
                    tags = [_tag(loads(raw)) for raw in client.lrange(key, 0, -1)]
                    if tags:
                        client.pipeline().hdel(JOURNAL, *tags).zrem(JOURNAL_INDEX, *tags).execute()
        return super()._purge(queue)


class Transport(kombu_redis.Transport):
    Channel = Channel
