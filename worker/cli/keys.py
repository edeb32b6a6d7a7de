"""``vigil keys``: ingest keys for the config's ``projects:`` (``vigil.worker.intake.keys``)."""

from __future__ import annotations

from datetime import datetime

import click

__all__ = ["keys"]


@click.group("keys")
def keys() -> None:
    """Ingest keys: each project's senders present one to `vigil intake` (Authorization: Bearer KEY)."""


@keys.command("new")
@click.option("--project", required=True, help="The project the key sends for (a plain name: letters, digits, "
                                                "'.', '_', '-').")
@click.option("--not-after", type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]), default=None,
              help="The key stops working after this UTC date or time (for a key being rotated out).")
def new_command(project: str, not_after: datetime | None) -> None:
    """Make a key: prints it once (give it to the project's senders) and the config lines that accept it (the
    config keeps only its SHA-256). Restart `vigil intake` to load them."""
    import re

    from vigil.schemas.config import PROJECT_NAME
    from vigil.worker.intake.keys import new_key

    if not re.match(PROJECT_NAME, project):
        raise click.BadParameter("a project name is letters, digits, '.', '_' or '-' (at most 128), starting with "
                                 "a letter or digit", param_hint="--project")
    key, digest = new_key()
    entry = f"sha256: {digest}" + (f", not_after: {not_after:%Y-%m-%dT%H:%M:%S}Z" if not_after else "")
    click.echo(f"key for project {project} (shown once; senders send 'Authorization: Bearer <key>'):\n\n  {key}\n")
    click.echo("add to your config (VIGIL_CONFIG), under projects:\n")
    click.echo(f"  - name: {project}\n    keys:\n      - {{{entry}}}\n")
    click.echo("(a project already listed: add the keys line to its keys)")
