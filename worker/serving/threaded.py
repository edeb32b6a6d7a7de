"""``http.server`` with the checks every vigil page makes: a cap on open connections (one more is answered 503
and closed at once, on the accepting thread, without starting a thread for it), the Host header of every request
(``guard.host_allowed``), a socket timeout so a client that stops sending frees its connection, and bodies read
within a budget (``body``)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog
from vigil.worker.logs import Every
from vigil.worker.serving.body import (
    BodyTooLarge,
    Inflater,
    UnreadableBody,
    check_declared,
)
from vigil.worker.serving.guard import allowed_hosts, host_allowed

__all__ = ["GuardedHandler", "GuardedServer"]

log = structlog.get_logger("vigil.serving")

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
         b"Content-Type: text/plain\r\nContent-Length: 21\r\n\r\ntoo many connections\n")
_CHUNK = 65_536


class GuardedServer(ThreadingHTTPServer):
    """A threading HTTP server that holds at most ``max_connections`` connections and answers only to ``hosts``
    (default: ``guard.allowed_hosts`` of the address it binds)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, max_connections: int,
                 hosts: frozenset[str] | None = None) -> None:
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self.refused = 0
        self.open_connections = 0  # being served now (their slots held)
        self._count = threading.Lock()
        self._warn = Every(10.0)
        super().__init__(address, handler)
        self.hosts = hosts if hosts is not None else allowed_hosts(address[0])

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            if self._warn():
                log.warning("connection refused: at the connection cap", cap=self.max_connections,
                            refused=self.refused, port=self.server_address[1])
            try:
                request.setblocking(False)
                request.send(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        self._opened(1)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._opened(-1)
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._opened(-1)
            self._slots.release()

    def _opened(self, delta: int) -> None:
        with self._count:
            self.open_connections += delta


class GuardedHandler(BaseHTTPRequestHandler):
    """Refuses a request whose Host header is not one of its server's ``hosts`` (403) before any handler runs;
    ``read_body`` reads within a budget. A client silent for ``timeout`` seconds is disconnected."""

    protocol_version = "HTTP/1.1"
    timeout = 30
    server: GuardedServer

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if not host_allowed(self.headers.get("Host"), self.server.hosts):
            self.close_connection = True
            self.send_error(403, "Host not allowed", "this server answers to "
                            f"{', '.join(sorted(self.server.hosts))} only (set VIGIL_ALLOWED_HOSTS for more)")
            return False
        return True

    def read_body(self, max_bytes: int) -> bytes:
        """The request body, inflated, within ``max_bytes``; raises ``BodyTooLarge`` / ``UnreadableBody`` /
        ``UnsupportedEncoding`` (the connection is then closed: what is left of the body is never read)."""
        self.close_connection = True  # until the whole body has been read
        inflater = Inflater(self.headers.get("Content-Encoding"), max_bytes)
        transfer = self.headers.get("Transfer-Encoding", "").strip().lower()
        if transfer == "chunked":
            self._read_chunked(inflater, max_bytes)
        elif transfer:
            raise UnreadableBody(f"Transfer-Encoding {transfer[:40]!r} is not supported")
        else:
            self._read_exactly(check_declared(self.headers.get("Content-Length"), max_bytes) or 0, inflater,
                               "the body ended before its Content-Length")
        body = inflater.finish()
        self.close_connection = False
        return body

    def _read_exactly(self, size: int, inflater: Inflater, short: str) -> None:
        while size:
            piece = self.rfile.read(min(size, _CHUNK))
            if not piece:
                raise UnreadableBody(short)
            inflater.feed(piece)
            size -= len(piece)

    def _read_chunked(self, inflater: Inflater, max_bytes: int) -> None:
        while True:
            line = self.rfile.readline(1026)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise UnreadableBody("bad chunk size line") from None
            if size == 0:
                break
            if inflater.received + size > max_bytes:
                raise BodyTooLarge(max_bytes)
            self._read_exactly(size, inflater, "the body ended inside a chunk")
            self.rfile.readline(3)
        for _ in range(100):  # trailers
            if self.rfile.readline(8192) in (b"\r\n", b"\n", b""):
                return
        raise UnreadableBody("too many trailer lines")

    def log_message(self, *args: object) -> None:
        pass


