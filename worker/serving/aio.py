"""Running an aiohttp application with a cap on open connections, and reading its request bodies within a budget.

aiohttp decompresses a body as it arrives and, after a handler answers without reading the body (a 401), keeps
reading it for up to ten seconds to reuse the connection: an unauthenticated gzip bomb was inflated anyway. ``run``
turns both off (``auto_decompress=False``, ``lingering_time=0``): a handler authenticates from the headers, then
reads through ``read_body``, which inflates within the budget (``body.Inflater``); a refused body is never read,
its connection closed. One connection more than ``max_connections`` is answered 503 and closed before aiohttp sees
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from vigil.worker.logs import Every
from vigil.worker.serving.body import Inflater, check_declared

__all__ = ["SERVER_OPTIONS", "read_body", "refusal", "run", "serve", "too_large"]

log = structlog.get_logger("vigil.serving")

# What the body reading in ``read_body`` needs of aiohttp's server (also for a test's AppRunner).
SERVER_OPTIONS = {"auto_decompress": False, "lingering_time": 0}
# A sender that has passed the credential check and is told 413 gets its body read (and dropped) first, up to this
# many budgets and seconds: closing on a client still sending makes it see a reset instead of the 413.
DRAIN_BUDGETS = 4
DRAIN_S = 5.0
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
         b"Content-Type: text/plain\r\nContent-Length: 21\r\n\r\ntoo many connections\n")


async def read_body(request: web.Request, max_bytes: int) -> bytes:
    """The body, inflated per its ``Content-Encoding``, within ``max_bytes``; raises ``body.BodyTooLarge``,
    ``UnreadableBody`` or ``UnsupportedEncoding``. Answer those with ``refusal``: what is left of the body is never
    read."""
    check_declared(request.headers.get("Content-Length"), max_bytes)
    inflater = Inflater(request.headers.get("Content-Encoding"), max_bytes)
    async for chunk in request.content.iter_chunked(65_536):
        inflater.feed(chunk)
    return inflater.finish()


def refusal(response: web.StreamResponse) -> web.StreamResponse:
    """``response`` sent with ``Connection: close``: the connection ends after it, the body it refused unread
    (``run`` never lingers to read it)."""
    response.force_close()
    return response


async def too_large(request: web.Request, response: web.StreamResponse, max_bytes: int) -> web.StreamResponse:
    """``refusal`` of a body over ``max_bytes`` from an authenticated sender: the rest of the body is read and
    discarded first when it is at most ``DRAIN_BUDGETS`` budgets and arrives within ``DRAIN_S`` seconds, so a client
    still sending (the SDK, which halves its batch on a 413) reads the 413 instead of a connection reset. Nothing
    read is kept; a larger or slower body is not waited for."""
    declared, left = request.content_length, DRAIN_BUDGETS * max_bytes
    if declared is None or declared <= left:
        with contextlib.suppress(TimeoutError, ConnectionError, RequestPayloadError):
            async with asyncio.timeout(DRAIN_S):
                while left > 0 and (chunk := await request.content.readany()):
                    left -= len(chunk)
    return refusal(response)


class _Busy(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(_BUSY)  # type: ignore[attr-defined]
        transport.close()


def _capped(server: web.Server, max_connections: int) -> Callable[[], asyncio.BaseProtocol]:
    """A protocol factory for ``server`` that counts connections from the moment they are accepted (aiohttp's own
    list fills a loop iteration later) and answers one over ``max_connections`` with ``_Busy``."""
    warn, counts = Every(10.0), {"open": 0, "refused": 0}
    lost = server.connection_lost

    def connection_lost(handler: Any, exc: BaseException | None) -> None:
        counts["open"] -= 1
        lost(handler, exc)

    server.connection_lost = connection_lost  # type: ignore[method-assign]

    def protocol() -> asyncio.BaseProtocol:
        if counts["open"] < max_connections:
            counts["open"] += 1
            return server()
        counts["refused"] += 1
        if warn():
            log.warning("connection refused: at the connection cap", cap=max_connections, refused=counts["refused"])
        return _Busy()
    return protocol


async def serve(app: web.Application, host: str, port: int, *, max_connections: int,
                stop: asyncio.Event, started: Callable[[str], None] = lambda url: None) -> None:
    runner = web.AppRunner(app, access_log=None, **SERVER_OPTIONS)
    await runner.setup()
    try:
        listener = await asyncio.get_running_loop().create_server(_capped(runner.server, max_connections), host, port,
                                                                  backlog=128)
        bound = listener.sockets[0].getsockname()
        started(f"http://{host}:{bound[1]}")
        await stop.wait()
        listener.close()
        await listener.wait_closed()
    finally:
        await runner.cleanup()


def run(app: web.Application, host: str, port: int, *, max_connections: int,
        started: Callable[[str], None] = lambda url: None) -> None:
    """Serve ``app`` until SIGINT or SIGTERM (``OSError`` when it cannot listen)."""
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(app, host, port, max_connections=max_connections, stop=stop, started=started)

    asyncio.run(main())
