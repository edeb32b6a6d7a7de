"""``vigil report --serve``: the HTML report live on localhost, built afresh from the store for every request.

``/`` is the page (it reloads itself every ``refresh_s`` seconds), ``/report.json`` the same report as JSON,
``/turn/TRACE_ID`` one turn's page (linked from the worst turns and from each firing alert), and
``/review/`` the review page (``vigil.worker.review``) when a ``review`` factory is given (built on first use, so the
report serves on even when the review page cannot: its paths then answer 503 saying why), guarded as `vigil review`
guards it: with ``reviewers`` (the config's) each signs in with their own token, also on loopback. It binds
127.0.0.1 only: the page shows traces' questions and answers, which are not for the network; and it answers only
requests whose Host header is a loopback name (``worker.serving``), so a web page cannot read it through a DNS name
that resolves to 127.0.0.1 (DNS rebinding). At most ``MAX_CONNECTIONS`` connections are open at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from vigil.schemas.config import ReviewerConfig
from vigil.worker.report.html import render_html
from vigil.worker.report.model import Report
from vigil.worker.report.turn import MIN_PREFIX, render_turn
from vigil.worker.review.guard import Guard
from vigil.worker.review.service import ReviewService
from vigil.worker.review.web import ReviewApp
from vigil.worker.serving import GuardedHandler, GuardedServer

__all__ = ["MAX_CONNECTIONS", "ReportServer"]

MAX_CONNECTIONS = 16  # each request builds the report from the store, one at a time


class ReportServer:
    """Serves ``build()``'s report on ``http://127.0.0.1:port`` (port 0: a free one)."""

    def __init__(self, build: Callable[[], Report], *, port: int = 8765, refresh_s: int = 30,
                 review: Callable[[threading.Lock], ReviewService] | None = None,
                 turn: Callable[[str], dict[str, Any]] | None = None,
                 reviewers: tuple[ReviewerConfig, ...] = ()) -> None:
        self.build = build
        self.reviewers = reviewers  # the config's ``reviewers:``: their tokens, as ``vigil review`` asks them
        self.turn = turn
        self.refresh_s = refresh_s
        self.lock = threading.Lock()  # one store query at a time on the shared client
        self._review = review
        self._review_app: ReviewApp | None = None
        self.server = GuardedServer(("127.0.0.1", port), _handler(self), max_connections=MAX_CONNECTIONS)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def page(self) -> bytes:
        with self.lock:
            report = self.build()
        html = render_html(report, turn_links=self.turn is not None)
        tag = f'<meta http-equiv="refresh" content="{self.refresh_s}">'
        return html.replace("<head>", f"<head>{tag}", 1).encode("utf-8")

    def turn_page(self, trace_id: str) -> bytes:
        """``/turn/TRACE_ID``: one turn's page (``report.turn``); LookupError when there is no such turn."""
        if self.turn is None or len(trace_id) < MIN_PREFIX or not all(c in "0123456789abcdef" for c in trace_id):
            raise LookupError(f"no turn {trace_id!r}: give at least {MIN_PREFIX} hex characters of a trace id")
        with self.lock:
            turn = self.turn(trace_id)
        return render_turn(turn).encode("utf-8")

    def review_app(self) -> ReviewApp | None:
        """The review page on this server (its service opened on first use, sharing the store lock)."""
        if self._review is None:
            return None
        with self.lock:
            if self._review_app is None:
                service = self._review(self.lock)
                self._review_app = ReviewApp(service, Guard.for_binding("127.0.0.1", reviewer=service.reviewer,
                                                                        reviewers=self.reviewers))
        return self._review_app

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
        def _review(self) -> bool:
            """Hand a ``/review`` request to the review page; False when the path is not its."""
            if not ReviewApp.owns(urlsplit(self.path).path):
                return False
            try:
                app = server.review_app()
            except Exception as exc:  # noqa: BLE001 (no Redis, say: the report itself serves on)
                self.send_error(503, f"the review page cannot start: {' '.join(str(exc).split())[:300]}")
                return True
            if app is None:
                self.send_error(404, "the review page is served by `vigil review` or `vigil report --serve`")
            else:
                app.handle(self)
            return True

        def do_POST(self) -> None:
            if not self._review():
                self.send_error(405, "the report is read-only")

        def do_GET(self) -> None:
            if self._review():
                return
            path = urlsplit(self.path).path
            if not path.startswith("/turn/") and path not in ("/", "/index.html", "/report.json"):
                self.send_error(404, "the report is at /, /report.json and /turn/TRACE_ID")
                return
            try:
                if path.startswith("/turn/"):
                    body = server.turn_page(path.removeprefix("/turn/").strip("/").lower())
                else:
                    body = server.json() if path == "/report.json" else server.page()
            except LookupError as exc:
                self.send_error(404, " ".join(str(exc).split())[:300])
                return
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
