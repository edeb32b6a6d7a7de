"""A judge's API key: read from the variable ``api_key_env`` names, and said by name whenever it is missing or refused.

The config holds the secret by reference (``api_key_env``, default ``OPENAI_API_KEY``). A key that is not set is
named before any call: ``vigil config check`` (and so ``vigil worker`` at start) fails when the config names the
variable itself, and warns when the default is unset and the endpoint is not on this machine (a local server often
needs no key). A 401 that pauses the judge says which variable the key came from and whether it was set.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Literal
from urllib.parse import urlsplit

from vigil.schemas import JudgeConfig
from vigil.worker.redact import remember

__all__ = ["NO_KEY", "api_key", "key_note", "key_problem"]

NO_KEY = "not-needed"  # what the client sends when the variable is unset: local servers ask for no key


def api_key(config: JudgeConfig) -> str:
    """The key to send: the value of ``api_key_env``, else ``NO_KEY``. Remembered for redaction by value: a gateway
    that echoes it back in an error is redacted whatever the key's shape."""
    key = os.environ.get(config.api_key_env)
    remember(key)
    return key or NO_KEY


def _local(base_url: str | None) -> bool:
    host = urlsplit(base_url or "").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def key_problem(config: JudgeConfig, index: int) -> tuple[Literal["error", "warning"], str] | None:
    """What ``vigil config check`` says about judge ``index``'s key: an error when the config names
    ``api_key_env`` and that variable is unset, a warning when the default is unset for an endpoint that is not on
    this machine; None when the key is there (or the judge needs none)."""
    if config.kind != "openai" or os.environ.get(config.api_key_env):
        return None
    host = urlsplit(config.base_url or "").hostname or config.base_url
    if "api_key_env" in config.model_fields_set:
        return "error", (f"judges.{index}.api_key_env ({config.name}): {config.api_key_env} is not set in this "
                         f"environment; {host} will refuse the judge's calls without its key")
    if _local(config.base_url):
        return None
    return "warning", (f"judge {config.name!r}: {config.api_key_env} (the default api_key_env) is not set; {host} "
                       f"will likely answer 401 and the judge will be paused (set it, or set api_key_env to the "
                       f"variable that holds the key)")


def key_note(config: JudgeConfig) -> str:
    """For a refusal's reason: where the key came from, and whether it was there."""
    state = "set" if os.environ.get(config.api_key_env) else "not set"
    return f"the key is read from {config.api_key_env}, which is {state}"
