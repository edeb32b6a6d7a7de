"""Click options more than one command takes."""

from __future__ import annotations

import os

import click

__all__ = ["redis_url_option"]

redis_url_option = click.option(
    "--redis-url", default=lambda: os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), show_default="REDIS_URL",
    help="The Redis the SDK ships to (the workers' broker).")
