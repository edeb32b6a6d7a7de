"""Who may use the review page, beyond what every vigil page checks (``vigil.worker.serving``: the Host header
against DNS rebinding, a connection cap, bodies within a budget).

- **Token**: bound beyond loopback, every request needs the token, as ``?token=`` once (answered with an
  HttpOnly, SameSite=Strict cookie and a redirect that drops it from the address bar), the cookie, or an
  ``Authorization: Bearer`` header. On loopback no token is asked: labelling never waits on a login.
- **CSRF**: every POST carries ``X-Vigil-CSRF`` equal to the token the page was served with, and when the browser
  says where the request comes from (``Origin``, ``Sec-Fetch-Site``) it must be this page; the body is JSON. A form
  on another site can send neither the header nor a JSON body.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

from vigil.worker.serving import credential_ok
from vigil.worker.serving.guard import is_loopback

__all__ = ["COOKIE", "Guard"]

COOKIE = "vigil_review"


@dataclass
class Guard:
    token: str | None = None  # required when not None
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @classmethod
    def for_binding(cls, host: str, *, token: str | None = None) -> Guard:
        """Loopback: no token. Beyond it: ``token``, or a fresh random one."""
        return cls(None if is_loopback(host) else (token or secrets.token_urlsafe(24)))

    def token_ok(self, headers: Mapping[str, str], query_token: str | None) -> bool:
        if self.token is None:
            return True
        offered = [query_token or ""]
        auth = headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            offered.append(auth[7:])
        try:
            cookie = SimpleCookie(headers.get("Cookie", ""))
        except CookieError:
            cookie = SimpleCookie()
        if COOKIE in cookie:
            offered.append(cookie[COOKIE].value)
        return any(credential_ok(value, self.token) for value in offered if value)

    def cookie(self) -> str:
        return f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"

    def write_ok(self, headers: Mapping[str, str]) -> str | None:
        """None when a POST may go on, else why not."""
        if not credential_ok(headers.get("X-Vigil-CSRF", ""), self.csrf):
            return "missing or wrong X-Vigil-CSRF header (reload the page)"
        if headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return "a request from another site"
        origin = headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc.lower() != (headers.get("Host") or "").lower():
            return "a request from another origin"
        if not headers.get("Content-Type", "").startswith("application/json"):
            return "the body must be JSON (Content-Type: application/json)"
        return None
