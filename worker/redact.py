"""Secrets out of copied text: upstream error messages (which some gateways fill with the caller's API key), URLs
with credentials, log lines. Applied where text is copied into logs, pause reasons, ClickHouse rows, spans and
webhooks (the judge transport at the source, the log renderer for every line), and by the CLI for its one line.

By pattern (URL credentials, bearer tokens, ``sk-`` keys, ``api_key=…``) and by value: the secrets this process was
configured with, whatever their shape (``remember``: each judge's key as the transport reads it, and at start the
values of secret-named variables and of the passwords in ``REDIS_URL``, ``CLICKHOUSE_DSN``, ``VIGIL_CACHE_URL``:
``remember_environment``) are replaced wherever they appear, longest first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["redact", "redact_event", "remember", "remember_environment"]

_MIN_SECRET = 6  # shorter values would hide ordinary words; a real key is longer
_known: list[str] = []  # the configured secrets, longest first
_SECRET_NAME = re.compile(r"(?i)(API_?KEY|TOKEN|PASSWORD|PASSWD|SECRET)$")
_URL_VARIABLES = ("REDIS_URL", "CLICKHOUSE_DSN", "VIGIL_CACHE_URL", "VIGIL_JUDGE_BASE_URL")

# scheme://[user][:password]@  ->  scheme://[user:]***@   (the password, or a lone user token, is hidden)
_CREDENTIALS = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)([^/@\s:]*)(:[^/@\s]*)?@")
# Bearer/Basic tokens, OpenAI/Anthropic-style keys (sk-..., sk-proj-..., sk-ant-...), and key=value pairs naming one.
_TOKENS = re.compile(
    r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{8,}"
    r"|\b((?:api[_-]?key|access[_-]?token|secret|password|passwd|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"'&,;}]{4,}"
)


def redact(text: str) -> str:
    """``text`` with URL credentials, bearer tokens, ``sk-`` keys and ``api_key=…`` values replaced by ``***``."""
    def hide_url(match: re.Match[str]) -> str:
        user, password = match.group(2), match.group(3)
        if password is None:  # a lone token in the user slot is a secret too (https://TOKEN@host)
            return f"{match.group(1)}***@"
        return f"{match.group(1)}{user + ':' if user else ''}***@"

    def hide_token(match: re.Match[str]) -> str:
        if match.group(1):
            return f"{match.group(1)}{match.group(2)}***"
        if match.group(3):
            return f"{match.group(3)}***"
        return "sk-***"

    for secret in _known:
        if secret in text:
            text = text.replace(secret, "***")
    return _TOKENS.sub(hide_token, _CREDENTIALS.sub(hide_url, text))


def remember(*values: str | None) -> None:
    """Redact these values from now on, wherever they appear and whatever their shape."""
    global _known
    fresh = {v for v in values if isinstance(v, str) and len(v) >= _MIN_SECRET} - set(_known)
    if fresh:
        _known = sorted({*_known, *fresh}, key=len, reverse=True)


def remember_environment(environ: Mapping[str, str] | None = None) -> None:
    """``remember`` the values of secret-named variables (``*_API_KEY``, ``*_TOKEN``, ``*_PASSWORD``, ``*_SECRET``)
    and the passwords in vigil's URL variables."""
    environ = os.environ if environ is None else environ
    remember(*(value for name, value in environ.items() if _SECRET_NAME.search(name)))
    for name in _URL_VARIABLES:
        for url in environ.get(name, "").split(";"):
            try:
                parts = urlsplit(url.strip())
                remember(unquote(parts.password or ""), unquote(parse_qs(parts.query).get("password", [""])[0]))
            except ValueError:
                continue


def redact_event(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor: every string in the event (the rendered traceback too) redacted."""
    return {key: redact(value) if isinstance(value, str) else value for key, value in event.items()}
