"""Opening the store. ``CLICKHOUSE_DSN`` picks a server; unset, the embedded default is chDB in ``$VIGIL_HOME/chdb``.

chDB lets one OS process open a directory at a time. The writer process (inside ``vigil worker``) holds it and
serves reads to the others (``vigil.worker.store.read_server``): ``connect_for_reading`` goes through that process when
one holds the directory, and opens the directory itself otherwise. With a ClickHouse server both connect directly.
Every failure to open the store is a ``StoreError`` whose message is one line and never shows a password.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import clickhouse_connect
from clickhouse_connect.driver import options
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

__all__ = [
    "Client",
    "StoreError",
    "chdb_dir",
    "check_dsn",
    "connect",
    "connect_for_reading",
    "default_dsn",
    "require_tables",
    "safe_dsn",
]

_SCHEMES = ("http", "https", "chdb")

# vigil hands clickhouse-connect rows of Python values, never a pandas DataFrame or a numpy array, and asks for
# neither back, yet its insert imports pandas and numpy to ask whether the rows are one: ~0.5 s of CPU in every
# process that writes (a quarter of a worker's start). Unless something here loaded them already, it is told they
# are absent, which is true of every insert and query vigil makes.
if "pandas" not in sys.modules:
    options.pd = options.pd_time_test = None
if "numpy" not in sys.modules:
    options.np = None


def _chdb_without_arrow() -> None:
    """Import chDB's connection module as if pyarrow were not installed (pyarrow itself stays importable after).

    It imports pyarrow, and with it numpy, for its Arrow outputs: ~0.13 s of CPU in every process that opens the
    embedded store. clickhouse-connect reads chDB in ClickHouse's Native format, never Arrow, and nothing in vigil
    calls chDB directly."""
    if "chdb.state" in sys.modules or "pyarrow" in sys.modules:
        return
    sys.modules["pyarrow"] = None  # type: ignore[assignment]  # the import statement raises ImportError
    try:
        import chdb.state  # noqa: F401
    finally:
        del sys.modules["pyarrow"]


class StoreError(RuntimeError):
    """The store cannot be opened or read as asked; the message says why and what to do, on one line."""


def safe_dsn(dsn: str) -> str:
    """The DSN without its password (``http://user:secret@host`` -> ``http://user:***@host``)."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def check_dsn(dsn: str, source: str = "CLICKHOUSE_DSN") -> str:
    """``dsn`` if vigil can open it (``http://``, ``https://`` or ``chdb://``), else a ``StoreError`` naming it."""
    scheme = dsn.split("://", 1)[0].lower() if "://" in dsn else ""
    if scheme not in _SCHEMES:
        raise StoreError(f"{source}={safe_dsn(dsn)!s} is not a store vigil can open: use http://host:8123, "
                         f"https://host:8443 (a ClickHouse server) or chdb:///path (the embedded store)")
    return dsn


def default_dsn(data_dir: str | Path | None = None) -> str:
    """The DSN from ``CLICKHOUSE_DSN``, else chDB under ``data_dir`` (default ``$VIGIL_HOME/chdb``)."""
    if dsn := os.environ.get("CLICKHOUSE_DSN"):
        return check_dsn(dsn)
    base = Path(data_dir) if data_dir else Path(os.environ.get("VIGIL_HOME", ".vigil")) / "chdb"
    base.mkdir(parents=True, exist_ok=True)
    return f"chdb://{base.resolve()}"


def chdb_dir(dsn: str) -> Path | None:
    """The data directory of a ``chdb://`` DSN (None for a server)."""
    if not dsn.startswith("chdb:"):
        return None
    parts = urlsplit(dsn)
    return Path(parts.netloc + parts.path) if parts.netloc and parts.netloc != "memory" else Path(parts.path)


_held_here: set[Path] = set()  # chDB directories this process has opened (chDB keeps one engine per process)


def _held_elsewhere(directory: Path) -> bool:
    """Whether another process holds chDB's lock on ``directory`` (its ``status`` file, locked with flock)."""
    if directory.resolve() in _held_here:
        return False
    try:
        fd = os.open(directory / "status", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def connect(dsn: str | None = None) -> Client:
    """Open the store (a chDB directory this process will hold, or a server connection)."""
    dsn = check_dsn(dsn, "--dsn") if dsn else default_dsn()
    directory = chdb_dir(dsn)
    if directory is not None and _held_elsewhere(directory):
        from vigil.worker.store.read_server import read_endpoint

        holder = read_endpoint(directory)
        raise StoreError(f"the embedded store {directory} is held by " + (
            f"a running `vigil worker` (pid {holder.pid}), which serves reads (`vigil report`, `vigil alerts "
            "check`) but no other use: stop it first" if holder else
            "another process that serves no reads: stop it and try again"))
    if directory is not None:
        _chdb_without_arrow()
    try:
        client = clickhouse_connect.get_client(dsn=dsn)
    except OperationalError as exc:
        raise StoreError(f"cannot reach ClickHouse at {safe_dsn(dsn)}: {_reason(exc)}") from exc
    except DatabaseError as exc:
        where = f"the embedded store {directory}" if directory is not None else f"ClickHouse at {safe_dsn(dsn)}"
        raise StoreError(f"cannot open {where}: {_reason(exc)}") from exc
    if directory is not None:
        _held_here.add(directory.resolve())
    return client


def connect_for_reading(dsn: str | None = None, *, open_here: bool = True) -> Client:
    """A client for reading the store, also while another local process (``vigil worker``) holds chDB open.

    With a chDB DSN whose directory a live process holds and serves (``vigil.worker.store.read_server``), a
    clickhouse-connect HTTP client to that process; otherwise the store opened here, as ``connect`` does, unless
    ``open_here`` is false (a process that must not take the directory from a worker about to open it): then a
    ``StoreError``.
    """
    from vigil.worker.store.read_server import read_endpoint

    dsn = check_dsn(dsn, "--dsn") if dsn else default_dsn()
    directory = chdb_dir(dsn)
    if directory is not None and (endpoint := read_endpoint(directory)) is not None:
        try:
            return clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port, username="default",
                                                 password=endpoint.password, compress=False,
                                                 connect_timeout=5, send_receive_timeout=300)
        except OperationalError as exc:  # nobody listens: a stale record (the pid now names another process)
            if not _held_elsewhere(directory):
                return connect(dsn) if open_here else _no_reader(directory)
            raise StoreError(f"the process holding {directory} (pid {endpoint.pid}) does not answer reads: "
                             f"{_reason(exc)}") from exc
        except DatabaseError as exc:
            raise StoreError(f"the process holding {directory} (pid {endpoint.pid}) refused to serve reads: "
                             f"{_reason(exc)}") from exc
    if directory is not None and not open_here:
        _no_reader(directory)
    return connect(dsn)


def _no_reader(directory: Path) -> Client:
    raise StoreError(f"no running process serves reads of {directory} yet")


def require_tables(client: Client, *tables: str) -> None:
    """A ``StoreError`` saying how to create the tables when the store lacks any of ``tables``."""
    present = {row[0] for row in client.query("SELECT name FROM system.tables WHERE database = currentDatabase()")
               .result_rows}
    missing = [t for t in tables if t not in present]
    if missing:
        raise StoreError(f"the store has no vigil tables yet ({', '.join(missing)} missing): nothing has been "
                         "written here; run `vigil migrate`, start `vigil worker`, or point VIGIL_HOME or "
                         "CLICKHOUSE_DSN at the store you meant (`vigil demo` writes to $VIGIL_HOME)")


def _reason(exc: Exception) -> str:
    """The useful part of a driver error, on one line."""
    text = str(exc)
    for pattern in (r"\[Errno -?\d+\] ([^\"')]+)", r"(Code: \d+\. DB::Exception: [^\n]*)"):
        if match := re.search(pattern, text):
            return match.group(1).strip()
    return " ".join(text.split())[:300]
