"""``vigil keys``: ingest and read keys for the config's ``projects:`` (``vigil.worker.serving.keys``)."""

from __future__ import annotations

from datetime import datetime

import click

__all__ = ["keys"]


@click.group("keys")
def keys() -> None:
    """Project keys: each project's senders present an ingest key to `vigil intake` (Authorization: Bearer KEY); a
    read key reads the project's rows only from the embedded store's read endpoint."""


@keys.command("new")
@click.option("--project", required=True, help="The project the key sends for (a plain name: letters, digits, "
                                                "'.', '_', '-').")
@click.option("--not-after", type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]), default=None,
              help="The key stops working after this UTC date or time (for a key being rotated out).")
@click.option("--read", is_flag=True, help="A read key (the read endpoint, this project's rows only) instead of an "
                                           "ingest key.")
def new_command(project: str, not_after: datetime | None, read: bool) -> None:
    """Make a key: prints it once (give it to the project's senders, or readers) and the config lines that accept
    it (the config keeps only its SHA-256). Restart `vigil intake` (ingest keys) or `vigil worker` (read keys) to
    load them."""
    import re

    from vigil.schemas.config import PROJECT_NAME
    from vigil.worker.serving.keys import new_key

    if not re.match(PROJECT_NAME, project):
        raise click.BadParameter("a project name is letters, digits, '.', '_' or '-' (at most 128), starting with "
                                 "a letter or digit", param_hint="--project")
    key, digest = new_key()
    entry = f"sha256: {digest}" + (f", not_after: {not_after:%Y-%m-%dT%H:%M:%S}Z" if not_after else "")
    use = "readers use it as the read endpoint's password" if read else \
        "senders send 'Authorization: Bearer <key>'"
    section = "read_keys" if read else "keys"
    click.echo(f"{'read' if read else 'ingest'} key for project {project} (shown once; {use}):\n\n  {key}\n")
    click.echo("add to your config (VIGIL_CONFIG), under projects:\n")
    click.echo(f"  - name: {project}\n    {section}:\n      - {{{entry}}}\n")
    click.echo(f"(a project already listed: add the line to its {section})")
