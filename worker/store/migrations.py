"""Versioned, idempotent migrations: ``schemas/ddl/NNNN_name.sql``, applied in order, each recorded once.

A statement that names ``{rollup}`` is one definition for every rollup: it runs once per entry of ``ROLLUPS``,
with ``{rollup}`` replaced by the rollup's suffix (``1m``, ``1h``) and ``{bucket}`` by its bucketing function, so
the per-minute and per-hour tables and views cannot drift apart.

A statement preceded by a ``-- when: SELECT …`` line runs only when that query's first cell is non-zero: a step
that is not idempotent by itself (``EXCHANGE TABLES``, a copy) says in which state it is due, so a migration
interrupted half-way finishes on the next run instead of repeating or skipping a step.
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
    ddl = resources.files("vigil.schemas") / "ddl"
    found = []
    for entry in ddl.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    versions = [v for v, _, _ in found]
    if clash := sorted({name for v, name, _ in found if versions.count(v) > 1}):
        # the ledger records versions: a second file of the same number would never run
        raise RuntimeError(f"migrations share a version number: {', '.join(clash)}; renumber one")
    return sorted(found)


def _statements(sql: str) -> list[tuple[str | None, str]]:
    """(guard, statement) pairs in order; the guard is the ``-- when:`` query before the statement, if any."""
    lines = [line for line in sql.splitlines()
             if not line.strip().startswith("--") or line.strip().startswith("-- when:")]
    out: list[tuple[str | None, str]] = []
    for chunk in "\n".join(lines).split(";"):
        guards = [line.strip().removeprefix("-- when:").strip() for line in chunk.splitlines()
                  if line.strip().startswith("-- when:")]
        statement = "\n".join(line for line in chunk.splitlines() if not line.strip().startswith("--")).strip()
        guard = guards[-1] if guards else None
        if "{rollup}" in statement:
            out += [(guard, statement.replace("{rollup}", suffix).replace("{bucket}", bucket))
                    for suffix, bucket in ROLLUPS.items()]
        elif statement:
            out.append((guard, statement))
    return out


def pending(client: Client) -> list[tuple[int, str]]:
    client.command(_LEDGER)
    done = {row[0] for row in client.query("SELECT version FROM schema_migrations FINAL").result_rows}
    return [(version, name) for version, name, _ in _files() if version not in done]


def migrate(client: Client, *, upto: int | None = None) -> list[str]:
    """Apply what has not been applied (up to version ``upto``, if given); return the names applied. Safe to run
    any number of times."""
    todo = {version for version, _ in pending(client) if upto is None or version <= upto}
    applied = []
    for version, name, sql in _files():
        if version not in todo:
            continue
        for guard, statement in _statements(sql):
            if guard is None or client.query(guard).result_rows[0][0]:
                client.command(statement)
        client.insert("schema_migrations", [[version, name]], column_names=["version", "name"])
        applied.append(name)
    return applied
