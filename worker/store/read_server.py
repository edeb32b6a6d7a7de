"""Reads for other local processes while one process holds the embedded chDB store.

chDB lets one OS process open a data directory. The process that holds it (the writer inside ``vigil worker``)
serves read-only queries on ``127.0.0.1`` through the part of ClickHouse's HTTP interface that clickhouse-connect
speaks (a query in the URL or the body, ``FORMAT`` at its end, the answer's bytes in that format), so
``vigil report``, ``vigil alerts check`` and ``vigil eval`` read through an ordinary clickhouse-connect HTTP client.
The address and a random password are written next to the data directory (``<dir>.endpoint``, mode 0600) and
removed when serving stops; every statement runs on its own chDB handle with ``readonly = 2``, after a check that it
is a SELECT-like statement. The one write it takes is the alert checker's (``vigil alerts check`` records the
alerts it raises): an INSERT into ``alerts``, run on the holder's own client under its lock.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import structlog
from clickhouse_connect.driver.client import Client

__all__ = ["Endpoint", "ReadServer", "endpoint_path", "read_endpoint"]

log = structlog.get_logger("vigil.reads")

_READ_ONLY = re.compile(r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*(SELECT|WITH|SHOW|DESCRIBE|DESC|EXISTS|EXPLAIN)\b",
                        re.IGNORECASE | re.DOTALL)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+`?(\w+)`?\s*(?:\(([^)]*)\))?\s*FORMAT\s+(\w+)\s*$",
                     re.IGNORECASE | re.DOTALL)
INSERTABLE = frozenset({"alerts"})
_TRAILING_FORMAT = re.compile(r"\bFORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE)
_SUMMARY = json.dumps({"read_rows": "0", "read_bytes": "0", "written_rows": "0", "written_bytes": "0",
                       "total_rows_to_read": "0", "result_rows": "0", "result_bytes": "0", "elapsed_ns": "0"})


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


class ReadServer:
    """Serves read-only queries on the store this process holds, on 127.0.0.1 (a free port)."""

    def __init__(self, client: Client, data_dir: str | Path, *, writer_client: Client | None = None,
                 writer_lock: threading.Lock | None = None) -> None:
        self.client = client
        self.lock = threading.Lock()  # one statement at a time on the read handle
        self.writer_client = writer_client
        self.writer_lock = writer_lock or threading.Lock()
        self.path = endpoint_path(data_dir)
        self.password = secrets.token_urlsafe(24)
        self.client.command("SET readonly = 2")  # settings may change per query, data may not
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

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

    def execute(self, sql: str, params: dict[str, str]) -> tuple[bytes, str]:
        """Run one read-only statement; its result in the format its FORMAT clause names (else TabSeparated)."""
        if not _READ_ONLY.match(sql):
            raise PermissionError("only read-only statements (SELECT, WITH, SHOW, DESCRIBE, EXISTS, EXPLAIN) are "
                                  "served here; writes go through the vigil worker's write queue")
        match = _TRAILING_FORMAT.search(sql)
        fmt = match.group(1) if match else "TabSeparated"
        body = sql[: match.start()] if match else sql
        with self.lock:
            return self.client.raw_query(body, parameters=params or None, fmt=fmt), fmt

    def insert(self, statement: str, data: bytes) -> None:
        """Run an INSERT into one of ``INSERTABLE`` on the holder's own client (its writer)."""
        match = _INSERT.match(statement)
        if match is None or match.group(1) not in INSERTABLE or self.writer_client is None:
            raise PermissionError(f"only inserts into {', '.join(sorted(INSERTABLE))} are taken here")
        columns = [c.strip().strip("`") for c in match.group(2).split(",")] if match.group(2) else None
        with self.writer_lock:
            self.writer_client.raw_insert(match.group(1), columns, insert_block=data, fmt=match.group(3))


def _handler(server: ReadServer) -> type[BaseHTTPRequestHandler]:
    expected = server.password.encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _authorized(self) -> bool:
            password = self.headers.get("X-ClickHouse-Key", "")
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                try:
                    password = base64.b64decode(auth[6:]).decode().partition(":")[2]
                except ValueError:
                    return False
            return hmac.compare_digest(password.encode(), expected)

        def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            url = urlsplit(self.path)
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            raw = self._body()
            if url.path == "/ping":
                self._reply(200, b"Ok.\n", {})
                return
            if not self._authorized():
                self._reply(401, b"Code: 516. DB::Exception: vigil read endpoint: wrong password. "
                                 b"(AUTHENTICATION_FAILED)\n", {"X-ClickHouse-Exception-Code": "516"})
                return
            statement = params.pop("query", "")
            if not statement and raw.lstrip()[:6].upper() == b"INSERT":
                head, _, raw = raw.partition(b"\n")
                statement = head.decode("utf-8", "replace")
            bound = {k[6:]: v for k, v in params.items() if k.startswith("param_")}
            try:
                if _INSERT.match(statement):
                    server.insert(statement, raw)
                    self._reply(200, b"", {"X-ClickHouse-Summary": _SUMMARY})
                    return
                sql = "\n".join(part for part in (statement, raw.decode("utf-8", "replace")) if part)
                data, fmt = server.execute(sql, bound)
            except PermissionError as exc:
                self._reply(403, f"Code: 164. DB::Exception: {exc}. (READONLY)\n".encode(),
                            {"X-ClickHouse-Exception-Code": "164"})
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

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        do_GET = _serve
        do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    return Handler
