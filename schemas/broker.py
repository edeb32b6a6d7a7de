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

__all__ = ["INGEST_QUEUE", "INGEST_TASK", "JOURNAL", "JOURNAL_INDEX", "TRANSPORT", "Channel", "QoS", "Transport"]

INGEST_TASK = "vigil.ingest"  # args: [batch], a list of turn dicts (schemas.Turn, validated by the worker)
INGEST_QUEUE = "vigil.ingest"
TRANSPORT = "schemas.broker:Transport"
JOURNAL = "vigil.journal"  # delivery tag -> [message as pushed, list key]
JOURNAL_INDEX = "vigil.journal.index"  # delivery tag -> when last known to be safe (published, restored, seen)
_MUTEX = "vigil.journal.mutex"


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
        for tag in client.zrangebyscore(JOURNAL_INDEX, 0, now - self.visibility_timeout, start=0, num=num):
            raw = client.hget(JOURNAL, tag)
            if raw is None:
                client.zrem(JOURNAL_INDEX, tag)
                continue
            payload, key = loads(raw)
            if client.hexists(self.unacked_key, tag) or client.lpos(key, payload) is not None:
                client.zadd(JOURNAL_INDEX, {tag: now})  # delivered or waiting: look again a timeout later
                continue
            client.pipeline().rpush(key, payload).zadd(JOURNAL_INDEX, {tag: now}).execute()


class Channel(kombu_redis.Channel):
    QoS = QoS

    def _put(self, queue: str, message: dict, **kwargs) -> None:
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
        for queue in self._lookup(exchange, routing_key):
            key = self._q_for_pri(queue, self._get_message_priority(payload, reverse=False))
            pipe.hset(JOURNAL, _tag(payload), dumps([dumps(payload), key])).zadd(JOURNAL_INDEX, {_tag(payload): time()})


class Transport(kombu_redis.Transport):
    Channel = Channel
