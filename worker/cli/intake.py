"""``vigil intake``: the OTLP/HTTP receiver (``vigil.worker.intake.server``), writing to Redis only."""

from __future__ import annotations

import click

__all__ = ["intake_command"]


@click.command("intake")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every one).")
@click.option("--port", default=4318, show_default=True, type=click.IntRange(0, 65535),
              help="Port (4318 is OTLP/HTTP's).")
def intake_command(host: str, port: int) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces) and vigil turns (POST /v1/turns) into Redis."""
    from aiohttp import web
    from pydantic import ValidationError
    from vigil.worker.intake.server import make_app
    from vigil.worker.intake.settings import intake_settings
    from vigil.worker.logs import configure_logging
    from vigil.worker.settings import get_settings

    settings = get_settings()
    configure_logging(settings.log_level)
    try:
        intake = intake_settings()
    except ValidationError as exc:
        problems = "; ".join(f"VIGIL_INTAKE_{str(e['loc'][0]).upper()}: {e['msg']}" for e in exc.errors())
        raise click.ClickException(problems) from None
    app = make_app(settings.redis_url or "redis://127.0.0.1:6379/0", intake)
    try:
        web.run_app(app, host=host, port=port, print=lambda line: click.echo(line.strip(), err=True),
                    access_log=None, handle_signals=True)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
