"""The review page over HTTP: a plain HTML page, one script, one stylesheet, and a small JSON API under ``/review``.

``ReviewApp.handle`` answers one request of a ``vigil.worker.serving.GuardedHandler`` (``vigil review`` runs its own
server, ``vigil report --serve`` hands it the ``/review`` paths): the server has checked the Host header and holds a
connection slot; the token and the CSRF header are checked before a body is read, and a body only up to
``MAX_BODY`` bytes. Every answer forbids inline script and every origin but this page's
(Content-Security-Policy), so trace text, which the script only ever puts in the page as text, could not run even if
it were written as HTML somewhere.

API (JSON; every POST needs the page's CSRF header):

- ``GET  /review/api/progress``: per monitor, turns, reviewed, unreviewed, weighted agreement with its interval;
- ``GET  /review/api/next?monitor=M&queue=auto|random|lowest|flagged|alerts&reviewer=R``: the next item, leased
  (its ``project`` and ``trace_id`` name the turn: trace ids are a project's own);
- ``POST /review/api/label``: ``{project, trace_id, monitor, action: judge-right|judge-wrong|score, value?,
  comment?, queue, reviewer, keep_lease?}``: 403 unless the turn is leased to the reviewer, 429 (``Retry-After``)
  over their rate;
- ``POST /review/api/renew``: ``{project, trace_id, reviewer}``: the page keeps its lease while the turn is open (403
  when it is no longer the reviewer's);
- ``POST /review/api/skip`` and ``/review/api/release``: ``{project, trace_id, reviewer}``.

``project`` left out is the default project's.

``reviewer`` is who the request acts as only where no token names them (``guard``): with a token, a request naming
anyone else is refused (403), and the token's reviewer sees only their projects' turns.
"""

from __future__ import annotations

import json
import re
import threading
from datetime import date, datetime
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog
from pydantic import ValidationError
from vigil.schemas.config import DEFAULT_PROJECT, ReviewerConfig
from vigil.schemas.feedback import problems
from vigil.worker.review.guard import Guard, Identity
from vigil.worker.review.service import (
    LabelRequest,
    NotLeased,
    ReviewService,
    TooManyLabels,
)
from vigil.worker.serving import (
    BodyTooLarge,
    GuardedHandler,
    GuardedServer,
    UnreadableBody,
    UnsupportedEncoding,
)
from vigil.worker.serving.guard import allowed_hosts

__all__ = ["MAX_BODY", "PREFIX", "ReviewApp", "ReviewServer"]

log = structlog.get_logger("vigil.review")

PREFIX = "/review"
MAX_BODY = 64 * 1024
MAX_CONNECTIONS = 32
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")
_STATIC = {"review.js": "text/javascript; charset=utf-8", "review.css": "text/css; charset=utf-8"}
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ReviewApp:
    def __init__(self, service: ReviewService, guard: Guard) -> None:
        self.service = service
        self.guard = guard

    @staticmethod
    def owns(path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    def handle(self, request: GuardedHandler) -> None:
        try:
            self._handle(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away (a reload, a closed tab): nobody to answer

    def _handle(self, request: GuardedHandler) -> None:
        url = urlsplit(request.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        try:
            who = self.guard.identify(request.headers, query.get("token"))
            if who is None:
                raise _Refused(401, "a token is required: open the address `vigil review` printed"
                               + (", with your own token" if self.guard.reviewers else ""))
            if request.command == "POST":
                self._post(request, url.path, who)
            elif request.command == "GET":
                self._get(request, url.path, query, who)
            else:
                raise _Refused(405, "GET or POST")
        except _Refused as exc:
            request.close_connection = request.close_connection or request.command == "POST"  # a body left unread
            self._send(request, exc.status, {"error": str(exc)})
        except NotLeased as exc:
            self._send(request, 403, {"error": str(exc)})
        except TooManyLabels as exc:
            self._send(request, 429, {"error": str(exc)},
                       extra={"Retry-After": str(max(1, round(exc.retry_after_s + 0.5)))})
        except BodyTooLarge as exc:
            self._send(request, 413, {"error": str(exc)})
        except (UnreadableBody, UnsupportedEncoding) as exc:
            self._send(request, 400, {"error": f"body: {exc}"})
        except ValidationError as exc:
            self._send(request, 400, {"error": problems(exc)})
        except (ValueError, LookupError) as exc:
            self._send(request, 404 if isinstance(exc, LookupError) else 400, {"error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            raise  # the browser went away while it was answered: nothing failed here, nobody to tell
        except Exception as exc:  # noqa: BLE001 (the store or the broker went away: say so, keep serving)
            log.warning("review request failed", path=url.path, error=" ".join(str(exc).split())[:300])
            self._send(request, 503, {"error": " ".join(str(exc).split())[:300]})

    # -- GET ---------------------------------------------------------------------------------------------------

    def _get(self, request: GuardedHandler, path: str, query: dict[str, str], who: Identity) -> None:
        if path in (PREFIX, PREFIX + "/"):
            if (token := query.get("token")) and self.guard.identify({}, token):  # trade it for a cookie
                self._send(request, 303, b"", extra={"Location": PREFIX + "/", "Set-Cookie": self.guard.cookie(token)})
                return
            self._send(request, 200, self._page(who), content_type="text/html; charset=utf-8")
        elif (name := path.removeprefix(PREFIX + "/")) in _STATIC:
            body = (resources.files("vigil.worker.review") / "static" / name).read_bytes()
            self._send(request, 200, body, content_type=_STATIC[name])
        elif path == PREFIX + "/api/progress":
            self._send(request, 200, {"monitors": self.service.progress(who.projects)})
        elif path == PREFIX + "/api/next":
            monitor = query.get("monitor") or ""
            if not monitor:
                raise ValueError("monitor: which monitor's queue (?monitor=NAME)")
            reviewer = self._reviewer(who, query.get("reviewer"))
            item = self.service.next_item(monitor, query.get("queue", "auto"), reviewer, who.projects)
            self._send(request, 200, {"item": item})
        else:
            raise _Refused(404, f"nothing at {path}")

    def _page(self, who: Identity) -> bytes:
        html = (resources.files("vigil.worker.review") / "static" / "review.html").read_text(encoding="utf-8")
        return (html.replace("{{csrf}}", escape(self.guard.csrf))
                    .replace("{{reviewer}}", escape(who.name or self.service.reviewer))
                    .replace("{{named}}", "1" if who.name else "")).encode("utf-8")

    # -- POST --------------------------------------------------------------------------------------------------

    def _post(self, request: GuardedHandler, path: str, who: Identity) -> None:
        if problem := self.guard.write_ok(request.headers):
            raise _Refused(403, problem)
        raw = request.read_body(MAX_BODY)  # BodyTooLarge before a byte over the budget is read
        try:
            data = json.loads(raw or b"{}")
        except ValueError as exc:
            raise ValueError(f"body: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError("body: a JSON object")  # noqa: TRY004 - answered 400 like every bad body
        if path == PREFIX + "/api/label":
            label = LabelRequest.model_validate(data)
            label.reviewer = self._reviewer(who, label.reviewer)
            row = self.service.label(label, who.projects)
            if not label.keep_lease:
                self.service.done(label.project, label.trace_id, label.reviewer)
            self._send(request, 200, {"feedback_id": row.feedback_id, "value": row.value, "scale": row.scale,
                                      "author": row.author})
        elif path in (PREFIX + "/api/skip", PREFIX + "/api/release", PREFIX + "/api/renew"):
            trace_id, project = data.get("trace_id"), data.get("project", DEFAULT_PROJECT)
            if not isinstance(trace_id, str) or not trace_id:
                raise ValueError("trace_id: required")
            if not isinstance(project, str) or not project:
                raise ValueError("project: the item's project, a string")
            reviewer = self._reviewer(who, data.get("reviewer"))
            if path.endswith("renew"):
                self.service.renew(project, trace_id, reviewer)
            else:
                self.service.done(project, trace_id, reviewer, skipped=path.endswith("skip"))
            self._send(request, 200, {"ok": True})
        else:
            raise _Refused(404, f"nothing at {path}")

    def _reviewer(self, who: Identity, name: Any) -> str:
        """Who the request acts as: its token's reviewer (naming anyone else is refused), else the name it gives."""
        if who.name is not None:
            if name not in (None, "", who.name):
                raise _Refused(403, f"reviewer: this token is {who.name}'s; it cannot act as anyone else")
            return who.name
        if name in (None, ""):
            return self.service.reviewer
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError("reviewer: 1 to 256 printable characters")
        return name

    @staticmethod
    def _send(request: GuardedHandler, status: int, body: bytes | dict[str, Any], *,
              content_type: str = "application/json", extra: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, default=_json_default).encode("utf-8")
        request.send_response(status)
        for key, value in {"Content-Type": content_type, "Content-Length": str(len(data)),
                           "Cache-Control": "no-store", "Content-Security-Policy": _CSP,
                           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                           **(extra or {})}.items():
            request.send_header(key, value)
        request.end_headers()
        request.wfile.write(data)


class _Server(GuardedServer):
    request_queue_size = 64  # the listen backlog: a burst of connections waits instead of being reset


class ReviewServer:
    """``vigil review``: the page on ``http://host:port/review/`` (``/`` redirects there)."""

    def __init__(self, service: ReviewService, *, host: str = "127.0.0.1", port: int = 8766,
                 token: str | None = None, hosts: tuple[str, ...] = (),
                 reviewers: tuple[ReviewerConfig, ...] = ()) -> None:
        self.server = _Server((host, port), _handler(self), max_connections=MAX_CONNECTIONS,
                              hosts=allowed_hosts(host, hosts))
        self.host = host
        self.guard = Guard.for_binding(host, token=token, reviewer=service.reviewer, reviewers=reviewers)
        self.app = ReviewApp(service, self.guard)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        shown = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        address = f"http://{'[' + shown + ']' if ':' in shown else shown}:{self.port}{PREFIX}/"
        return address + (f"?token={self.guard.token}" if self.guard.token else "")

    def serve_forever(self) -> None:
        try:
            self.server.serve_forever()
        finally:
            self.server.server_close()

    def start(self) -> ReviewServer:
        threading.Thread(target=self.serve_forever, name="vigil-review", daemon=True).start()
        return self

    def shutdown(self) -> None:
        self.server.shutdown()


def _handler(server: ReviewServer) -> type[GuardedHandler]:
    class Handler(GuardedHandler):
        def _serve(self) -> None:
            if urlsplit(self.path).path in ("/", "/index.html") and self.command == "GET":
                query = urlsplit(self.path).query
                ReviewApp._send(self, 302, b"", extra={"Location": PREFIX + "/" + (f"?{query}" if query else "")})
                return
            if not ReviewApp.owns(urlsplit(self.path).path):
                ReviewApp._send(self, 404, {"error": f"the review page is at {PREFIX}/"})
                return
            server.app.handle(self)

        do_GET = _serve
        do_POST = _serve

    return Handler
