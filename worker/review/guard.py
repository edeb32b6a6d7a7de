"""Who may use the review page: a Host check always, a token when it listens beyond loopback, CSRF on every write.

- **Host**: a browser sends the name it resolved; a page reached through a rebound DNS name (an attacker's
  domain pointed at 127.0.0.1) carries that name, and is refused (421). Loopback names and IP literals are
  accepted (an IP cannot be rebound); other names only when listed (``allowed_hosts``, e.g. the machine's name).
- **Token**: bound beyond loopback, every request needs the token, as ``?token=`` once (answered with an
  HttpOnly, SameSite=Strict cookie and a redirect that drops it from the address bar), the cookie, or an
  ``Authorization: Bearer`` header. On loopback no token is asked: labelling never waits on a login.
- **CSRF**: every POST carries ``X-Vigil-CSRF`` equal to the token the page was served with, and when the browser
  says where the request comes from (``Origin``, ``Sec-Fetch-Site``) it must be this page. A form on another
  site can send neither the header nor a JSON body.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

__all__ = ["COOKIE", "Guard", "is_loopback"]

COOKIE = "vigil_review"
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> tuple[str, int | None]:
    """``name:port`` -> (name, port); IPv6 in brackets."""
    try:
        parts = urlsplit(f"//{value}")
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", None


@dataclass
class Guard:
    bind_host: str
    port: int
    token: str | None = None  # required when not None
    allowed_hosts: Iterable[str] = ()
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def __post_init__(self) -> None:
        self.allowed_hosts = frozenset(h.lower() for h in self.allowed_hosts)

    @classmethod
    def for_binding(cls, host: str, port: int, *, token: str | None = None,
                    allowed_hosts: Iterable[str] = ()) -> Guard:
        """Loopback: no token. Beyond: ``token``, or a fresh random one."""
        needed = None if is_loopback(host) else (token or secrets.token_urlsafe(24))
        return cls(host, port, needed, allowed_hosts)

    def host_ok(self, header: str | None) -> bool:
        name, port = _split_host(header or "")
        if not name or (port is not None and port != self.port):
            return False
        if name in self.allowed_hosts or is_loopback(name):
            return True
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            return name == self.bind_host.lower()
        return not is_loopback(self.bind_host)  # an IP literal reaches a page bound beyond loopback

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
        expected = self.token.encode()
        return any(hmac.compare_digest(value.encode(), expected) for value in offered if value)

    def cookie(self) -> str:
        return f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"

    def write_ok(self, headers: Mapping[str, str]) -> str | None:
        """None when a POST may go on, else why not."""
        if not hmac.compare_digest(headers.get("X-Vigil-CSRF", "").encode(), self.csrf.encode()):
            return "missing or wrong X-Vigil-CSRF header (reload the page)"
        if headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return "a request from another site"
        origin = headers.get("Origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.netloc.lower() != (headers.get("Host") or "").lower():
                return "a request from another origin"
        if not headers.get("Content-Type", "").startswith("application/json"):
            return "the body must be JSON (Content-Type: application/json)"
        return None
