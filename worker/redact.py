"""Secrets out of copied text: upstream error messages (which some gateways fill with the caller's API key), URLs
with credentials, log lines. Applied where text is copied into logs, pause reasons, ClickHouse rows, spans and
webhooks (the judge transport at the source, the log renderer for every line), and by the CLI for its one line.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["redact", "redact_event"]

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

    return _TOKENS.sub(hide_token, _CREDENTIALS.sub(hide_url, text))


def redact_event(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor: every string in the event (the rendered traceback too) redacted."""
    return {key: redact(value) if isinstance(value, str) else value for key, value in event.items()}
