"""OTLP/JSON trace and logs requests read directly, without building the protobuf message: what protobuf's JSON mapping
(``json_format.ParseDict``) would read, for the requests an OTLP/JSON exporter writes. Building the message cost
~92% of decoding a trace request.

The direct reading follows the OTLP/JSON encoding (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding):
camelCase field names; trace and span ids as hex; 64-bit integers as decimal text or as numbers; enums as numbers
or as their names; an ``AnyValue`` as an object holding one of ``stringValue``, ``boolValue``, ``intValue``,
``doubleValue``, ``arrayValue`` or ``kvlistValue`` (or none: no value). Unknown fields are ignored, as the intake
asks of protobuf's mapping. Every field the message has is checked as the mapping checks it, those the records do
not keep too (``traceState``, ``schemaUrl``, the dropped counts), so a request the mapping refuses is never read.

**Anything else leaves the request to protobuf's mapping** (``Slow``), which then reads it exactly as it always did,
its errors naming the field: a snake_case field name, a ``null``, a value of another JSON type than the above, a
number out of its field's range, a non-finite double, an unknown enum value, an id that is not hex, a
``bytesValue``, values nested deeper than ``MAX_NESTING``, text that may hold an unpaired surrogate (JSON's
``\\uD800``-``\\uDFFF`` escapes: the mapping refuses such text), a field this module does not know. So a request
read directly makes the same span records as the mapping would, and a malformed one is rejected in the same words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from vigil.schemas.spans import RESOURCE_KEYS

__all__ = ["MAX_NESTING", "LogRecord", "Slow", "Span", "kept", "log_records", "spans"]

MAX_NESTING = 32  # arrays and maps in an attribute value read directly, one inside the other (the mapping's own
# limit, 100 messages deep, lies far below)


class Slow(Exception):
    """The request holds something the direct reading leaves to protobuf's JSON mapping."""


class Span(NamedTuple):
    """One span's fields as decoding reads them, from either encoding: ids as bytes, the attribute values and
    events already plain Python."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    name: str
    start: int
    end: int
    kind: int
    flags: int
    status_code: int
    status_message: str
    links: list[tuple[bytes, bytes]]  # (trace id, span id) of each link, b"" for an id that is not hex
    attributes: dict[str, Any]
    events: list[dict[str, Any]]  # SpanEvent: name, time, attributes


class LogRecord(NamedTuple):
    """One log record's fields as decoding reads them, from either encoding (``body``: the plain value, ``None``
    when it has none)."""

    trace_id: bytes
    span_id: bytes
    event_name: str
    time: int
    observed_time: int
    attributes: dict[str, Any]
    body: Any


class _Shape(NamedTuple):
    """A message as the direct reading takes it: the fields it reads, those it only checks (by a checker of their
    value), and the other names the mapping would read (snake_case names, fields not read here), which make the
    request ``Slow``."""

    reads: frozenset[str]
    checks: dict[str, Any]
    others: frozenset[str]


def _shape(descriptor, reads: set[str], checks: dict[str, Any] | None = None, others: set[str] = frozenset()) -> _Shape:
    names = {f.json_name for f in descriptor.fields} | {f.name for f in descriptor.fields}
    checks = checks or {}
    assert reads | set(checks) <= names, descriptor.full_name
    return _Shape(frozenset(reads | set(checks)), checks, frozenset((names | set(others)) - reads - set(checks)))


_I32, _U32, _I64, _U64 = 2**31, 2**32, 2**63, 2**64
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _uint(value: Any, limit: int) -> int:
    """An unsigned integer field's value: a number, or decimal digits."""
    if type(value) is int:
        if 0 <= value < limit:
            return value
    elif type(value) is str and value.isdigit() and value.isascii():
        number = int(value)
        if number < limit:
            return number
    raise Slow


def _int64(value: Any) -> int:
    if type(value) is int:
        if -_I64 <= value < _I64:
            return value
    elif type(value) is str and value.isascii() and (value[1:] if value[:1] == "-" else value).isdigit():
        number = int(value)
        if -_I64 <= number < _I64:
            return number
    raise Slow


def _text(value: Any) -> str:
    if type(value) is not str:
        raise Slow
    return value


def _u32(value: Any) -> int:
    return _uint(value, _U32)


def _enum(value: Any, numbers: dict[Any, int]) -> int:
    """An enum field's value: one of its numbers, or its name."""
    found = numbers.get(value) if type(value) is int or type(value) is str else None
    if found is None:
        raise Slow
    return found


def _enum_numbers(enum) -> dict[Any, int]:
    return {**{v.number: v.number for v in enum.values}, **{v.name: v.number for v in enum.values}}


_KINDS = _enum_numbers(trace_pb2.Span.SpanKind.DESCRIPTOR)
_STATUS_CODES = _enum_numbers(trace_pb2.Status.StatusCode.DESCRIPTOR)
_ID_FIELDS = {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}  # hex-converted
_REQUEST = _shape(trace_service_pb2.ExportTraceServiceRequest.DESCRIPTOR, {"resourceSpans"})
_RESOURCE_SPANS = _shape(trace_pb2.ResourceSpans.DESCRIPTOR, {"resource", "scopeSpans"}, {"schemaUrl": _text})
_RESOURCE = _shape(resource_pb2.Resource.DESCRIPTOR, {"attributes"}, {"droppedAttributesCount": _u32})
_SCOPE_SPANS = _shape(trace_pb2.ScopeSpans.DESCRIPTOR, {"scope", "spans"}, {"schemaUrl": _text})
_SCOPE = _shape(common_pb2.InstrumentationScope.DESCRIPTOR, {"name", "attributes"},
                {"version": _text, "droppedAttributesCount": _u32})
_SPAN = _shape(trace_pb2.Span.DESCRIPTOR,
               {"traceId", "spanId", "parentSpanId", "flags", "name", "kind", "startTimeUnixNano", "endTimeUnixNano",
                "attributes", "events", "links", "status"},
               {"traceState": _text, "droppedAttributesCount": _u32, "droppedEventsCount": _u32,
                "droppedLinksCount": _u32}, _ID_FIELDS)
_EVENT = _shape(trace_pb2.Span.Event.DESCRIPTOR, {"timeUnixNano", "name", "attributes"},
                {"droppedAttributesCount": _u32})
_LINK = _shape(trace_pb2.Span.Link.DESCRIPTOR, {"traceId", "spanId", "attributes"},
               {"traceState": _text, "droppedAttributesCount": _u32, "flags": _u32}, _ID_FIELDS)
_STATUS = _shape(trace_pb2.Status.DESCRIPTOR, {"code", "message"})
_SEVERITIES = _enum_numbers(logs_pb2.SeverityNumber.DESCRIPTOR)
_LOGS_REQUEST = _shape(logs_service_pb2.ExportLogsServiceRequest.DESCRIPTOR, {"resourceLogs"})
_RESOURCE_LOGS = _shape(logs_pb2.ResourceLogs.DESCRIPTOR, {"resource", "scopeLogs"}, {"schemaUrl": _text})
_SCOPE_LOGS = _shape(logs_pb2.ScopeLogs.DESCRIPTOR, {"scope", "logRecords"}, {"schemaUrl": _text})
_LOG_RECORD = _shape(logs_pb2.LogRecord.DESCRIPTOR,
                     {"timeUnixNano", "observedTimeUnixNano", "body", "attributes", "traceId", "spanId", "eventName"},
                     {"severityNumber": lambda value: _enum(value, _SEVERITIES), "severityText": _text,
                      "droppedAttributesCount": _u32, "flags": _u32}, _ID_FIELDS)
_KEY_VALUE = _shape(common_pb2.KeyValue.DESCRIPTOR, {"key", "value"})
_VALUES = _shape(common_pb2.ArrayValue.DESCRIPTOR, {"values"})  # ArrayValue's and KeyValueList's one field


def _message(node: Any, shape: _Shape) -> dict[str, Any]:
    """``node`` if it is a JSON object the direct reading takes as ``shape``, its checked fields checked."""
    if type(node) is not dict or None in node.values():
        raise Slow
    if not shape.reads.issuperset(node):
        for key in node.keys() - shape.reads:
            if key in shape.others or key[:1] == "[":  # "[name]": the mapping reads it as an extension
                raise Slow
    for key, check in shape.checks.items():
        if key in node:
            check(node[key])
    return node


def _repeated(node: dict[str, Any], key: str) -> list[Any]:
    value = node.get(key)
    if value is None:
        return []
    if type(value) is not list:
        raise Slow
    return value


def _hex(value: Any) -> bytes:
    """An id written in hex (absent: empty); an id that is not hex makes the request ``Slow``."""
    if type(value) is not str:
        raise Slow
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise Slow from None


def _attributes(pairs: list[Any], depth: int = 0) -> dict[str, Any]:
    out = {}
    for pair in pairs:
        if type(pair) is dict and len(pair) == 2 and "key" in pair and "value" in pair:  # as exporters write it
            key, value = pair["key"], pair["value"]
        else:
            pair = _message(pair, _KEY_VALUE)
            key, value = pair.get("key", ""), pair.get("value", {})
        if type(key) is not str:
            raise Slow
        if type(value) is dict and len(value) == 1 and type(text := value.get("stringValue")) is str:
            out[key] = text  # most values: read here, not by _value
        else:
            out[key] = _value(value, depth)
    return out


def _value(node: Any, depth: int) -> Any:
    """An ``AnyValue`` as the plain Python value it holds (``None``: no value)."""
    if type(node) is dict and len(node) == 1:
        (kind, value), = node.items()
        if kind == "stringValue":
            if type(value) is str:
                return value
        elif kind == "intValue":
            return _int64(value)
        elif kind == "boolValue":
            if type(value) is bool:
                return value
        elif kind == "doubleValue":
            if type(value) is float and math.isfinite(value):
                return value
            if type(value) is int and -_I64 <= value < _I64:
                return float(value)
        elif depth < MAX_NESTING and kind == "arrayValue":
            return [_value(v, depth + 1) for v in _values(value)]
        elif depth < MAX_NESTING and kind == "kvlistValue":
            return _attributes(_values(value), depth + 1)
        raise Slow
    if type(node) is dict and not node:
        return None
    raise Slow


def _values(node: Any) -> list[Any]:
    """An ``ArrayValue``'s or ``KeyValueList``'s values."""
    if type(node) is dict and len(node) == 1 and type(values := node.get("values")) is list:  # as exporters write it
        return values
    return _repeated(_message(node, _VALUES), "values")


def _links(links: list[Any]) -> list[tuple[bytes, bytes]]:
    out = []
    for link in links:
        link = _message(link, _LINK)
        trace_id, span_id = link.get("traceId", ""), link.get("spanId", "")
        _attributes(_repeated(link, "attributes"))
        if type(trace_id) is not str or type(span_id) is not str:
            raise Slow
        try:
            out.append((bytes.fromhex(trace_id), bytes.fromhex(span_id)))
        except ValueError:  # not hex: the link is dropped, as the mapping's reading drops it
            out.append((b"", b""))
    return out


def spans(data: dict[str, Any], body: bytes) -> Iterator[tuple[int, int, int, dict[str, Any], str, Span]]:
    """(resource, scope, span) indices, the resource's attributes (those ``kept``), the scope's name and the span, of
    every span in an OTLP/JSON trace request (``data``: its ``body`` parsed); raises ``Slow`` before yielding
    anything when protobuf's JSON mapping is to read it."""
    return _items(data, body, (_REQUEST, "resourceSpans", _RESOURCE_SPANS, "scopeSpans", _SCOPE_SPANS, "spans"),
                  lambda span: _span(_message(span, _SPAN)))


def log_records(data: dict[str, Any], body: bytes) -> Iterator[tuple[int, int, int, dict[str, Any], str, LogRecord]]:
    """The same of every log record in an OTLP/JSON logs request."""
    return _items(data, body, (_LOGS_REQUEST, "resourceLogs", _RESOURCE_LOGS, "scopeLogs", _SCOPE_LOGS, "logRecords"),
                  lambda record: _log_record(_message(record, _LOG_RECORD)))


def _items(data: dict[str, Any], body: bytes, levels: tuple[_Shape, str, _Shape, str, _Shape, str],
           read: Any) -> Iterator[tuple[int, int, int, dict[str, Any], str, Any]]:
    """``read`` of every item (span, log record) of a request, with its indices, resource attributes and scope name,
    as ``spans`` says."""
    if (b"\\ud" in body or b"\\uD" in body) and _ESCAPED_SURROGATE.search(body):
        raise Slow
    request, resources, resource_shape, scopes, scope_shape, items = levels
    found = []
    for r, resource_items in enumerate(_repeated(_message(data, request), resources)):
        resource_items = _message(resource_items, resource_shape)
        resource = kept(_attributes(_repeated(_message(resource_items.get("resource", {}), _RESOURCE), "attributes")))
        for s, scope_items in enumerate(_repeated(resource_items, scopes)):
            scope_items = _message(scope_items, scope_shape)
            scope = _message(scope_items.get("scope", {}), _SCOPE)
            _attributes(_repeated(scope, "attributes"))
            scope_name = _text(scope.get("name", ""))
            for i, item in enumerate(_repeated(scope_items, items)):
                found.append((r, s, i, resource, scope_name, read(item)))
    return iter(found)


def kept(resource: dict[str, Any]) -> dict[str, Any]:
    """Of a resource's attributes, those assembly reads (``vigil.schemas.spans.RESOURCE_KEYS``)."""
    return {key: value for key, value in resource.items() if key in RESOURCE_KEYS}


def _log_record(record: dict[str, Any]) -> LogRecord:
    return LogRecord(
        trace_id=_hex(record.get("traceId", "")),
        span_id=_hex(record.get("spanId", "")),
        event_name=_text(record.get("eventName", "")),
        time=_uint(record.get("timeUnixNano", 0), _U64),
        observed_time=_uint(record.get("observedTimeUnixNano", 0), _U64),
        attributes=_attributes(_repeated(record, "attributes")),
        body=_value(record["body"], 0) if "body" in record else None,
    )


def _span(span: dict[str, Any]) -> Span:
    status = _message(span.get("status", {}), _STATUS)
    return Span(
        trace_id=_hex(span.get("traceId", "")),
        span_id=_hex(span.get("spanId", "")),
        parent_span_id=_hex(span.get("parentSpanId", "")),
        name=_text(span.get("name", "")),
        start=_uint(span.get("startTimeUnixNano", 0), _U64),
        end=_uint(span.get("endTimeUnixNano", 0), _U64),
        kind=_enum(span.get("kind", 0), _KINDS),
        flags=_u32(span.get("flags", 0)),
        status_code=_enum(status.get("code", 0), _STATUS_CODES),
        status_message=_text(status.get("message", "")),
        links=_links(_repeated(span, "links")),
        attributes=_attributes(_repeated(span, "attributes")),
        events=[_event(_message(e, _EVENT)) for e in _repeated(span, "events")],
    )


def _event(event: dict[str, Any]) -> dict[str, Any]:
    return {"name": _text(event.get("name", "")), "time": _uint(event.get("timeUnixNano", 0), _U64),
            "attributes": _attributes(_repeated(event, "attributes"))}
