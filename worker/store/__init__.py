"""ClickHouse, through clickhouse-connect only: a server (``http://…``) or chDB in-process (``chdb:///dir``); the
migrations; and all SQL (``queries``: the report's, the detector's and Grafana's, which ``grafana`` renders)."""

from vigil.worker.store.clickhouse import connect, default_dsn
from vigil.worker.store.migrations import migrate

__all__ = ["connect", "default_dsn", "migrate"]
