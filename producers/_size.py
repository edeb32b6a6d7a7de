"""What a captured turn costs the monitor's queue, estimated on the agent's thread in a few operations.

Text is what makes a turn large, so the estimate counts the characters of its strings (and the length of its bytes)
two levels deep: a turn's own fields, the items of its lists and the values of its mappings (``input`` messages,
``contexts``, ``metadata``), and their items or values once more (a message's ``content``; a pydantic model's
fields, as for a ``schemas.Turn`` and its messages). Anything deeper, and every other value, counts a flat
``_OTHER`` bytes: an ``output`` handed over as a response object is not looked into (the shipper extracts its text
later). It is an estimate, never a serialisation: the agent's thread does work proportional to the number of
fields, not to the size of the text (bench/hook.py measures it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["DEFERRED_BYTES", "estimate"]

_OTHER = 16  # a number, a bool, None, or a value too deep to look at
_ITEM = 64  # per turn: the tuple in the queue, its timestamp, the defaults the shipper adds
DEFERRED_BYTES = 4096  # a turn built later on the shipper thread (capture_deferred): unknown until built


def estimate(payload: Any) -> int:
    """Bytes a captured turn (a mapping or a pydantic model) holds, roughly: see the module's docstring. Written
    as plain loops over exact types: this runs on the agent's thread for every turn (bench/hook.py)."""
    if type(payload) is not dict:
        if isinstance(payload, BaseModel):
            payload = payload.__dict__
        elif not isinstance(payload, Mapping):
            return _ITEM + DEFERRED_BYTES
    total = _ITEM
    for value in payload.values():
        kind = type(value)
        if kind is str or kind is bytes:
            total += len(value)
        elif kind is list or kind is tuple or kind is dict:
            for item in (value.values() if kind is dict else value):
                inner = type(item)
                if inner is str or inner is bytes:
                    total += len(item)
                elif inner is dict or inner is list or isinstance(item, BaseModel):
                    leaves = item if inner is list else item.values() if inner is dict else item.__dict__.values()
                    for leaf in leaves:
                        total += len(leaf) if type(leaf) is str else _OTHER
                else:
                    total += _OTHER
        else:
            total += _OTHER
    return total
