"""Whether the broker answers: a bounded wait before a process starts, one line per retry interval while it is lost.

``vigil worker``, ``vigil beat`` and ``vigil intake`` call ``wait_for_broker`` before anything else talks to Redis:
an unreachable broker is one line naming its host:port and the cause, then, once ``--broker-wait`` seconds of
retries have passed, a ``BrokerUnreachable`` (one more line, and a non-zero exit) instead of a process that sits
silent. Once running, a ``BrokerWatch`` pings the broker every ``interval`` seconds on a daemon thread and is the one
voice for an outage: one line per interval while the broker is lost (for how long, and why), one when it is back.
The other clients (Celery's consumer, the writer, the parked-work mover, the intake's requests) retry quietly.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import redis
import structlog
from vigil.schemas.broker import broker

__all__ = ["DEFAULT_WAIT_S", "RETRY_INTERVAL_S", "BrokerUnreachable", "BrokerWatch", "cause", "wait_for_broker",
           "where"]

log = structlog.get_logger("vigil.broker")

DEFAULT_WAIT_S = 30.0  # --broker-wait: how long a starting process retries an unreachable broker before it exits
RETRY_INTERVAL_S = 5.0  # a running process's pings while the broker is lost, and its one line per interval
_START_RETRY_S = 1.0

# redis-py says "Error 111 connecting to 127.0.0.1:6390. Connection refused." (and "Error -2 connecting to host:port.
# Name or service not known."): the address is said once, by ``where``; the cause is the rest.
_CONNECTING = re.compile(r"^Error -?\d+ connecting to \S+\.\s+")


class BrokerUnreachable(ConnectionError):
    """The broker did not answer within the bounded wait; the message is the one line to print."""


def where(url: str) -> str:
    """The broker's address as host:port (a Sentinel URL: its Sentinels and the master's name); never a password."""
    parsed = broker(url)
    if parsed.sentinels:
        return f"Sentinel {','.join(f'{h}:{p}' for h, p in parsed.sentinels)} (master {parsed.master})"
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}"


def cause(exc: BaseException) -> str:
    """Why a connection failed, in the server's or the OS's words, without repeating the address."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return _CONNECTING.sub("", text).rstrip(".") or text


def _ping(client: redis.Redis) -> None:
    client.ping()


def wait_for_broker(
    url: str, wait_s: float = DEFAULT_WAIT_S, *, say: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
    ping: Callable[[redis.Redis], None] = _ping,
) -> None:
    """Return once the broker at ``url`` answers a PING. Unreachable: ``say`` one line naming host:port and the cause,
    retry every second for ``wait_s`` seconds, then raise ``BrokerUnreachable``. A broker that answers but refuses
    the credentials raises at once: waiting would not change the password."""
    address = where(url)
    timeout = max(0.5, min(5.0, wait_s))
    client = broker(url).redis(socket_connect_timeout=timeout, socket_timeout=timeout)
    started, said = clock(), False
    try:
        while True:
            try:
                ping(client)
            except (redis.AuthenticationError, redis.ResponseError) as exc:
                raise BrokerUnreachable(f"the broker at {address} refused vigil: {cause(exc)} (check the "
                                        "password in REDIS_URL)") from None
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                waited = clock() - started
                if waited >= wait_s:
                    raise BrokerUnreachable(
                        f"cannot reach the broker at {address} (REDIS_URL): {cause(exc)}; gave up after "
                        f"{waited:.0f} s (--broker-wait {wait_s:g})") from None
                if not said:
                    say(f"cannot reach the broker at {address} (REDIS_URL): {cause(exc)}; retrying for up to "
                        f"{wait_s:g} s (--broker-wait)")
                    said = True
                sleep(min(_START_RETRY_S, wait_s - waited))
                continue
            if said:
                say(f"the broker at {address} answered after {clock() - started:.0f} s")
            return
    finally:
        client.close()


class BrokerWatch:
    """Pings the broker every ``interval`` seconds on a daemon thread; while it is lost, logs one error line per
    interval (``broker unreachable``: address, cause, seconds down), and one warning when it answers again."""

    def __init__(self, url: str, interval: float = RETRY_INTERVAL_S, *,
                 ping: Callable[[redis.Redis], None] = _ping, clock: Callable[[], float] = time.monotonic) -> None:
        self.address, self.interval, self._ping, self._clock = where(url), interval, ping, clock
        timeout = max(0.5, min(5.0, interval))
        self._client = broker(url).redis(socket_connect_timeout=timeout, socket_timeout=timeout)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vigil-broker-watch", daemon=True)
        self.lost_since: float | None = None

    def check(self) -> bool:
        """One ping, and the line it calls for; True when the broker answered."""
        try:
            self._ping(self._client)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            now = self._clock()
            if self.lost_since is None:
                self.lost_since = now
            log.error("broker unreachable", broker=self.address, error=cause(exc),
                      down_s=round(now - self.lost_since), retry_every_s=self.interval)
            return False
        except redis.RedisError:  # it answers (an error of its own, e.g. out of memory, is another component's line)
            pass
        if self.lost_since is not None:
            log.warning("broker reachable again", broker=self.address, down_s=round(self._clock() - self.lost_since))
            self.lost_since = None
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()

    def start(self) -> BrokerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 6)
        self._client.close()
