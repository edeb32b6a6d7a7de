"""Who may use the review page, and as whom, beyond what every vigil page checks (``vigil.worker.serving``: the Host
header against DNS rebinding, a connection cap, bodies within a budget).

- **Reviewers' tokens** (the config's ``reviewers:``, each a name, the sha256 of a token, and the projects they may
  review): every request, on loopback too, carries one of those tokens, and acts as its reviewer: the name on a
  label is the token's, never the request's, and the queues hold only the reviewer's projects (none listed: all).
- **One page token** (no ``reviewers:``; bound beyond loopback): every request needs the token
  (``VIGIL_REVIEW_TOKEN``, else a random one), and acts as the page's reviewer (``vigil review --reviewer``): a
  shared token names one person, so a team gives each person a token of their own under ``reviewers:``.
- **No token** (loopback, no ``reviewers:``): labelling never waits on a login; a request may name its reviewer (the
  page's name field), else it is the page's reviewer.

A token comes as ``?token=`` once (answered with an HttpOnly, SameSite=Strict cookie and a redirect that drops it
from the address bar), the cookie, or an ``Authorization: Bearer`` header.

**CSRF**: every POST carries ``X-Vigil-CSRF`` equal to the token the page was served with, and when the browser
says where the request comes from (``Origin``, ``Sec-Fetch-Site``) it must be this page; the body is JSON. A form
on another site can send neither the header nor a JSON body.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

from vigil.schemas.config import ReviewerConfig
from vigil.worker.serving import credential_ok
from vigil.worker.serving.guard import is_loopback

__all__ = ["COOKIE", "Guard", "Identity"]

COOKIE = "vigil_review"


@dataclass(frozen=True)
class Identity:
    """Who a request acts as. ``name`` None: not fixed by a token (the request may name its reviewer);
    ``projects`` empty: every project."""

    name: str | None = None
    projects: tuple[str, ...] = ()


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Guard:
    token: str | None = None  # the page's one token, required when not None (and no reviewers)
    reviewer: str | None = None  # whom the page's token acts as
    reviewers: tuple[ReviewerConfig, ...] = ()  # when any: their tokens, and only theirs, are asked
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @classmethod
    def for_binding(cls, host: str, *, token: str | None = None, reviewer: str | None = None,
                    reviewers: Iterable[ReviewerConfig] = ()) -> Guard:
        """Reviewers configured: their tokens, on any address. Else loopback: no token; beyond it: ``token``, or a
        fresh random one, acting as ``reviewer``."""
        if reviewers := tuple(reviewers):
            return cls(reviewers=reviewers)
        return cls(None if is_loopback(host) else (token or secrets.token_urlsafe(24)), reviewer)

    @property
    def named(self) -> bool:
        """Whether a token fixes who every request acts as."""
        return bool(self.reviewers) or self.token is not None

    def identify(self, headers: Mapping[str, str], query_token: str | None) -> Identity | None:
        """Who the request acts as, or None when it carries no token that is asked for."""
        offered = self._offered(headers, query_token)  # the address's token first, then the header, the cookie
        if self.reviewers:
            for digest in map(token_sha256, offered):
                found = [r for r in self.reviewers if hmac.compare_digest(digest, r.token_sha256)]  # all compared
                if found:
                    return Identity(found[0].name, tuple(found[0].projects))
            return None
        if self.token is None:
            return Identity()
        if any(credential_ok(value, self.token) for value in offered):
            return Identity(self.reviewer)
        return None

    def token_ok(self, headers: Mapping[str, str], query_token: str | None) -> bool:
        return self.identify(headers, query_token) is not None

    @staticmethod
    def _offered(headers: Mapping[str, str], query_token: str | None) -> list[str]:
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
        return [value for value in offered if value]

    def cookie(self, token: str) -> str:
        return f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"

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
