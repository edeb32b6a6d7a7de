"""The other way a batch leaves the process: ``POST {VIGIL_INTAKE_URL}/v1/turns`` to ``vigil intake``, JSON.

Then the agent host holds no broker credentials (only an optional bearer token, ``VIGIL_INTAKE_TOKEN``), and only
vigil's own processes write the queues. Standard library only (``urllib``): the SDK stays light. Any answer but a
2xx raises, so the shipper backs off and spools exactly as it does when Redis is down; but a 413 (the batch is over
the intake's budget) raises ``MessageTooLarge``, so the shipper sends it again in smaller batches.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from vigil.schemas.broker import MessageTooLarge

__all__ = ["HTTPSender", "IntakeRefused"]


class IntakeRefused(RuntimeError):
    """The intake answered something other than 2xx; the message has the status and the intake's reason."""


class HTTPSender:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = 5.0) -> None:
        base = url.rstrip("/")
        self.url = base if base.endswith("/v1/turns") else f"{base}/v1/turns"
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = timeout

    def send(self, batch: list[dict[str, Any]]) -> None:
        body = json.dumps(batch, ensure_ascii=False).encode("utf-8", "surrogateescape")
        request = urllib.request.Request(self.url, data=body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            reason = exc.read()[:500].decode("utf-8", "replace")
            if exc.code == 413:
                raise MessageTooLarge(f"{self.url} answered 413: {reason}") from None
            raise IntakeRefused(f"{self.url} answered {exc.code}: {reason}") from None

    def close(self) -> None:
        return None
