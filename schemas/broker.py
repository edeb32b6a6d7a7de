"""The queue contract: Celery's Redis transport with a journal, so a delivery lost to a kill is delivered again.

kombu's Redis transport pops a message with BRPOP and only then records it as unacked; a process killed between
the two loses the message for good. Every publish here (the SDK's and the worker's) also records the message in a
journal, in the same MULTI/EXEC as the LPUSH; an ack or a final reject removes it. The periodic sweep that restores
unacked messages also looks at journal entries older than the visibility timeout: one that is neither unacked nor
still waiting in its queue was lost in that window, and goes back on its queue. Redelivery may duplicate work,
never lose it (vigil's rows have deterministic ids).

Both sides use it through Celery: ``broker_transport = "vigil.schemas.broker:JournaledTransport"`` with a
``redis://`` or ``rediss://`` URL. Forcing the transport class bypasses kombu's choice of TLS by scheme, so ``broker(url)`` gives
every side what one ``REDIS_URL`` means: the transport class, the TLS options a ``rediss://`` URL needs
(certificates verified unless the URL's ``ssl_cert_reqs`` says otherwise), the transport options, and redis-py
clients for vigil's own keys. ``sentinel://HOST:PORT[,HOST:PORT...]/DB?master_name=NAME`` finds the master through
Redis Sentinel, for kombu (the same journaled channel on kombu's Sentinel pool) and for redis-py alike, so after a
failover every client follows the new master.

Anyone who can reach Redis can push anything onto a queue. An item that is not a well-formed kombu envelope (not
JSON, not an object, no delivery tag, a body that does not decode) would raise inside kombu's delivery loop and stop
the consumer; here it is delivered instead as a well-formed ``vigil.undeliverable`` task carrying the raw text and
the reason, which the worker dead-letters and acks like any other task.

Memory is bounded in bytes, not only by count: with the transport option ``max_message_bytes`` (the worker's and
the intake's ``VIGIL_MAX_MESSAGE_BYTES``) an item longer than that is never decoded (JSON parsing and base64
decoding multiply its size several times in a consumer); it is delivered as an undeliverable naming its size and the
limit, carrying only its first ``UNDELIVERABLE_KEEP`` characters, under its own delivery tag when one can be read
from its tail (so the ack also clears its journal entry). A publish over the limit raises ``MessageTooLarge``
instead of pushing what every consumer would refuse.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
import re
import ssl
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from queue import Empty
from time import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads
from redis import exceptions as redis_errors
from vigil.schemas.broker_limits import DEFAULT_MESSAGE_BYTES, MIN_MESSAGE_BYTES, POOL_CONNECTIONS, POOL_WAIT_S

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import redis as redis_py
    import redis.asyncio as redis_asyncio

__all__ = [
    "ALERTS_QUEUE", "DEFAULT_MESSAGE_BYTES", "FEEDBACK_QUEUE", "INGEST_QUEUE", "INGEST_TASK", "JOURNAL", "JOURNAL_INDEX",
    "MIN_MESSAGE_BYTES", "PARKED_PREFIX", "POOL_CONNECTIONS", "POOL_WAIT_S", "SCORE_QUEUE", "SENTINEL_TRANSPORT",
    "SPANS_TASK", "TRANSPORT",
    "UNDELIVERABLE_TASK", "Broker", "Channel", "JournaledSentinelTransport", "JournaledTransport", "MessageTooLarge",
    "QoS", "SentinelChannel", "broker", "broker_ssl", "envelope", "journaled", "kombu_drift", "oversize_reason",
]

INGEST_TASK = "vigil.ingest"  # args: [batch], a list of turn dicts (schemas.Turn, validated by the worker)
SPANS_TASK = "vigil.spans"  # args: [spans], a list of span records (schemas.spans.SpanRecord) from `vigil intake`
INGEST_QUEUE = "vigil.ingest"
SCORE_QUEUE = "vigil.score"
ALERTS_QUEUE = "vigil.alerts"  # consumed only by writer processes: the alert check needs the store
# Re-scores for negative feedback, also for writer processes, on a queue of their own: a flood of feedback waits
# there instead of in front of the alert checks.
FEEDBACK_QUEUE = "vigil.feedback"
JOURNALED = frozenset({INGEST_QUEUE, SCORE_QUEUE, ALERTS_QUEUE, FEEDBACK_QUEUE})  # not Celery's pidbox replies and the like
# Score tasks waiting for a paused judge, one list per judge (``vigil.worker.pipeline.parked``): journaled like the rest.
PARKED_PREFIX = "vigil.parked."


def journaled(queue: str) -> bool:
    return queue in JOURNALED or queue.startswith(PARKED_PREFIX)

TRANSPORT = f"{__name__}:JournaledTransport"  # by its own name: the same where the SDK installs it
SENTINEL_TRANSPORT = f"{__name__}:JournaledSentinelTransport"
# Headers of an ingest message from the SDK: producer id (one per process), batch sequence number, and the
# producer's running count of turns shipped, this batch included. The worker records them to show lost turns.
SHIPPED_HEADERS = ("vigil_producer", "vigil_batch", "vigil_shipped")
UNDELIVERABLE_TASK = "vigil.undeliverable"  # args: [raw item text (truncated), queue, reason]
UNDELIVERABLE_KEEP = 100_000  # characters of an undeliverable item kept for its dead letter
JOURNAL = "vigil.journal"  # delivery tag -> "<list key>\n<message as pushed>" (_journal_entry)
JOURNAL_INDEX = "vigil.journal.index"  # delivery tag -> when last known to be safe (published, restored, seen)
_MUTEX = "vigil.journal.mutex"
_TAIL = 65_536  # bytes at the end of an oversize item searched for its delivery tag (kombu writes properties last)
_TAG = re.compile(rb'"delivery_tag"\s*:\s*"([A-Za-z0-9._:-]{1,200})"')


class MessageTooLarge(ValueError):
    """A message over the transport's ``max_message_bytes``: the text names its size and the limit."""


def oversize_reason(size: int, limit: int) -> str:
    return f"message is {size} bytes, over the limit of {limit} bytes (VIGIL_MAX_MESSAGE_BYTES)"

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
local key, message
if string.sub(raw, 1, 1) == '[' then
  local entry = cjson.decode(raw)  -- the older format, JSON [message, key]: entries from before an upgrade
  message, key = entry[1], entry[2]
else
  local newline = string.find(raw, string.char(10), 1, true)
  key, message = string.sub(raw, 1, newline - 1), string.sub(raw, newline + 1)
end
if redis.call('LPOS', key, message, 'RANK', -1) then return 0 end
redis.call('RPUSH', key, message)
return 1
"""


def _journal_entry(key: str, payload: str) -> str:
    """A journal entry: the list key, a newline, and the message exactly as pushed. The message is the bulk of the
    bytes, so it is not encoded again (as a JSON string it was escaped a second time on every publish)."""
    return f"{key}\n{payload}"


_SCHEMES = ("redis", "rediss", "unix", "socket")
_TLS_KEYS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname", "ssl_ca_path")


def broker_ssl(url: str) -> dict[str, Any] | None:
    """The TLS options for this broker URL (Celery's ``broker_use_ssl``): None for ``redis://``; for ``rediss://``
    the URL's own ``ssl_*`` options, verifying the server's certificate by default. Raises ValueError naming
    REDIS_URL for a scheme vigil cannot use or TLS options on a plain URL."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"REDIS_URL: unsupported scheme {scheme + '://' if scheme else '(none)'}; "
                         "use redis://, rediss:// (TLS) or unix://")
    options = {key: value for key, value in parse_qsl(parts.query) if key in _TLS_KEYS}
    if scheme != "rediss":
        if options:
            raise ValueError(f"REDIS_URL: {', '.join(sorted(options))} given for a plain {scheme}:// URL; "
                             "use rediss:// for TLS")
        return None
    tls: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    reqs = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    for key, value in options.items():
        if key == "ssl_cert_reqs":
            lowered = value.lower().removeprefix("cert_")
            if lowered not in reqs:
                raise ValueError(f"REDIS_URL: ssl_cert_reqs must be none, optional or required, not {value!r}")
            tls[key] = reqs[lowered]
        elif key == "ssl_check_hostname":
            tls[key] = value.lower() not in ("false", "0", "no")
        else:
            tls[key] = value
    return tls


_SENTINEL_PORT = 26379


@functools.cache
def _waiting_sentinel_pool(asynchronous: bool) -> type:
    """redis-py's Sentinel pool (sync or asyncio) that waits for a free connection like its
    ``BlockingConnectionPool`` instead of raising at its size: the Sentinel pool finds the master, the blocking one
    hands out connections."""
    if asynchronous:
        from redis.asyncio import BlockingConnectionPool
        from redis.asyncio.sentinel import SentinelConnectionPool
    else:
        from redis import BlockingConnectionPool
        from redis.sentinel import SentinelConnectionPool

    return type("WaitingSentinelConnectionPool", (SentinelConnectionPool, BlockingConnectionPool), {})


@dataclass(frozen=True)
class Broker:
    """What one ``REDIS_URL`` means to kombu (its URL, transport class, TLS and transport options) and to redis-py
    (``redis()``, ``async_redis()``: plain clients, or clients on the master Sentinel names)."""

    url: str  # as kombu takes it
    transport: str
    ssl: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)  # transport options the URL implies
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = ""
    master_kwargs: dict[str, Any] = field(default_factory=dict)  # db, username, password of the master
    sentinel_kwargs: dict[str, Any] = field(default_factory=dict)  # how to talk to the Sentinels themselves

    def redis(self, *, max_connections: int = POOL_CONNECTIONS, **kwargs: Any) -> redis_py.Redis:
        """A client whose pool holds at most ``max_connections``; one more caller waits for a free connection (up to
        ``POOL_WAIT_S``) instead of failing, so a burst of work costs time, never a failed score."""
        import redis as redis_py

        if not self.sentinels:
            return redis_py.Redis.from_pool(redis_py.BlockingConnectionPool.from_url(
                self.url, max_connections=max_connections, timeout=POOL_WAIT_S, **kwargs))
        from redis.sentinel import Sentinel

        return Sentinel(list(self.sentinels), sentinel_kwargs=self._sentinel_kwargs(kwargs)).master_for(
            self.master, connection_pool_class=_waiting_sentinel_pool(False), max_connections=max_connections,
            timeout=POOL_WAIT_S, **self.master_kwargs, **kwargs)

    def async_redis(self, *, max_connections: int = POOL_CONNECTIONS, **kwargs: Any) -> redis_asyncio.Redis:
        """The asyncio client, with the same waiting pool as ``redis()``."""
        import redis.asyncio as redis_asyncio

        if not self.sentinels:
            return redis_asyncio.Redis.from_pool(redis_asyncio.BlockingConnectionPool.from_url(
                self.url, max_connections=max_connections, timeout=POOL_WAIT_S, **kwargs))
        from redis.asyncio.sentinel import Sentinel

        return Sentinel(list(self.sentinels), sentinel_kwargs=self._sentinel_kwargs(kwargs)).master_for(
            self.master, connection_pool_class=_waiting_sentinel_pool(True), max_connections=max_connections,
            timeout=POOL_WAIT_S, **self.master_kwargs, **kwargs)

    def _sentinel_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        timeouts = {key: kwargs[key] for key in ("socket_timeout", "socket_connect_timeout") if key in kwargs}
        return {**timeouts, **self.sentinel_kwargs}


def broker(url: str) -> Broker:
    """Parse a ``REDIS_URL``; raises ValueError naming REDIS_URL and saying what to write instead."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sentinel":
        return _sentinel(url)
    if "sentinel" in scheme:
        raise ValueError(f"REDIS_URL: {scheme}:// is not a scheme vigil reads; for Sentinel write "
                         "sentinel://HOST:PORT[,HOST:PORT...]/DB?master_name=NAME")
    return Broker(url=url, transport=TRANSPORT, ssl=broker_ssl(url))


def _sentinel(url: str) -> Broker:
    """``sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...][/DB]?master_name=NAME[&sentinel_password=P]``;
    kombu's own form, URLs joined by ``;``, is read too. The password is the master's; ``sentinel_password`` the
    Sentinels' own, if they require one."""
    pieces = [piece for piece in url.split(";") if piece.strip()]
    query = dict(parse_qsl(urlsplit(pieces[-1]).query))
    master = query.pop("master_name", "")
    if not master:
        raise ValueError("REDIS_URL: a sentinel:// URL needs ?master_name=NAME, the name the Sentinels monitor")
    sentinel_password = query.pop("sentinel_password", None)
    if query:
        raise ValueError(f"REDIS_URL: {', '.join(sorted(query))} is not an option of sentinel:// URLs (they take "
                         "master_name and sentinel_password; TLS to Sentinel is not supported)")
    hosts: list[tuple[str, int]] = []
    username = password = None
    db = 0
    for piece in pieces:
        parts = urlsplit(piece.strip())
        if parts.scheme.lower() != "sentinel":
            raise ValueError("REDIS_URL: every address of a Sentinel URL is sentinel://HOST:PORT")
        credentials, _, addresses = parts.netloc.rpartition("@")
        if credentials:
            user, _, secret = credentials.partition(":")
            username, password = unquote(user) or None, unquote(secret) or None
        for address in addresses.split(","):
            host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
            if not host or not (port or str(_SENTINEL_PORT)).isdigit():
                raise ValueError(f"REDIS_URL: {address!r} is not a Sentinel address (HOST:PORT)")
            hosts.append((host, int(port or _SENTINEL_PORT)))
        if parts.path.strip("/"):
            if not parts.path.strip("/").isdigit():
                raise ValueError(f"REDIS_URL: the database must be a number, not {parts.path.strip('/')!r}")
            db = int(parts.path.strip("/"))
    auth = ""
    if username or password:
        auth = f"{quote(username or '', safe='')}:{quote(password or '', safe='')}@"
    options: dict[str, Any] = {"master_name": master}
    sentinel_kwargs = {"password": sentinel_password} if sentinel_password else {}
    if sentinel_kwargs:
        options["sentinel_kwargs"] = sentinel_kwargs
    master_kwargs = {"db": db, **({"username": username} if username else {}),
                     **({"password": password} if password else {})}
    return Broker(url=";".join(f"sentinel://{auth}{host}:{port}/{db}" for host, port in hosts),
                  transport=SENTINEL_TRANSPORT, options=options, sentinels=tuple(hosts), master=master,
                  master_kwargs=master_kwargs, sentinel_kwargs=sentinel_kwargs)


def _tag(message: dict) -> str:
    return message["properties"]["delivery_tag"]


def _envelope_problem(message: Any) -> str | None:
    """Why kombu could not deliver this decoded item, or None when it can."""
    if not isinstance(message, dict):
        return f"envelope must be a JSON object, got {type(message).__name__}"
    properties = message.get("properties")
    if not isinstance(properties, dict):
        return "envelope: properties must be an object"
    if not isinstance(properties.get("delivery_tag"), str) or not properties["delivery_tag"]:
        return "envelope: properties.delivery_tag must be a non-empty string"
    info = properties.get("delivery_info")
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("exchange", "routing_key")):
        return "envelope: properties.delivery_info must name an exchange and a routing_key"
    if not isinstance(message.get("headers", {}), dict | None):
        return "envelope: headers must be an object"
    for key in ("content-type", "content-encoding"):
        if not isinstance(message.get(key, ""), str | None):
            return f"envelope: {key} must be a string"
    body = message.get("body", "")
    if not isinstance(body, str):
        return "envelope: body must be a string"
    encoding = properties.get("body_encoding")
    if encoding not in (None, "base64"):
        return f"envelope: unsupported body_encoding {encoding!r}"
    if encoding == "base64":
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            return f"envelope: body is not valid base64 ({exc})"
    return None


def _undeliverable(text: str, queue: str, reason: str, *, size: int | None = None, tag: str | None = None) -> dict:
    """A well-formed Celery message (protocol 2) for the worker's dead-letter task, carrying what could not be
    delivered (``size``: the item's length when ``text`` is only its head; ``tag``: the item's own delivery tag)."""
    task_id = str(uuid.uuid4())
    size = len(text) if size is None else size
    body = json.dumps([[text[:UNDELIVERABLE_KEEP], queue, reason], {}, {}]).encode()
    return {
        "body": base64.b64encode(body).decode(), "content-encoding": "utf-8", "content-type": "application/json",
        "headers": {"lang": "py", "task": UNDELIVERABLE_TASK, "id": task_id, "root_id": task_id, "retries": 0,
                    "argsrepr": f"(<{size} characters>, {queue!r}, {reason[:200]!r})", "kwargsrepr": "{}"},
        "properties": {"correlation_id": task_id, "delivery_mode": 2, "priority": 0, "body_encoding": "base64",
                       "delivery_info": {"exchange": "", "routing_key": queue}, "delivery_tag": tag or task_id},
    }


def _oversize(item: bytes | str, queue: str, limit: int) -> dict:
    """The undeliverable for an item over ``limit``, built from its head and tail only (never decoded whole)."""
    raw = item.encode("utf-8", "surrogateescape") if isinstance(item, str) else item
    found = _TAG.findall(raw[-_TAIL:])
    head = raw[:UNDELIVERABLE_KEEP].decode("utf-8", "replace")
    return _undeliverable(head, queue, oversize_reason(len(raw), limit), size=len(raw),
                          tag=found[-1].decode() if found else None)


def envelope(item: bytes | str, queue: str, max_bytes: int | None = None) -> dict:
    """The message kombu delivers for a raw list item: the item itself when well-formed and at most ``max_bytes``
    long, else an undeliverable."""
    if max_bytes is not None and len(item) > max_bytes:
        return _oversize(item, queue, max_bytes)
    text = bytes_to_str(item)
    try:
        message = loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        return _undeliverable(text, queue, f"envelope is not JSON: {exc}")
    problem = _envelope_problem(message)
    return message if problem is None else _undeliverable(text, queue, problem)


# Errors that leave a delivery where no sweep finds it before the visibility timeout: a full broker (maxmemory with
# noeviction refuses the HSET that records a popped message as unacked, and the LPUSH that puts a rejected or
# unacked one back) or a connection lost in between.
_REFUSED = (redis_errors.OutOfMemoryError, redis_errors.ExecAbortError, redis_errors.ConnectionError,
            redis_errors.TimeoutError)


class _PutBack:
    """Delivery tags this process holds in its hands but could not leave where the broker finds them: popped and
    never recorded as unacked, or rejected (or released at a channel's close) while the broker refused the push back.
    The message itself is safe, in the unacked hash or only in the journal; each sweep (``restore_visible``, every
    ``VIGIL_RESTORE_INTERVAL`` seconds) puts them back on their queue once the broker takes writes again, so a full
    broker's work resumes within one sweep of memory being freed instead of after the visibility timeout. Process-wide:
    the consumer's channel is replaced after each refusal, and the next one does the putting back."""

    def __init__(self) -> None:
        self._tags: dict[str, None] = {}  # insertion-ordered: put back in the order they were refused
        self._lock = threading.Lock()

    def add(self, tag: str) -> None:
        with self._lock:
            self._tags[tag] = None

    def __len__(self) -> int:
        return len(self._tags)

    def drain(self, put_back: Callable[[str], None]) -> int:
        """Call ``put_back`` on each tag, oldest first, forgetting it once done; stops at the first refusal (the
        rest wait for the next sweep). Returns how many were put back."""
        with self._lock:
            tags = list(self._tags)
        done = 0
        for tag in tags:
            try:
                put_back(tag)
            except _REFUSED:
                break
            with self._lock:
                self._tags.pop(tag, None)
            done += 1
        return done


PUT_BACK = _PutBack()


def _full(exc: redis_errors.RedisError) -> redis_errors.RedisError:
    """A transaction a full broker discarded (``EXECABORT ... OOM``: inside MULTI, Redis refuses every command while
    over ``maxmemory``) as the ``OutOfMemoryError`` it is, which the consumer rides out; anything else as it is."""
    return redis_errors.OutOfMemoryError(str(exc)) if "OOM" in str(exc) else exc


class QoS(kombu_redis.QoS):
    def append(self, message, delivery_tag: str) -> None:
        try:
            super().append(message, delivery_tag)
        except redis_errors.ExecAbortError as exc:  # else "Unrecoverable error": the worker would exit
            raise _full(exc) from exc

    def _forget(self, delivery_tag: str) -> None:
        """Remove a delivery from the unacked and journal indices. Not a transaction: deletions a full broker still
        takes (inside MULTI it refuses everything), and an ack cut halfway only means a redelivery, never a loss."""
        with self.channel.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=False)
            self._remove_from_indices(delivery_tag, pipe).hdel(JOURNAL, delivery_tag).zrem(
                JOURNAL_INDEX, delivery_tag).execute()

    def ack(self, delivery_tag: str) -> None:
        self._forget(delivery_tag)
        virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if requeue:
            try:
                self.restore_by_tag(delivery_tag, leftmost=True)
            except _REFUSED as exc:  # still unacked in Redis: the next sweep puts it back
                PUT_BACK.add(delivery_tag)
                log.warning("broker refused to requeue a message; it is put back once the broker takes writes",
                            extra={"delivery_tag": delivery_tag, "error": str(exc)})
        else:
            self._forget(delivery_tag)
        virtual.QoS.ack(self, delivery_tag)

    def restore_unacked(self, client=None) -> None:
        """kombu's, at a channel's close, but a delivery the broker refuses to take back is remembered for the next
        sweep instead of stopping the rest (and waiting in the unacked hash for the visibility timeout)."""
        with self.channel.conn_or_acquire(client) as conn:
            for tag in list(self._delivered):
                try:
                    self.restore_by_tag(tag, client=conn)
                except _REFUSED:
                    PUT_BACK.add(tag)
        self._delivered.clear()

    def restore_visible(self, start: int = 0, num: int = 10, interval: int = 10) -> None:
        if len(PUT_BACK):
            with self.channel.conn_or_acquire() as client:
                recover = client.register_script(_RECOVER)

                def put_back(tag: str) -> None:  # from unacked if it is there, else from the journal if nowhere
                    self.restore_by_tag(tag, client)
                    _script(recover, keys=[JOURNAL, JOURNAL_INDEX, self.unacked_key], args=[tag, time()])

                waiting = len(PUT_BACK)
                done = PUT_BACK.drain(put_back)
                if done:
                    log.warning("put back %d of %d deliveries the broker had refused (full or unreachable)",
                                done, waiting)
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
            _script(recover, keys=[JOURNAL, JOURNAL_INDEX, self.unacked_key], args=[tag, now])


def _script(script, **kwargs) -> Any:
    """Run a script; a write it makes that a full broker refuses is an ``OutOfMemoryError`` (Redis reports it as a
    script error, which kombu's loop would not take for the transient refusal it is)."""
    try:
        return script(**kwargs)
    except redis_errors.ResponseError as exc:
        if "OOM command not allowed" in str(exc):
            raise redis_errors.OutOfMemoryError(str(exc)) from exc
        raise


class Channel(kombu_redis.Channel):
    QoS = QoS
    max_message_bytes: int | None = None  # transport option: see the module's docstring
    from_transport_options = (*kombu_redis.Channel.from_transport_options, "max_message_bytes")

    def _brpop_read(self, **options) -> bool:
        """kombu's, but an item that is not a well-formed envelope is delivered as an undeliverable (see above)."""
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()  # the next iteration reconnects
                raise
            if not dest__item:
                raise Empty()
            dest, item = dest__item
            dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            message = envelope(item, dest, self.max_message_bytes)
            try:
                self.connection._deliver(message, dest)
            except _REFUSED:  # popped but not recorded as unacked (QoS.append refused): only the journal holds it
                PUT_BACK.add(_tag(message))
                raise
            return True
        finally:
            self._in_poll = None
            flush = getattr(self, "_flush_brpop_reauth", None)  # newer kombu: re-auth while the connection is idle
            if flush is not None:
                flush()

    def _get(self, queue: str) -> dict:
        with self.conn_or_acquire() as client:
            for pri in self.priority_steps:
                item = client.rpop(self._q_for_pri(queue, pri))
                if item:
                    self._maybe_update_queues_expire(client, queue)
                    return envelope(item, queue, self.max_message_bytes)
            self._maybe_update_queues_expire(client, queue)
            raise Empty()

    def _put(self, queue: str, message: dict, **kwargs) -> None:
        if not journaled(queue):
            return super()._put(queue, message, **kwargs)
        key = self._q_for_pri(queue, self._get_message_priority(message, reverse=False))
        payload = dumps(message)  # ASCII (JSON escapes the rest): its length is its size in bytes
        if self.max_message_bytes is not None and len(payload) > self.max_message_bytes:
            raise MessageTooLarge(oversize_reason(len(payload), self.max_message_bytes))
        journal = (("lpush", key, payload), ("hset", JOURNAL, _tag(message), _journal_entry(key, payload)),
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
        for queue in {q for q in self._lookup(exchange, routing_key) if journaled(q)}:
            key = self._q_for_pri(queue, self._get_message_priority(payload, reverse=False))
            pipe.hset(JOURNAL, _tag(payload), _journal_entry(key, dumps(payload))).zadd(
                JOURNAL_INDEX, {_tag(payload): time()})


    def _purge(self, queue: str) -> int:
        """A purged message is gone on purpose: drop its journal entries too, or the sweep would bring it back."""
        if journaled(queue):
            with self.conn_or_acquire() as client:
                for key in (self._q_for_pri(queue, pri) for pri in self.priority_steps):
                    tags = [_tag(loads(raw)) for raw in client.lrange(key, 0, -1)]
                    if tags:
                        client.pipeline().hdel(JOURNAL, *tags).zrem(JOURNAL_INDEX, *tags).execute()
        return super()._purge(queue)


class JournaledTransport(kombu_redis.Transport):
    Channel = Channel
    # A Redis at maxmemory with noeviction refuses writes until memory is freed (or raised): transient, like a lost
    # connection, so a consumer reconnects and retries instead of stopping (kombu counts it a channel error).
    connection_errors = (*kombu_redis.Transport.connection_errors, redis_errors.OutOfMemoryError)


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The journaled channel on the master Sentinel names (kombu's Sentinel pool, which follows a failover)."""

    from_transport_options = tuple(dict.fromkeys(
        (*Channel.from_transport_options, *kombu_redis.SentinelChannel.from_transport_options)))


class JournaledSentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
    connection_errors = JournaledTransport.connection_errors


# kombu's private surface this module builds on: the methods it overrides (their parameters must still match) and
# the ones it calls. kombu is pinned below its next minor (pyproject); ``kombu_drift`` is checked when a worker, beat
# or the intake starts, so a kombu that changed underneath fails at once, in one line, not in the delivery loop.
_OVERRIDES = {
    (QoS, kombu_redis.QoS): ("ack", "reject", "restore_visible"),
    (Channel, kombu_redis.Channel): ("_brpop_read", "_get", "_put", "_do_restore_message", "_purge"),
}
_CALLED = {
    kombu_redis.QoS: ("_remove_from_indices", "restore_by_tag", "restore_visible"),
    kombu_redis.Channel: ("_q_for_pri", "_maybe_update_queues_expire", "_get_message_priority", "_lookup",
                          "conn_or_acquire", "from_transport_options", "priority_steps"),
}


def kombu_drift() -> list[str]:
    """What of kombu's private surface this module relies on is gone or changed in the installed kombu (empty: none)."""
    import inspect

    problems = []
    for (ours, theirs), names in _OVERRIDES.items():
        for name in names:
            base = getattr(theirs, name, None)
            if base is None:
                problems.append(f"kombu.transport.redis.{theirs.__name__}.{name} is gone")
            elif list(inspect.signature(base).parameters) != list(inspect.signature(getattr(ours, name)).parameters):
                problems.append(f"kombu.transport.redis.{theirs.__name__}.{name}{inspect.signature(base)} no longer "
                                f"matches vigil's override {name}{inspect.signature(getattr(ours, name))}")
    for theirs, names in _CALLED.items():
        problems += [f"kombu.transport.redis.{theirs.__name__}.{name} is gone" for name in names
                     if not hasattr(theirs, name)]
    return problems
