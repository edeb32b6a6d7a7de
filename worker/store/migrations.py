"""Versioned, idempotent migrations: ``schemas/ddl/NNNN_name.sql``, applied in order, each recorded once.

A statement that names ``{rollup}`` is one definition for every rollup: it runs once per entry of ``ROLLUPS``,
with ``{rollup}`` replaced by the rollup's suffix (``1m``, ``1h``) and ``{bucket}`` by its bucketing function, so
the per-minute and per-hour tables and views cannot drift apart.
"""

from __future__ import annotations

from importlib import resources

from clickhouse_connect.driver.client import Client

__all__ = ["ROLLUPS", "migrate", "pending"]

ROLLUPS: dict[str, str] = {"1m": "toStartOfMinute", "1h": "toStartOfHour"}  # suffix -> bucketing function

_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations
(version UInt32, name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))
ENGINE = ReplacingMergeTree(applied_at) ORDER BY version
"""


def _files() -> list[tuple[int, str, str]]:
    ddl = resources.files("schemas") / "ddl"
    found = []
    for entry in ddl.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def _statements(sql: str) -> list[str]:
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    out = []
    for statement in (s.strip() for s in "\n".join(lines).split(";")):
        if "{rollup}" in statement:
            out += [statement.replace("{rollup}", suffix).replace("{bucket}", bucket)
                    for suffix, bucket in ROLLUPS.items()]
        elif statement:
            out.append(statement)
    return out


def pending(client: Client) -> list[tuple[int, str]]:
    client.command(_LEDGER)
    done = {row[0] for row in client.query("SELECT version FROM schema_migrations FINAL").result_rows}
    return [(version, name) for version, name, _ in _files() if version not in done]


def migrate(client: Client) -> list[str]:
    """Apply what has not been applied; return the names applied. Safe to run any number of times."""
    todo = {version for version, _ in pending(client)}
    applied = []
    for version, name, sql in _files():
        if version not in todo:
            continue
        for statement in _statements(sql):
            client.command(statement)
        client.insert("schema_migrations", [[version, name]], column_names=["version", "name"])
        applied.append(name)
    return applied
