"""Running the real pipeline in tests: `vigil worker` as a real process, against a real Redis and chDB."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from vigil.schemas.broker import INGEST_QUEUE, INGEST_TASK
from vigil.worker.pipeline.app import app, configure
from vigil.worker.pipeline.backlog import wait_drained as drain

__all__ = ["IntakeProcess", "ReviewProcess", "WorkerProcess", "intake_and_worker", "make_turn", "migrated_home", "send", "ship", "wait_drained", "wait_while_alive"]

# A chDB store migrated once per test session (conftest sets it; None outside pytest, as in bench/): a worker whose
# home holds no store yet starts from a copy, as a restarted worker finds its store. Migrating a new store cost each
# worker ~0.3 s of CPU at start (a quarter of a short worker run's), copying it a few milliseconds; `vigil demo` and
# `vigil migrate` still make theirs from nothing.
MIGRATED_STORE: Path | None = None


class _Process:
    """A vigil subprocess in its own session, logging to ``self.log``."""

    process: subprocess.Popen | None
    log: Path

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (a worker finishes its tasks, flushes its writer, releases chDB), SIGKILL after ``timeout``."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
        return self.process.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def _serving(self, command: list[str], url: str, timeout: float, *, any_status: bool = False) -> None:
        """Start ``vigil COMMAND`` and return once ``url`` answers 2xx (``any_status``: any HTTP answer at all)."""
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "vigil.worker", *command], env=self.env,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1):
                    return
            except urllib.error.HTTPError:
                if any_status:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"vigil {command[0]} did not start:\n{self.output()}") from None
            time.sleep(0.05)


class WorkerProcess(_Process):
    """A `vigil worker` subprocess with its writer; chDB under ``home`` (read it only after ``stop``)."""

    def __init__(self, redis_url: str, home: Path, config: Path, **env: str) -> None:
        self.env = {**os.environ, "REDIS_URL": redis_url, "VIGIL_HOME": str(home), "VIGIL_CONFIG": str(config),
                    "VIGIL_WRITE_BATCH_AGE": "0.2", **env}
        self.env.pop("CLICKHOUSE_DSN", None)
        self.home = home
        self.log = home / "worker.log"
        self.process: subprocess.Popen | None = None

    @property
    def dsn(self) -> str:
        return f"chdb://{(self.home / 'chdb').resolve()}"

    def start(self, *args: str, module: str = "vigil.worker") -> WorkerProcess:
        """``python -m <module> worker <args>``: `vigil worker` (``module`` names a test wrapper around it), on a copy of
        ``MIGRATED_STORE`` when its home holds no store."""
        self.home.mkdir(parents=True, exist_ok=True)
        if MIGRATED_STORE is not None and not (self.home / "chdb").exists():
            migrated_home(self.home)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, "worker", *args],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash would."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


def migrated_home(home: Path) -> Path:
    """``home`` holding a migrated, empty store that no process has open, as `vigil migrate` leaves it: a copy of
    ``MIGRATED_STORE``, a few milliseconds where a `vigil migrate` process costs over a CPU second."""
    assert MIGRATED_STORE is not None, "tests.conftest sets MIGRATED_STORE for the session"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copytree(MIGRATED_STORE, home / "chdb", symlinks=True)
    return home


class IntakeProcess(_Process):
    """A `vigil intake` subprocess on a free port; its log under ``home``."""

    def __init__(self, redis_url: str, home: Path, **env: str) -> None:
        from vigil.worker.demo.embedded_redis import free_port

        self.env = {**os.environ, "REDIS_URL": redis_url, **env}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        home.mkdir(parents=True, exist_ok=True)
        self.log = home / f"intake-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self, *args: str, timeout: float = 30) -> IntakeProcess:
        """``vigil intake --port PORT ARGS``, once it answers ``/healthz``."""
        self._serving(["intake", "--port", str(self.port), *args], f"{self.url}/healthz", timeout)
        return self


class ReviewProcess(_Process):
    """A `vigil review` subprocess on a free port, reading the store at ``dsn``; its log under ``home``."""

    def __init__(self, redis_url: str, home: Path, dsn: str, **env: str) -> None:
        from vigil.worker.demo.embedded_redis import free_port

        self.env = {k: v for k, v in os.environ.items() if k not in ("CLICKHOUSE_DSN", "VIGIL_CONFIG")}
        self.env.update(REDIS_URL=redis_url, VIGIL_HOME=str(home), **env)
        self.dsn = dsn
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/review/"
        home.mkdir(parents=True, exist_ok=True)
        self.log = home / f"review-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self, *args: str, timeout: float = 60) -> ReviewProcess:
        """``vigil review --port PORT --dsn DSN ARGS``, once its page answers (a 401 included)."""
        self._serving(["review", "--port", str(self.port), "--dsn", self.dsn, *args], self.url, timeout,
                      any_status=True)
        return self


@contextmanager
def intake_and_worker(redis_url: str, home: Path, config: Path, **worker_env: str,
                      ) -> Iterator[tuple[IntakeProcess, WorkerProcess]]:
    """A real `vigil intake` and `vigil worker` on a flushed Redis (the worker's chDB under ``home / "vigil"``), both
    stopped on the way out; after a body that ran through, the worker must exit 0 (it wrote everything it took)."""
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()
    intake = IntakeProcess(redis_url, home).start()
    worker = WorkerProcess(redis_url, home / "vigil", config, **worker_env).start()
    try:
        yield intake, worker
        assert worker.stop() == 0
    finally:
        intake.stop()
        worker.stop()


def wait_drained(redis_url: str, worker: WorkerProcess, timeout: float = 120) -> None:
    """Wait until nothing is queued, unacked or being written (polling Redis: the work has no other clock)."""
    def alive(_: dict[str, int]) -> None:
        if worker.process is not None and worker.process.poll() is not None:
            raise AssertionError(f"worker exited early:\n{worker.output()[-4000:]}")

    try:
        drain(redis.Redis.from_url(redis_url), timeout=timeout, check=alive)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{worker.output()[-4000:]}") from None


def wait_while_alive(worker: WorkerProcess, condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Poll ``condition`` until it holds, failing with the worker's log when it exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert worker.process.poll() is None, f"the worker exited:\n{worker.output()[-4000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{worker.output()[-4000:]}"
        time.sleep(0.05)


def make_turn(i: int, agent: str = "support-bot") -> dict:
    return {
        "trace_id": uuid.uuid4().hex,
        "span_id": uuid.uuid4().hex[:16],
        "project": "acme",
        "agent": agent,
        "input": [{"role": "user", "content": f"How do I return order {i} that arrived damaged?"}],
        "output": f"You can return order {i} within 30 days. Damaged items are refunded in full. "
                  "Our office dog is called Biscuit.",
    }


def send(redis_url: str, batch: list) -> None:
    configure(redis_url)
    app.send_task(INGEST_TASK, args=[batch], queue=INGEST_QUEUE)


def ship(redis_url: str, batch: list) -> None:
    """Publish ``batch`` as the SDK does, on a connection of its own: for a Redis other than the session's (the
    test process's Celery app, which ``send`` uses, would keep a pooled connection to it after it stops)."""
    from vigil.producers._sender import CelerySender

    transport = CelerySender(redis_url)
    try:
        transport.send(batch)
    finally:
        transport.close()
