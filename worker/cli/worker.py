"""``vigil worker``, ``vigil beat`` and ``vigil migrate``: a Celery worker fit for I/O-bound judge calls, its writer.

The worker runs Celery's thread pool (judge calls wait on the network, not the CPU) over the ingest and score
queues. With ``--writer`` (the default) the same process also runs the batching ClickHouse writer and the alert
checks every ``VIGIL_ALERTS_INTERVAL`` seconds (``vigil.worker.pipeline.beat``): with the embedded chDB store exactly
one process may do so; with a ClickHouse server any number can.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import warnings
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from vigil.worker.cli.config import CheckedConfig

__all__ = ["beat_command", "migrate_command", "worker_command"]

# SIGTERM before Celery installs its own handler (imports, the config check, opening and migrating the store, Celery's
# bootstrap: seconds, more on a loaded host) would kill the process with the default action: exit -15, no flush.
# Until Celery takes over, this handler asks for the same warm shutdown instead (the worker exits 0).
_term_requested = threading.Event()


def _early_term(signum: int, frame: object) -> None:
    from celery.worker import state

    _term_requested.set()
    state.should_stop = 0  # Celery's warm shutdown (EX_OK), as soon as its consumer loop runs


def _stopped_before_start() -> bool:
    if _term_requested.is_set():
        click.echo("SIGTERM before the worker started: stopped", err=True)
    return _term_requested.is_set()


_BROKER_WAIT = click.option(
    "--broker-wait", type=click.FloatRange(0, 600), default=30.0, show_default=True, metavar="SECONDS",
    help="How long to retry an unreachable broker (REDIS_URL) at start before exiting non-zero.")


def _say(line: str) -> None:
    click.echo(f"vigil: {line}", err=True)


@click.command("worker")
@click.option("--concurrency", "-c", default=100, show_default=True,
              help="Threads: tasks (and judge calls) in flight in this process.")
@click.option("--writer/--no-writer", default=True, show_default=True,
              help="Also run the ClickHouse writer in this process (exactly one on chDB).")
@click.option("--writer-id", default=None,
              help="Names this writer's in-flight list (default: host name and pid, unique per process).")
@click.option("--queues", "-Q", default=None, show_default="vigil.ingest,vigil.score")
@click.option("--name", "-n", default=None, help="Celery node name.")
@_BROKER_WAIT
def worker_command(concurrency: int, writer: bool, writer_id: str | None, queues: str | None,
                   name: str | None, broker_wait: float) -> None:
    """Start a Celery worker (thread pool) and, unless --no-writer, the batching ClickHouse writer.

    The monitor config (VIGIL_CONFIG) is checked first, as `vigil config check` does; an invalid or missing one
    stops here (only `vigil demo` runs the bundled demo monitors).

    \b
    Examples:
      VIGIL_CONFIG=vigil.yaml REDIS_URL=redis://localhost:6379/0 vigil worker
      vigil worker --no-writer -c 200      # more scoring capacity beside the one writer (chDB)
    """
    signal.signal(signal.SIGTERM, _early_term)  # first: everything below is slow (see _early_term)
    from celery import signals
    from celery.exceptions import CPendingDeprecationWarning
    from vigil.schemas.broker import ALERTS_QUEUE, FEEDBACK_QUEUE, INGEST_QUEUE, SCORE_QUEUE
    from vigil.worker.cli.config import check_config
    from vigil.worker.cli.errors import check_kombu
    from vigil.worker.logs import configure_logging
    from vigil.worker.pipeline.app import app, configure
    from vigil.worker.pipeline.broker_watch import BrokerWatch, wait_for_broker
    from vigil.worker.settings import CONFIG_NOT_SET, get_settings
    from vigil.worker.sinks import writer as process_writer
    from vigil.worker.store import default_dsn

    queues = queues or f"{INGEST_QUEUE},{SCORE_QUEUE}"
    os.environ.setdefault("VIGIL_REDIS_CONNECTIONS", str(concurrency))  # as many as tasks in flight; more wait
    get_settings.cache_clear()
    settings = get_settings()
    if settings.config_path is None:  # a production worker never falls back to the demo's monitors
        raise click.ClickException(CONFIG_NOT_SET)
    checked = check_config(settings.config_path)
    check_kombu()
    configure_logging(settings.log_level)
    configure()
    # Celery's own "received"/"succeeded" line per task costs more CPU than scoring does; vigil logs its outcomes.
    logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
    logging.getLogger("celery.worker.strategy").setLevel(logging.WARNING)
    broker_url = settings.redis_url or app.conf.broker_url
    wait_for_broker(broker_url, broker_wait, say=_say)
    _announce(checked)
    _check_broker_persistence(broker_url)
    if settings.cache_url:
        _check_cache_redis(settings.cache_url, settings.redis_url or app.conf.broker_url)
    if _stopped_before_start():
        return
    if writer:
        queues = f"{queues},{ALERTS_QUEUE},{FEEDBACK_QUEUE}"
        redis_url = settings.redis_url or app.conf.broker_url
        dsn = settings.clickhouse_dsn or default_dsn(settings.home / "chdb")
        the_writer = process_writer.open_writer(redis_url, dsn, writer_id or f"{socket.gethostname()}-{os.getpid()}")

        @signals.worker_ready.connect(weak=False)
        def _start(**_: object) -> None:
            the_writer.start()

        @signals.worker_shutdown.connect(weak=False)
        def _stop(**_: object) -> None:
            the_writer.stop()

    threads = {}

    @signals.worker_ready.connect(weak=False)
    def _start_threads(**_: object) -> None:
        from vigil.worker.pipeline.parked import start_mover

        # Celery 5 warns in seven lines, on every lost connection, that a setting's default changes in 6.0 (its
        # logging setup has just let every such warning through); the broker watch's one line says what matters
        warnings.filterwarnings("ignore", category=CPendingDeprecationWarning, message=r"\s*In Celery 5\.1")

        threads["mover"] = start_mover()  # releases work parked for a paused judge once it may be called
        threads["watch"] = BrokerWatch(broker_url).start()  # the one line per interval while the broker is lost
        if writer:  # the alert checks run where the store is open, once per interval across writers and a beat
            from vigil.worker.pipeline.beat import AlertTicker

            threads["alerts"] = AlertTicker(settings.alerts_interval_s).start()

    @signals.worker_shutdown.connect(weak=False)
    def _stop_threads(**_: object) -> None:
        for thread in threads.values():
            thread.stop()

    if _stopped_before_start():
        if writer:
            the_writer.stop()
        return
    argv = ["--pool=threads", f"--concurrency={concurrency}", f"--queues={queues}",
            "--without-gossip", "--without-mingle", f"--loglevel={settings.log_level}",
            f"--hostname={name or f'vigil-{os.getpid()}@%h'}"]
    # Celery's own worker command, given the app as `celery --app` would (app.worker_main would drop the worker's
    # exit status: an unrecoverable error must not look like a clean stop). Not through the `celery` group: it imports
    # every other subcommand and its REPL first (~0.15 s of CPU at each start).
    from vigil.worker.cli import import_hiding

    import_hiding("celery.bin.base", "pygments")  # it builds a pygments lexer (~0.03 CPU-s) to colour `celery inspect`
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker as celery_worker

    code = celery_worker.main(args=argv, prog_name="celery worker", standalone_mode=False,
                              obj=CLIContext(app=app, no_color=None, workdir=None))
    if code:
        raise SystemExit(code)


def _announce(checked: CheckedConfig) -> None:
    """Say which monitors this worker runs (and what the config check warned about)."""
    for warning in checked.warnings:
        click.echo(f"warning: {warning}", err=True)
    monitors = checked.config.monitors
    click.echo(f"monitors ({len(monitors)}): " + (", ".join(
        f"{m.name} ({m.scorer}, rate {m.sampling_rate:g}, {f'judge {m.judge}' if m.judge else 'no judge'})"
        for m in monitors) or "none"), err=True)


def _check_broker_persistence(url: str) -> None:
    """Say loudly when the broker would lose queued turns on a restart (a check, never a reason not to start)."""
    import redis
    import structlog
    from vigil.schemas.broker import broker
    from vigil.worker.pipeline.durability import persistence_problem

    client = broker(url).redis(socket_connect_timeout=5, socket_timeout=5)
    try:
        problem = persistence_problem(client)
    except redis.RedisError as exc:
        problem = None
        structlog.get_logger("vigil.worker").warning("broker persistence unknown", error=str(exc)[:200])
    finally:
        client.close()
    if problem:
        structlog.get_logger("vigil.worker").error("BROKER IS NOT DURABLE", problem=problem)


def _check_cache_redis(cache_url: str, broker_url: str) -> None:
    """Say loudly when the judge cache's Redis would compete with the broker or refuse writes when full."""
    import redis
    import structlog
    from vigil.schemas.broker import broker
    from vigil.worker.judge.cache import cache_redis_problem

    clients = [broker(url).redis(socket_connect_timeout=5, socket_timeout=5) for url in (cache_url, broker_url)]
    try:
        problem = cache_redis_problem(*clients)
    except redis.RedisError as exc:
        problem = None
        structlog.get_logger("vigil.worker").warning("judge cache Redis unchecked", error=str(exc)[:200])
    finally:
        for client in clients:
            client.close()
    if problem:
        structlog.get_logger("vigil.worker").error("JUDGE CACHE MISCONFIGURED", problem=problem)


@click.command("migrate")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB).")
def migrate_command(dsn: str | None) -> None:
    """Apply pending ClickHouse migrations (idempotent)."""
    from vigil.worker.settings import get_settings
    from vigil.worker.store import connect, default_dsn, migrate

    applied = migrate(connect(dsn or default_dsn(get_settings().home / "chdb")))
    click.echo("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))


@click.command("beat")
@_BROKER_WAIT
def beat_command(broker_wait: float) -> None:
    """Start Celery beat: schedules the regression check every VIGIL_ALERTS_INTERVAL seconds (run one)."""
    from vigil.worker.cli.errors import check_kombu
    from vigil.worker.logs import configure_logging
    from vigil.worker.pipeline.app import app, configure
    from vigil.worker.pipeline.beat import schedule
    from vigil.worker.pipeline.broker_watch import BrokerWatch, wait_for_broker
    from vigil.worker.settings import get_settings

    settings = get_settings()
    check_kombu()
    configure_logging(settings.log_level)
    configure()
    broker_url = settings.redis_url or app.conf.broker_url
    wait_for_broker(broker_url, broker_wait, say=_say)
    app.conf.beat_schedule = schedule()
    settings.home.mkdir(parents=True, exist_ok=True)
    watch = BrokerWatch(broker_url).start()  # beat's own reconnect lines are Celery's, quieted with the CLI's
    try:
        app.start(argv=["beat", "--loglevel=INFO", f"--schedule={settings.home / 'celerybeat-schedule'}"])
    finally:
        watch.stop()
