"""The journaled transport: a message popped by a consumer that died before recording it is delivered again."""

from __future__ import annotations

import json

import pytest
import redis
from kombu import Connection, Exchange, Queue
from vigil.schemas.broker import JOURNAL, JOURNAL_INDEX, SCORE_QUEUE, TRANSPORT, kombu_drift

QUEUE = Queue(SCORE_QUEUE, Exchange(SCORE_QUEUE), routing_key=SCORE_QUEUE)
OTHER = Queue("celery.replies", Exchange("celery.replies"), routing_key="celery.replies")


@pytest.fixture
def connection(redis_url):
    with Connection(redis_url, transport=TRANSPORT,
                    transport_options={"visibility_timeout": 1, "unacked_restore_throttle": 1}) as conn:
        yield conn


def publish(connection, body: dict, queue: Queue = QUEUE) -> None:
    with connection.Producer() as producer:
        producer.publish(body, exchange=queue.exchange, routing_key=queue.routing_key, declare=[queue],
                         serializer="json")


def sweep(connection) -> None:
    connection.default_channel.qos.restore_visible(num=100, interval=1)


def age_the_journal(client: redis.Redis, seconds: float = 1.1) -> None:
    """Past this connection's visibility timeout (1 s) without waiting for it: the sweep measures an entry's age by
    its time in the journal's index, so every entry's time is set back by ``seconds``."""
    for tag, at in client.zrange(JOURNAL_INDEX, 0, -1, withscores=True):
        client.zadd(JOURNAL_INDEX, {tag: at - seconds})


def test_a_publish_records_the_message_in_the_journal_in_the_same_transaction(redis_url, connection):
    publish(connection, {"n": 1})
    client = redis.Redis.from_url(redis_url)
    assert client.llen(SCORE_QUEUE) == 1
    assert client.hlen(JOURNAL) == 1 and client.zcard(JOURNAL_INDEX) == 1


def test_the_journal_keeps_the_message_bytes_exactly_as_pushed_not_encoded_again(redis_url, connection):
    publish(connection, {"question": 'a "quoted" word and a \\ backslash'})
    client = redis.Redis.from_url(redis_url)
    [pushed] = client.lrange(SCORE_QUEUE, 0, -1)
    [entry] = client.hvals(JOURNAL)

    assert entry == SCORE_QUEUE.encode() + b"\n" + pushed


def test_a_journal_entry_in_the_older_json_format_is_still_recovered(redis_url, connection):
    """Entries written before an upgrade ([message, key] as JSON) are put back like the new ones."""
    publish(connection, {"n": 9})
    client = redis.Redis.from_url(redis_url)
    [(tag, _)] = client.hgetall(JOURNAL).items()
    pushed = client.rpop(SCORE_QUEUE)  # popped by a consumer that then died
    client.hset(JOURNAL, tag, json.dumps([pushed.decode(), SCORE_QUEUE]))
    age_the_journal(client)
    sweep(connection)
    with connection.SimpleQueue(QUEUE) as queue:
        message = queue.get(timeout=5)
        assert message.payload == {"n": 9}
        message.ack()


def test_an_ack_clears_the_journal(redis_url, connection):
    publish(connection, {"n": 1})
    with connection.SimpleQueue(QUEUE) as queue:
        queue.get(timeout=5).ack()
    client = redis.Redis.from_url(redis_url)
    assert client.hlen(JOURNAL) == 0 and client.zcard(JOURNAL_INDEX) == 0


def test_a_message_lost_between_pop_and_unacked_is_put_back_after_the_visibility_timeout(redis_url, connection):
    """Given a consumer killed right after BRPOP (the message is in no queue and not unacked), the sweep finds
    the journal entry stale, sees the message nowhere, and pushes it back."""
    publish(connection, {"n": 42})
    client = redis.Redis.from_url(redis_url)
    client.rpop(SCORE_QUEUE)  # what BRPOP does before kombu records the delivery; then the process dies
    sweep(connection)
    assert client.llen(SCORE_QUEUE) == 0, "younger than the visibility timeout: not yet presumed lost"
    age_the_journal(client)
    sweep(connection)
    with connection.SimpleQueue(QUEUE) as queue:
        message = queue.get(timeout=5)
        assert message.payload == {"n": 42}
        message.ack()
    assert client.hlen(JOURNAL) == 0


def test_a_message_still_waiting_in_its_queue_is_not_duplicated(redis_url, connection):
    publish(connection, {"n": 7})
    client = redis.Redis.from_url(redis_url)
    age_the_journal(client)
    sweep(connection)
    assert client.llen(SCORE_QUEUE) == 1


def test_only_vigils_queues_are_journaled(redis_url, connection):
    publish(connection, {"n": 1}, queue=OTHER)
    client = redis.Redis.from_url(redis_url)
    assert client.llen("celery.replies") == 1 and client.hlen(JOURNAL) == 0


def test_a_purge_forgets_the_purged_messages_so_the_sweep_cannot_bring_them_back(redis_url, connection):
    publish(connection, {"n": 1})
    publish(connection, {"n": 2})
    assert connection.default_channel.queue_purge(SCORE_QUEUE) == 2
    client = redis.Redis.from_url(redis_url)
    assert client.hlen(JOURNAL) == 0 and client.zcard(JOURNAL_INDEX) == 0


def test_the_installed_kombu_still_has_what_the_journaled_transport_overrides_and_calls():
    assert kombu_drift() == []


def test_a_kombu_that_changed_an_overridden_method_is_named_in_one_line(monkeypatch):
    from kombu.transport import redis as kombu_redis

    monkeypatch.setattr(kombu_redis.Channel, "_put", lambda self, queue, message, priority=0: None)
    monkeypatch.delattr(kombu_redis.QoS, "restore_by_tag")

    problems = kombu_drift()

    assert any("Channel._put(self, queue, message, priority=0) no longer matches" in p for p in problems)
    assert "kombu.transport.redis.QoS.restore_by_tag is gone" in problems
