"""Project keys: which project a request belongs to, read from its headers alone (before a byte of the body is read).

Ingest keys (``vigil intake``) are the config's ``projects: [{keys: ...}]`` (each key kept as its SHA-256, ``vigil
keys new`` makes one) and ``VIGIL_INTAKE_TOKEN``, the key of the ``default`` project; read keys (the embedded
store's read endpoint, ``vigil.worker.store.read_server``) are ``projects: [{read_keys: ...}]``. A presented key is hashed and compared with every listed
hash in constant time; a key past its ``not_after`` is refused (rotation: both keys work until the old one's date).
With no key configured at all the intake is open (loopback by default) and a turn's project is what it says.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from vigil.schemas.config import DEFAULT_PROJECT, VigilConfig

__all__ = ["KeyRing", "hash_key", "new_key"]

_BEARER = "Bearer "


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> tuple[str, str]:
    """A new random ingest key and its SHA-256 (what the config keeps)."""
    key = "vk_" + secrets.token_urlsafe(32)
    return key, hash_key(key)


@dataclass(frozen=True)
class _Key:
    digest: bytes
    project: str
    not_after: datetime | None


class KeyRing:
    """The ingest keys an intake accepts, by project."""

    def __init__(self, keys: list[_Key]) -> None:
        self._keys = keys

    @classmethod
    def of(cls, token: str | None, config: VigilConfig | None) -> KeyRing:
        """The ingest keys."""
        keys = [_Key(hashlib.sha256(token.encode()).digest(), DEFAULT_PROJECT, None)] if token else []
        for project in config.projects if config is not None else []:
            keys += [_Key(bytes.fromhex(k.sha256), project.name, k.not_after) for k in project.keys]
        return cls(keys)

    @classmethod
    def reading(cls, config: VigilConfig | None) -> KeyRing:
        """The read keys: each reads its project's rows only."""
        return cls([_Key(bytes.fromhex(k.sha256), project.name, k.not_after)
                    for project in (config.projects if config is not None else []) for k in project.read_keys])

    @property
    def required(self) -> bool:
        """Whether a request needs a key (any is configured)."""
        return bool(self._keys)

    @property
    def projects(self) -> list[str]:
        return sorted({k.project for k in self._keys})

    def project(self, authorization: str, now: datetime | None = None) -> str | None:
        """The project of the bearer key in an ``Authorization`` header; None for a missing, unknown or expired
        key. Every listed key is compared, so the time taken says nothing about which one came close."""
        if not authorization.startswith(_BEARER):
            return None
        return self.project_of_key(authorization[len(_BEARER):], now)

    def project_of_key(self, key: str, now: datetime | None = None) -> str | None:
        """The project of a key itself; None for an unknown or expired one (every listed key compared)."""
        digest = hashlib.sha256(key.encode()).digest()
        now = now or datetime.now(UTC)
        found = None
        for known in self._keys:
            if hmac.compare_digest(known.digest, digest) and (known.not_after is None or now <= known.not_after):
                found = known.project
        return found
