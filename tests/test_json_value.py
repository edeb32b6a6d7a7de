"""``json_text.loads`` reads JSON text as ``json.loads`` does, and ``_parse.json_value`` leaves what ``json.loads``
refuses as it is.

``loads`` decodes with msgspec first, for speed, and falls back to ``json.loads`` where msgspec refuses: so the
answers must be ``json.loads``'s on any text, the texts the two libraries read differently included (integers past
64 bits, ``NaN`` and numbers past a float's range, escaped and raw lone surrogates, deep nesting, trailing text, bytes
in UTF-16 or with a byte order mark, bytes that are no UTF-8)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.schemas.conventions._parse import json_value
from vigil.schemas.json_text import loads


def _loads_or_text(text: str) -> Any:
    """What ``json_value`` must make of JSON-looking text: ``json.loads``'s value, or the text where it raises."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``1``, ``1.0`` and ``True`` differ; ``NaN`` is ``NaN``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


_scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63 - 2, max_value=2**70)
            | st.integers(min_value=-(2**70), max_value=-(2**63) + 2) | st.floats(allow_nan=True, allow_infinity=True)
            | st.text())
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(_values, st.sampled_from([None, 1]), st.booleans())
def test_json_text_is_what_json_loads_reads(value: Any, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    if text[:1] in ("[", "{", '"'):
        assert _same(json_value(text), json.loads(text)), text


@settings(max_examples=150, deadline=None)
@given(_values, st.integers(min_value=0, max_value=40), st.text(max_size=3))
def test_broken_json_text_is_left_as_it_is_where_json_loads_refuses_it(value: Any, cut: int, tail: str) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for broken in (text[:cut] + tail, text + tail, text[:cut] + tail + text[cut:]):
        if broken[:1] in ("[", "{", '"'):
            assert _same(json_value(broken), _loads_or_text(broken)), broken


def test_texts_the_two_decoders_read_differently_are_read_as_json_loads_reads_them() -> None:
    texts = ['[123456789012345678901234567890]', '[-9223372036854775809]', '[18446744073709551616]', '[NaN]',
             '[Infinity, -Infinity]', '[1e400]', '"\\ud800"', '{"\\udfff": 1}', '"a\ud800"', '[1] \n\t', '[1] x',
             '[' * 3000 + ']' * 3000, '{"a": 1, "b": 2, "a": 3}', '[-0.0, -0, 5e-324]', '[1,]', '"a\tb"']
    for text in texts:
        assert _same(json_value(text), _loads_or_text(text)), text


def test_what_is_not_json_text_is_itself() -> None:
    for value in ("plain words", "", "[INST] hello", "{not json}", 42, None, ["a"], {"a": 1}, b"[1]"):
        assert json_value(value) is value


def _loads_or_error(text: str | bytes) -> Any:
    try:
        return loads(text)
    except ValueError as exc:
        return type(exc), str(exc)


def _json_or_error(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        return type(exc), str(exc)


@settings(max_examples=150, deadline=None)
@given(_values, st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32"]), st.binary(max_size=3))
def test_json_bytes_are_what_json_loads_reads_or_raise_its_error(value: Any, encoding: str, tail: bytes) -> None:
    text = json.dumps(value)
    for given_bytes in (text.encode(encoding), text.encode(encoding) + tail, tail + text.encode(encoding)):
        assert _same(_loads_or_error(given_bytes), _json_or_error(given_bytes)), given_bytes
