"""The backlog that says when the pipeline is idle: a message a consumer has popped but not yet recorded as
unacked is still work (kombu pops with BRPOP and records the delivery only afterwards)."""

from __future__ import annotations

import pytest
import redis
from kombu import Connection, Exchange, Queue
from vigil.schemas.broker import SCORE_QUEUE, TRANSPORT
from vigil.worker.pipeline.backlog import backlog, drained, wait_drained

QUEUE = Queue(SCORE_QUEUE, Exchange(SCORE_QUEUE), routing_key=SCORE_QUEUE)


@pytest.fixture
def connection(redis_url):
    with Connection(redis_url, transport=TRANSPORT) as conn:
        yield conn


def publish(connection, body: dict) -> None:
    with connection.Producer() as producer:
        producer.publish(body, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key, declare=[QUEUE],
                         serializer="json")


def test_a_message_popped_but_not_yet_recorded_as_unacked_is_not_drained(redis_url, connection):
    publish(connection, {"n": 1})
    client = redis.Redis.from_url(redis_url)
    client.rpop(SCORE_QUEUE)  # what a consumer's BRPOP does, before kombu records the delivery as unacked

    assert client.llen(SCORE_QUEUE) == 0 and client.hlen("unacked") == 0
    assert not drained(client), backlog(client)
    with pytest.raises(TimeoutError, match="not drained"):
        wait_drained(client, timeout=0.5)


def test_a_delivered_message_is_drained_only_once_it_is_acked(redis_url, connection):
    publish(connection, {"n": 2})
    client = redis.Redis.from_url(redis_url)
    with connection.SimpleQueue(QUEUE) as queue:
        message = queue.get(timeout=5)
        assert not drained(client)
        message.ack()
    wait_drained(client, timeout=30)
    assert drained(client)
