"""Reads for other local processes while one process holds the embedded chDB store.

chDB lets one OS process open a data directory. The process that holds it (the writer inside ``vigil worker``)
serves read-only queries on ``127.0.0.1`` through the part of ClickHouse's HTTP interface that clickhouse-connect
speaks (a query in the URL or the body, ``FORMAT`` at its end, the answer's bytes in that format), so
``vigil report``, ``vigil alerts check`` and ``vigil eval`` read through an ordinary clickhouse-connect HTTP client.
The address and a random password are written next to the data directory (``<dir>.endpoint``, mode 0600) and
removed when serving stops. The one write it takes is the alert checker's (``vigil alerts check`` records the
alerts it raises and its detector checks): an INSERT into ``alerts`` or ``detector_checks``, run on the holder's own
client under its lock.

What a caller can make the holder (the process that also runs the writer) spend is bounded:

- the password is checked from the headers before a body is read; a project's read key (the config's
  ``projects: [{read_keys: ...}]``, ``vigil keys new --read``) is taken instead of it and reads that project's rows
  only: its statements run on a handle of their own whose every table is filtered before ``readonly = 1``
  (``additional_table_filters``: ``project = '<name>'``, or no rows for a table without a project column), and it
  never inserts; a body is capped by its declared length and as it
  streams (``VIGIL_READ_MAX_BYTES``); at most ``VIGIL_READ_MAX_CONNECTIONS`` connections are open; the Host header
  must be a loopback name (``worker.serving``);
- a query reads tables, never the host: the read handle runs with ``readonly = 1`` (no writes, no settings changed
  by a query, no table functions that reach files, URLs or other servers), and each statement is checked with the
  engine's own parser first (``statement_problem``): one statement, no ``INTO OUTFILE``, no ``file()``;
- each query runs under ``max_memory_usage`` (``VIGIL_READ_MAX_MEMORY``) and ``max_execution_time``
  (``VIGIL_READ_MAX_SECONDS``); a request that waits longer than that for the read handle is answered 503 with
  ``Retry-After``, so a slow query never holds the others for longer than its own limit.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import structlog
from clickhouse_connect.driver.client import Client
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from vigil.worker.serving import (
    BodyTooLarge,
    GuardedHandler,
    GuardedServer,
    UnreadableBody,
    UnsupportedEncoding,
    credential_ok,
)
from vigil.worker.serving.keys import KeyRing

__all__ = ["Endpoint", "ReadServer", "ReadSettings", "endpoint_path", "read_endpoint", "statement_problem"]

log = structlog.get_logger("vigil.reads")

_READ_ONLY = re.compile(r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*(SELECT|WITH|SHOW|DESCRIBE|DESC|EXISTS|EXPLAIN)\b",
                        re.IGNORECASE | re.DOTALL)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+`?(\w+)`?\s*(?:\(([^)]*)\))?\s*FORMAT\s+(\w+)\s*$",
                     re.IGNORECASE | re.DOTALL)
INSERTABLE = frozenset({"alerts", "detector_checks"})  # what `vigil alerts check` records
_TRAILING_FORMAT = re.compile(r"\bFORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE)
# Quoted text in the engine's formatting of a statement: string literals and quoted identifiers.
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`|\"(?:[^\"\\]|\\.)*\"", re.DOTALL)
_OUTFILE = re.compile(r"\bINTO\s+OUTFILE\b", re.IGNORECASE)
_FUNCTION = re.compile(r"^\s*Function (\S+)", re.MULTILINE)
# Table functions that read only what the query itself says; every other one (file, url, s3, remote, mysql, ...)
# reaches outside the store and is refused, as is the scalar file() (readonly = 1 refuses most of them too).
SAFE_TABLE_FUNCTIONS = frozenset({"numbers", "numbers_mt", "zeros", "zeros_mt", "values", "generateseries",
                                  "generate_series", "view", "null", "primes", "format"})
HOST_FUNCTIONS = frozenset({"file"})
_STATEMENT_PARAM = "vigil_statement_text"
_SUMMARY = json.dumps({"read_rows": "0", "read_bytes": "0", "written_rows": "0", "written_bytes": "0",
                       "total_rows_to_read": "0", "result_rows": "0", "result_bytes": "0", "elapsed_ns": "0"})


class ReadSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VIGIL_READ_", extra="ignore")

    max_bytes: int = Field(default=4 * 2**20, gt=0, description="largest request body (a query or an alerts insert)")
    max_connections: int = Field(default=8, gt=0, description="connections open at once; more are answered 503")
    max_memory: int = Field(default=1 * 2**30, gt=0, description="max_memory_usage of one query, bytes")
    max_seconds: float = Field(default=60.0, gt=0, description="max_execution_time of one query; also how long a "
                                                               "request waits for the read handle before a 503")


class Busy(RuntimeError):
    """The read handle stayed taken for the whole wait: answer 503 with Retry-After."""


def endpoint_path(data_dir: str | Path) -> Path:
    """Where the holder of ``data_dir`` records its read endpoint: a sibling file, ``<data_dir>.endpoint``."""
    path = Path(data_dir).resolve()
    return path.with_name(path.name + ".endpoint")


class Endpoint:
    """A recorded read endpoint: the holder's pid, its URL (``http://127.0.0.1:PORT``) and password."""

    def __init__(self, pid: int, host: str, port: int, password: str) -> None:
        self.pid, self.host, self.port, self.password = pid, host, port, password

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def read_endpoint(data_dir: str | Path) -> Endpoint | None:
    """The endpoint of the live process holding ``data_dir``, or None (no file, unreadable, or its pid is gone)."""
    try:
        record = json.loads(endpoint_path(data_dir).read_text(encoding="utf-8"))
        endpoint = Endpoint(int(record["pid"]), str(record["host"]), int(record["port"]), str(record["password"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return endpoint if endpoint.alive() else None


def statement_problem(formatted: str, ast: str, denied: frozenset[str] = HOST_FUNCTIONS) -> str | None:
    """Why a statement may not run here, from the engine's own single-line formatting of it and its ``EXPLAIN
    AST``; None when it may. ``denied``: function names (lower case) that reach outside the store."""
    if _OUTFILE.search(_QUOTED.sub("''", formatted)):
        return "INTO OUTFILE writes a file on the host"
    called = {name.lower() for name in _FUNCTION.findall(ast)}
    if reached := called & denied:
        return f"{', '.join(sorted(reached))}() reaches outside the store (files, URLs or other servers)"
    return None


class ReadServer:
    """Serves read-only queries on the store this process holds, on 127.0.0.1 (a free port)."""

    def __init__(self, client: Client, data_dir: str | Path, *, writer_client: Client | None = None,
                 writer_lock: threading.Lock | None = None, settings: ReadSettings | None = None,
                 read_keys: KeyRing | None = None, connect: Callable[[], Client] | None = None) -> None:
        """``read_keys``: projects' read keys; ``connect``: a new handle on the same store, one per such project."""
        self.settings = settings or ReadSettings()
        self.client = client
        self.lock = threading.Lock()  # one statement at a time on the read handle
        self.writer_client = writer_client
        self.writer_lock = writer_lock or threading.Lock()
        self.path = endpoint_path(data_dir)
        self.password = secrets.token_urlsafe(24)
        self.read_keys = read_keys if read_keys is not None and connect is not None else KeyRing([])
        self._connect = connect
        self._scoped: dict[str, Client] = {}
        self._limit(self.client)
        table_functions = self.client.query("SELECT name FROM system.table_functions").result_rows
        names = {str(row[0]).lower() for row in table_functions}
        self.denied = frozenset(names - SAFE_TABLE_FUNCTIONS) | HOST_FUNCTIONS
        self._server = GuardedServer(("127.0.0.1", 0), _handler(self), max_connections=self.settings.max_connections)
        self._thread: threading.Thread | None = None

    def _limit(self, client: Client, filters: str = "") -> None:
        """Limits (and a project's table filters) first: under readonly = 1 no query may change a setting again."""
        client.command(f"SET max_memory_usage = {int(self.settings.max_memory)}")
        client.command(f"SET max_execution_time = {float(self.settings.max_seconds)}")
        if filters:
            client.command(f"SET additional_table_filters = {filters}")
        client.command("SET readonly = 1")

    def _handle(self, project: str | None) -> Client:
        """The read handle for a full reader (None), or the one that sees ``project``'s rows only (made on its first
        request: every table of the store filtered on its project column, or to no rows without one)."""
        if project is None:
            return self.client
        if project not in self._scoped:
            assert self._connect is not None
            client = self._connect()
            tables = client.query("SELECT name, countIf(c.name = 'project') > 0 FROM system.tables AS t LEFT JOIN "
                                  "system.columns AS c ON c.database = t.database AND c.table = t.name "
                                  "WHERE t.database = currentDatabase() GROUP BY name").result_rows
            self._limit(client, _table_filters(tables, project))
            self._scoped[project] = client
        return self._scoped[project]

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> ReadServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="vigil-reads", daemon=True)
        self._thread.start()
        record = {"pid": os.getpid(), "host": "127.0.0.1", "port": self.port, "password": self.password}
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(tmp, self.path)
        log.info("serving reads of the embedded store", url=f"http://127.0.0.1:{self.port}", endpoint=str(self.path))
        return self

    def stop(self) -> None:
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
            if record.get("pid") == os.getpid():
                self.path.unlink()
        except (OSError, ValueError):
            pass
        self._server.shutdown()
        self._server.server_close()

    def execute(self, sql: str, params: dict[str, str], project: str | None = None) -> tuple[bytes, str]:
        """Run one read-only statement (a ``project``'s read key: on that project's rows only); its result in the
        format its FORMAT clause names (else TabSeparated)."""
        if not _READ_ONLY.match(sql):
            raise PermissionError("only read-only statements (SELECT, WITH, SHOW, DESCRIBE, EXISTS, EXPLAIN) are "
                                  "served here; writes go through the vigil worker's write queue")
        match = _TRAILING_FORMAT.search(sql)
        fmt = match.group(1) if match else "TabSeparated"
        body = sql[: match.start()] if match else sql
        if not self.lock.acquire(timeout=self.settings.max_seconds):
            raise Busy(f"the read handle stayed busy for {self.settings.max_seconds:g} s")
        try:
            self._check(body, params)
            return self._run(body, params, fmt, self._handle(project)), fmt
        finally:
            self.lock.release()

    def _check(self, body: str, params: dict[str, str]) -> None:
        """``PermissionError`` unless ``body`` is one statement that reaches nothing outside the store (see
        ``statement_problem``); the engine's parser reads it, nothing runs."""
        try:
            formatted = self.client.raw_query(f"SELECT formatQuerySingleLine({{{_STATEMENT_PARAM}:String}})",
                                              parameters={_STATEMENT_PARAM: body},
                                              fmt="TabSeparatedRaw").decode().rstrip("\n")
        except Exception as exc:  # the engine's parser refused it: say why, run nothing
            if "Multi-statements" in str(exc):
                raise PermissionError("one statement per request") from None
            raise
        ast = self._run(f"EXPLAIN AST {formatted}", params, "TabSeparatedRaw").decode()
        if problem := statement_problem(formatted, ast, self.denied):
            raise PermissionError(f"{problem}; the read endpoint reads tables only")

    def _run(self, sql: str, params: dict[str, str], fmt: str, client: Client | None = None) -> bytes:
        """``sql`` with ``params`` as they came over HTTP (the escaped text form ClickHouse's HTTP interface takes,
        which chDB takes too). clickhouse-connect's chDB client would escape each value once more (1.12), and an
        ``Array(String)`` parameter would then arrive as ``[\\'a\\']``."""
        return (client or self.client)._backend._run(sql, fmt, params=params).bytes()

    def insert(self, statement: str, data: bytes) -> None:
        """Run an INSERT into one of ``INSERTABLE`` on the holder's own client (its writer)."""
        match = _INSERT.match(statement)
        if match is None or match.group(1) not in INSERTABLE or self.writer_client is None:
            raise PermissionError(f"only inserts into {', '.join(sorted(INSERTABLE))} are taken here")
        columns = [c.strip().strip("`") for c in match.group(2).split(",")] if match.group(2) else None
        with self.writer_lock:
            self.writer_client.raw_insert(match.group(1), columns, insert_block=data, fmt=match.group(3))


def _password(headers) -> str:
    password = headers.get("X-ClickHouse-Key", "")
    auth = headers.get("Authorization", "")
    if auth.startswith("Basic "):
        try:
            password = base64.b64decode(auth[6:]).decode().partition(":")[2]
        except ValueError:
            return ""
    return password


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _table_filters(tables: list[tuple[str, bool]], project: str) -> str:
    """``additional_table_filters`` for a project's read handle: each (table, has a project column) filtered to the
    project's rows, or to none."""
    condition = f"project = {_literal(project)}"
    return "{" + ", ".join(f"{_literal(name)}: {_literal(condition if has else '0')}" for name, has in tables) + "}"


def _handler(server: ReadServer) -> type[GuardedHandler]:
    class Handler(GuardedHandler):
        def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self, status: int, code: int, name: str, message: str, **headers: str) -> None:
            self.close_connection = True  # the body, if any, is left unread
            self._reply(status, f"Code: {code}. DB::Exception: vigil read endpoint: {message}. ({name})\n".encode(),
                        {"X-ClickHouse-Exception-Code": str(code), **headers})

        def _serve(self) -> None:
            url = urlsplit(self.path)
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            if url.path == "/ping":
                self.close_connection = bool(self.headers.get("Content-Length") or
                                             self.headers.get("Transfer-Encoding"))
                self._reply(200, b"Ok.\n", {})
                return
            password, project = _password(self.headers), None
            if not credential_ok(password, server.password):
                project = server.read_keys.project_of_key(password) if password else None
                if project is None:
                    self._refuse(401, 516, "AUTHENTICATION_FAILED", "wrong password")
                    return
            try:
                raw = self.read_body(server.settings.max_bytes)
            except BodyTooLarge as exc:
                self._refuse(413, 1001, "TOO_LARGE_REQUEST", str(exc))  # 413: the body was not read
                return
            except (UnreadableBody, UnsupportedEncoding) as exc:
                self._refuse(400, 1001, "BAD_REQUEST_BODY", str(exc))
                return
            statement = params.pop("query", "")
            if not statement and raw.lstrip()[:6].upper() == b"INSERT":
                head, _, raw = raw.partition(b"\n")
                statement = head.decode("utf-8", "replace")
            bound = {k[6:]: v for k, v in params.items() if k.startswith("param_")}
            try:
                if _INSERT.match(statement):
                    if project is not None:
                        raise PermissionError("a project's read key reads; it never inserts")
                    server.insert(statement, raw)
                    self._reply(200, b"", {"X-ClickHouse-Summary": _SUMMARY})
                    return
                sql = "\n".join(part for part in (statement, raw.decode("utf-8", "replace")) if part)
                data, fmt = server.execute(sql, bound, project)
            except PermissionError as exc:
                self._reply(403, f"Code: 164. DB::Exception: {exc}. (READONLY)\n".encode(),
                            {"X-ClickHouse-Exception-Code": "164"})
                return
            except Busy as exc:
                self._reply(503, f"Code: 202. DB::Exception: {exc}. (TOO_MANY_SIMULTANEOUS_QUERIES)\n".encode(),
                            {"X-ClickHouse-Exception-Code": "202", "Retry-After": "1"})
                return
            # The engine's own error, passed on as ClickHouse's HTTP interface does.
            except Exception as exc:  # noqa: BLE001
                message = str(exc)
                code = re.search(r"Code: (\d+)", message)
                self._reply(500, (message if code else f"Code: 1000. DB::Exception: {message}").encode() + b"\n",
                            {"X-ClickHouse-Exception-Code": code.group(1) if code else "1000"})
                return
            self._reply(200, data, {"Content-Type": "application/octet-stream", "X-ClickHouse-Format": fmt,
                                    "X-ClickHouse-Timezone": "UTC", "X-ClickHouse-Summary": _SUMMARY})

        do_GET = _serve
        do_POST = _serve

    return Handler
