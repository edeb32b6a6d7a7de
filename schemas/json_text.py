"""JSON text read as ``json.loads`` reads it, in C and two to three times as fast: the one reader of the JSON that
spans carry (every model call's messages, tool arguments, documents), that OTLP/JSON requests are, and that the
worker keeps span records in.

msgspec's decoder reads what ``json.loads`` reads as ``json.loads`` does (an integer of any size stays an integer, a
repeated key's last value wins) and refuses what it refuses; it also refuses the few texts ``json.loads`` takes that
it does not (``NaN`` and ``Infinity``, a number past a float's range, an escaped lone surrogate, bytes that are not
UTF-8 such as UTF-16, nesting past its depth): those are read by ``json.loads`` itself, so its value or its error is
the answer whichever library reads the text (``tests/test_json_value.py``)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

_DECODE = msgspec.json.Decoder().decode


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``: its value, or its ``ValueError`` (``RecursionError`` past its depth)."""
    try:
        return _DECODE(text)
    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError; a raw lone surrogate, its encoding's
        return json.loads(text)
