"""Click options more than one command takes."""

from __future__ import annotations

import os

import click

__all__ = ["read_store", "redis_url_option"]

redis_url_option = click.option(
    "--redis-url", default=lambda: os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), show_default="REDIS_URL",
    help="The Redis the SDK ships to (the workers' broker).")


def read_store(dsn: str | None):
    """``connect_for_reading(dsn)``, closed when the command ends: an embedded store is let go at once (one chDB
    directory per process at a time), not whenever the client is collected."""
    from vigil.worker.store.clickhouse import connect_for_reading

    client = connect_for_reading(dsn)
    click.get_current_context().call_on_close(client.close)
    return client
