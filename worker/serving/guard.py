"""Checks made from a request's headers alone, before its body is read: the Host header and a credential."""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterable

__all__ = ["LOOPBACK_NAMES", "allowed_hosts", "credential_ok", "host_allowed", "is_loopback"]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
# Further names a page may be reached by (a reverse proxy's), comma-separated.
ALLOWED_HOSTS_ENV = "VIGIL_ALLOWED_HOSTS"


def is_loopback(host: str) -> bool:
    """Whether a listen address reaches this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(bind: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a server bound to ``bind`` answers to: the loopback names, ``bind`` itself unless it is a wildcard,
    ``extra`` and ``VIGIL_ALLOWED_HOSTS``."""
    names = set(LOOPBACK_NAMES)
    if bind not in ("", "0.0.0.0", "::"):
        names.add(bind.strip("[]").lower())
    names.update(name.strip().lower() for name in extra if name.strip())
    names.update(name.strip().lower() for name in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if name.strip())
    return frozenset(names)


def _hostname(header: str) -> str:
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8765
        return header[1:].partition("]")[0]
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's ``Host`` header names this server. A browser always sends the name it resolved, so a
    page reached through a rebinding DNS name (``attacker.example`` -> 127.0.0.1) is refused; a request with no Host
    (an HTTP/1.0 client, not a browser) is let through."""
    if header is None:
        return True
    return _hostname(header) in allowed


def credential_ok(given: str, expected: str) -> bool:
    """``given == expected`` in constant time; an empty ``expected`` accepts nothing."""
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())
