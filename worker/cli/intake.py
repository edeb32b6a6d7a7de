"""``vigil intake``: the OTLP/HTTP receiver (``vigil.worker.intake.server``), writing to Redis only."""

from __future__ import annotations

import click

__all__ = ["intake_command"]


@click.command("intake")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every one).")
@click.option("--port", default=4318, show_default=True, type=click.IntRange(0, 65535),
              help="Port (4318 is OTLP/HTTP's).")
@click.option("--broker-wait", type=click.FloatRange(0, 600), default=30.0, show_default=True, metavar="SECONDS",
              help="How long to retry an unreachable broker (REDIS_URL) at start before exiting non-zero.")
@click.option("--log-requests/--no-log-requests", default=None,
              help="One info line per request: path, status, spans accepted / rejected, bytes (default: on; "
                   "VIGIL_INTAKE_LOG_REQUESTS).")
def intake_command(host: str, port: int, broker_wait: float, log_requests: bool | None) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces), the GenAI events in OTLP logs (POST /v1/logs: message content
    some instrumentations send as log records) and vigil turns (POST /v1/turns) into Redis. Point any OpenTelemetry
    SDK at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:PORT."""
    import os

    import structlog
    from pydantic import ValidationError
    from vigil.worker.cli.errors import check_kombu
    from vigil.worker.serving.keys import KeyRing
    from vigil.worker.intake.server import make_app, run
    from vigil.worker.intake.settings import intake_settings
    from vigil.worker.logs import configure_logging
    from vigil.worker.pipeline.broker_watch import BrokerWatch, wait_for_broker
    from vigil.worker.serving.guard import is_loopback
    from vigil.worker.settings import get_settings

    settings = get_settings()
    check_kombu()
    configure_logging(settings.log_level)
    try:
        intake = intake_settings()
        if log_requests is not None:
            intake = intake.model_copy(update={"log_requests": log_requests})
    except ValidationError as exc:
        problems = "; ".join(f"VIGIL_INTAKE_{str(e['loc'][0]).upper()}: {e['msg']}" for e in exc.errors())
        raise click.ClickException(problems) from None
    keys = KeyRing.of(intake.token.get_secret_value() if intake.token is not None else None, _config(settings))
    if not keys.required and not is_loopback(host):
        why = "VIGIL_INTAKE_TOKEN is empty, which means no token" if "VIGIL_INTAKE_TOKEN" in os.environ \
            else "VIGIL_INTAKE_TOKEN is not set"
        structlog.get_logger("vigil.intake").warning(
            f"listening beyond loopback without a token ({why}) or project keys in the config: anyone who "
            "can reach this port can send spans and turns; set VIGIL_INTAKE_TOKEN or add keys under projects: "
            "(vigil keys new --project NAME) to require 'Authorization: Bearer <key>'", host=host, port=port)
    redis_url = settings.redis_url or "redis://127.0.0.1:6379/0"
    wait_for_broker(redis_url, broker_wait, say=lambda line: click.echo(f"vigil: {line}", err=True))
    app = make_app(redis_url, intake, keys=keys)
    watch = BrokerWatch(redis_url).start()  # one line per interval while Redis is lost (the 503s say nothing more)
    try:
        run(app, host, port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    finally:
        watch.stop()


def _config(settings):
    """The config's project keys, when ``VIGIL_CONFIG`` names one (a config that cannot be read stops the intake
    with its one-line reason: keys that did not load would leave their projects locked out, or the door open)."""
    from vigil.worker.cli.errors import one_line
    from vigil.worker.settings import monitor_config

    if settings.config_path is None:
        return None
    try:
        return monitor_config()
    except Exception as exc:  # noqa: BLE001 - a YAML, validation or file error: said in one line
        raise click.ClickException(f"VIGIL_CONFIG ({settings.config_path}): {one_line(exc)}") from None
