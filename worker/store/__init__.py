"""ClickHouse, through clickhouse-connect only: a server (``http://…``) or chDB in-process (``chdb:///dir``)."""

from worker.store.clickhouse import connect, default_dsn
from worker.store.migrations import migrate

__all__ = ["connect", "default_dsn", "migrate"]
