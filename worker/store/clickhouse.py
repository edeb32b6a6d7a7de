"""Opening the store. ``CLICKHOUSE_DSN`` picks a server; unset, the embedded default is chDB in ``.vigil/chdb``.

chDB lets one OS process open a directory at a time: only the writer process (and, after it stops, readers such as
``vigil report``) may call ``connect`` on a ``chdb://`` DSN.
"""

from __future__ import annotations

import os
from pathlib import Path

import clickhouse_connect
from clickhouse_connect.driver.client import Client

__all__ = ["Client", "connect", "default_dsn"]


def default_dsn(data_dir: str | Path | None = None) -> str:
    """The DSN from ``CLICKHOUSE_DSN``, else chDB under ``data_dir`` (default ``$VIGIL_HOME/chdb``)."""
    if dsn := os.environ.get("CLICKHOUSE_DSN"):
        return dsn
    base = Path(data_dir) if data_dir else Path(os.environ.get("VIGIL_HOME", ".vigil")) / "chdb"
    base.mkdir(parents=True, exist_ok=True)
    return f"chdb://{base.resolve()}"


def connect(dsn: str | None = None) -> Client:
    return clickhouse_connect.get_client(dsn=dsn or default_dsn())
