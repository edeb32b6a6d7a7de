"""vigil's own traffic, told apart at the source: the origin of a request an agent answers.

vigil asks agents questions of its own: the multi-turn monitor's follow-ups and the golden-set probe. Each such
request carries the header ``X-Vigil-Origin`` (``follow_up`` or ``probe``) and, on OpenAI-style chat requests,
``metadata.vigil_origin``. An agent that hands the origin on with its turn keeps vigil from sampling its own
traffic again (the funnel counts those turns as ``probe``), so a probe never feeds itself:

    origin = origin_of(request.headers, body.get("metadata"))      # "live" for real users
    monitor.capture(input=question, output=answer, origin=origin)  # or monitor.turn(..., origin=origin)
    span.set_attribute("vigil.origin", origin)                     # agents traced by OpenTelemetry spans
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vigil.schemas.trace import (
    ORIGIN_ATTRIBUTE,
    ORIGIN_HEADER,
    ORIGIN_METADATA_KEY,
    ORIGINS,
)

__all__ = ["ORIGIN_ATTRIBUTE", "ORIGIN_HEADER", "origin_of"]


def origin_of(headers: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None) -> str:
    """The origin a request declares: its ``X-Vigil-Origin`` header (any case), else its OpenAI
    ``metadata.vigil_origin``; ``live`` when neither names a known origin. Never raises."""
    try:
        for source, key in ((headers, ORIGIN_HEADER), (metadata, ORIGIN_METADATA_KEY)):
            if not source:
                continue
            value = source.get(key)
            if value is None and source is headers:  # plain dicts are case-sensitive; HTTP headers are not
                value = next((v for k, v in source.items() if str(k).lower() == key.lower()), None)
            if isinstance(value, str) and value.strip().lower() in ORIGINS:
                return value.strip().lower()
    except Exception:  # noqa: BLE001, S110 - called on the agent's hot path: a strange mapping means "live"
        pass
    return "live"
