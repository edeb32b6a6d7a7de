"""``vigil worker`` and ``vigil migrate``: a Celery worker fit for I/O-bound judge calls, and its writer.

The worker runs Celery's thread pool (judge calls wait on the network, not the CPU) over the ingest and score
queues. With ``--writer`` (the default) the same process also runs the batching ClickHouse writer: with the
embedded chDB store exactly one process may do so; with a ClickHouse server any number can.
"""

from __future__ import annotations

import logging
import os
import socket

import click
import redis
from celery import signals

from schemas.broker import INGEST_QUEUE
from worker.app import ALERTS_QUEUE, SCORE_QUEUE, app, configure
from worker.logs import configure_logging
from worker.settings import get_settings
from worker.sinks.writer import Writer
from worker.store import connect, default_dsn, migrate

__all__ = ["current_writer", "migrate_command", "worker_command"]

_writer: Writer | None = None


def current_writer() -> Writer | None:
    """This process's writer, if it runs one (then it also holds the store open)."""
    return _writer


def open_writer(redis_url: str, dsn: str, writer_id: str) -> Writer:
    """Open and migrate the store now, so a worker whose store is unreachable fails at start, not silently."""
    settings = get_settings()
    store = connect(dsn)
    migrate(store)
    return Writer(redis.Redis.from_url(redis_url), store, writer_id=writer_id,
                  batch_rows=settings.write_batch_rows, batch_age_s=settings.write_batch_age_s)


@click.command("worker")
@click.option("--concurrency", "-c", default=100, show_default=True,
              help="Threads: tasks (and judge calls) in flight in this process.")
@click.option("--writer/--no-writer", default=True, show_default=True,
              help="Also run the ClickHouse writer in this process (exactly one on chDB).")
@click.option("--writer-id", default=None,
              help="Names this writer's in-flight list (default: host name and pid, unique per process).")
@click.option("--queues", "-Q", default=f"{INGEST_QUEUE},{SCORE_QUEUE}", show_default=True)
@click.option("--name", "-n", default=None, help="Celery node name.")
def worker_command(concurrency: int, writer: bool, writer_id: str | None, queues: str, name: str | None) -> None:
    """Start a Celery worker (thread pool) and, unless --no-writer, the batching ClickHouse writer."""
    settings = get_settings()
    configure_logging(settings.log_level)
    configure()
    # Celery's own "received"/"succeeded" line per task costs more CPU than scoring does; vigil logs its outcomes.
    logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
    logging.getLogger("celery.worker.strategy").setLevel(logging.WARNING)
    if writer:
        queues = f"{queues},{ALERTS_QUEUE}"
        redis_url = settings.redis_url or app.conf.broker_url
        dsn = settings.clickhouse_dsn or default_dsn(settings.home / "chdb")
        global _writer
        _writer = open_writer(redis_url, dsn, writer_id or f"{socket.gethostname()}-{os.getpid()}")

        @signals.worker_ready.connect(weak=False)
        def _start(**_: object) -> None:
            _writer.start()

        @signals.worker_shutdown.connect(weak=False)
        def _stop(**_: object) -> None:
            if _writer is not None:
                _writer.stop()

    argv = ["worker", "--pool=threads", f"--concurrency={concurrency}", f"--queues={queues}",
            "--without-gossip", "--without-mingle", f"--loglevel={settings.log_level}",
            f"--hostname={name or f'vigil-{os.getpid()}@%h'}"]
    app.worker_main(argv)


@click.command("migrate")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB).")
def migrate_command(dsn: str | None) -> None:
    """Apply pending ClickHouse migrations (idempotent)."""
    applied = migrate(connect(dsn or default_dsn(get_settings().home / "chdb")))
    click.echo("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))
