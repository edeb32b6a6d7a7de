"""``vigil report --serve``: the HTML report live on localhost, built afresh from the store for every request.

``/`` is the page (it reloads itself every ``refresh_s`` seconds), ``/report.json`` the same report as JSON. It binds
127.0.0.1 only: the page shows traces' questions and answers, which are not for the network; and it answers only
requests whose Host header is a loopback name (``worker.serving``), so a web page cannot read it through a DNS name
that resolves to 127.0.0.1 (DNS rebinding). At most ``MAX_CONNECTIONS`` connections are open at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from vigil.worker.report.html import render_html
from vigil.worker.report.model import Report
from vigil.worker.serving import GuardedHandler, GuardedServer

__all__ = ["MAX_CONNECTIONS", "ReportServer"]

MAX_CONNECTIONS = 16  # each request builds the report from the store, one at a time


class ReportServer:
    """Serves ``build()``'s report on ``http://127.0.0.1:port`` (port 0: a free one)."""

    def __init__(self, build: Callable[[], Report], *, port: int = 8765, refresh_s: int = 30) -> None:
        self.build = build
        self.refresh_s = refresh_s
        self.lock = threading.Lock()  # one store query at a time on the shared client
        self.server = GuardedServer(("127.0.0.1", port), _handler(self), max_connections=MAX_CONNECTIONS)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def page(self) -> bytes:
        with self.lock:
            report = self.build()
        html = render_html(report)
        tag = f'<meta http-equiv="refresh" content="{self.refresh_s}">'
        return html.replace("<head>", f"<head>{tag}", 1).encode("utf-8")

    def json(self) -> bytes:
        with self.lock:
            return self.build().model_dump_json(indent=2).encode("utf-8")

    def serve_forever(self) -> None:
        try:
            self.server.serve_forever()
        finally:
            self.server.server_close()

    def shutdown(self) -> None:
        self.server.shutdown()


def _handler(server: ReportServer) -> type[GuardedHandler]:
    class Handler(GuardedHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path not in ("/", "/index.html", "/report.json"):
                self.send_error(404, "the report is at / and /report.json")
                return
            try:
                body = server.json() if path == "/report.json" else server.page()
            except Exception as exc:  # noqa: BLE001 (the store went away: say so on the page, keep serving)
                self.send_error(503, " ".join(str(exc).split())[:300])
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json" if path.endswith(".json")
                             else "text/html; charset=utf-8")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
