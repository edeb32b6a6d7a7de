"""OTLP/HTTP requests in and out: decoding ``ExportTraceServiceRequest`` (protobuf or JSON) into span records and
``ExportLogsServiceRequest`` into the GenAI events they carry, and encoding the answers (``ExportTraceServiceResponse``
/ ``ExportLogsServiceResponse`` with ``partial_success``, ``google.rpc.Status`` on errors).

Of the resource, only the attributes assembly reads are kept (``vigil.schemas.spans.RESOURCE_KEYS``), once per span. A span
with nothing GenAI or OpenInference on it (an HTTP server span, a database call) is kept as a bare link: its ids,
parent, name and times, so the trace's tree stays whole while its attributes, events and resource are dropped, all
but the project its resource names (``vigil.project``): whose span it is, not what it says. An intake with no keys
keeps each trace under the project its spans name, and a bare span under another would split its trace in two.
**Spans no convention reads are never silently nothing**: per service (``service.name``), a request's ``Decoded``
says which services had a span some convention reads (``read``) and the attribute families (``griptape`` of
``griptape.task.id``: a key up to its first ``.`` or ``:``) of the spans none did (``unread``), so the intake can say
once in a while that a service sends spans in no convention it reads, which make no turn.
Of every span the record also keeps its kind, an error status (and an OK one beside an ``exception`` event: the
exception did not fail the span, ``conventions.error``), its scope's name and whether its parent is remote
(the span flags), which assembly reads to find a turn's root and to tell a parent not yet arrived from one in
another process; and its links to spans of other traces (``links``: the trace and span id of each, at most
``vigil.schemas.links.MAX_LINKS``, ``links_more`` when it had more), which tell work a run started in a trace of its
own (``vigil.schemas.links``). A link whose ids are not OTLP ids is dropped, not the span. A span whose ids are not OTLP ids (a 16-byte trace id and an 8-byte span id, not all zeros; in
OTLP/JSON, hex) is rejected, and the answer's ``partial_success`` says which and why; the others are kept. So is an
OTLP/JSON span (or log record) that protobuf's JSON mapping refuses (a value of the wrong type, nesting past its
limit): it alone is rejected. An OTLP/JSON request (traces or logs) written as exporters write it is read directly into its
records (``otlp_json``: the records the mapping's reading makes, without building the message); one holding
anything else (a snake_case name, a ``null``, an id that is not hex, a value the mapping refuses) is read by the
mapping, which names what it refuses.

Of logs, only the GenAI events that carry content are kept: a log record whose event name (``event_name``, else the
``event.name`` attribute) is one of ``vigil.schemas.spans.CONTENT_EVENTS``, as a span event of its span
(``vigil.schemas.spans.log_record``): its attributes, and its body's fields (a map body, or a text body that is the
JSON text of a map; any other text body as ``content``). Other log records are accepted and dropped (vigil's own ``gen_ai.evaluation.result`` among them: kept, each score would
re-assemble the trace it scored, and score it again).

**A content event with no trace or span id is unattached, not rejected.** The OpenTelemetry logs data model makes a
log record's trace context optional (OTLP's ``LogRecord``: a receiver should take a record whose ``trace_id`` or
``span_id`` is absent or invalid as one not associated with a trace), so such a record is well formed and a sender
has nothing to fix: rejecting it in ``partial_success`` would make an SDK warn of data loss where nothing was wrong
(OpenLIT emits its ``gen_ai.client.inference.operation.details`` records outside the call's span, whose own attributes
state the same messages). A record that attaches to no span can join no trace either, so it is accepted and dropped,
and counted (``Decoded.unattached``, the services in ``unattached_from``) for the request's log line and a line
naming the services that send them.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from vigil.schemas.conventions import json_value
from vigil.schemas.json_text import loads
from vigil.schemas.links import MAX_LINKS
from vigil.schemas.spans import (
    CONTENT_EVENTS,
    PROJECT_RESOURCE,
    SpanRecord,
    is_genai,
    log_record,
)
from vigil.worker.intake import otlp_json
from vigil.worker.intake.otlp_json import LogRecord, Span

__all__ = ["Decoded", "UndecodableBody", "Unread", "decode_logs", "decode_traces", "encode_error", "encode_logs_response",
           "encode_response"]

_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
_MAX_REASONS = 10
_MAX_UNREAD = 16  # services, and attribute families of each, a request's ``unread`` names at most
_FAMILY = re.compile(r"[.:]")
_STATUS_OK, _STATUS_ERROR = 1, 2  # Status.STATUS_CODE_OK, STATUS_CODE_ERROR
_FLAGS_KNOW_REMOTE, _FLAGS_REMOTE = 0x100, 0x200  # SpanFlags: whether the parent is remote is known; it is


class UndecodableBody(ValueError):
    """The body is not an ``ExportTraceServiceRequest`` in the declared encoding; the message says why."""


@dataclass
class Unread:
    """One service's spans in a request that no convention reads, and their attribute families."""

    spans: int = 0
    families: set[str] = field(default_factory=set)


@dataclass
class Decoded:
    spans: list[SpanRecord] = field(default_factory=list)
    rejected: int = 0
    unattached: int = 0  # content events with no trace or span id: accepted, attached to nothing
    unattached_from: set[str] = field(default_factory=set)  # the services that sent them (at most _MAX_UNREAD)
    reasons: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)  # services with a span a convention reads
    unread: dict[str, Unread] = field(default_factory=dict)  # by service: the spans no convention reads

    def unreadable(self, service: str, attributes: dict[str, Any]) -> None:
        """A span with attributes no convention reads, counted by its service, with its attribute families."""
        found = self.unread.get(service)
        if found is None:
            if len(self.unread) >= _MAX_UNREAD:
                return
            found = self.unread[service] = Unread()
        found.spans += 1
        if len(found.families) < _MAX_UNREAD:
            found.families.update(_FAMILY.split(key, 1)[0] for key in attributes)

    def reject(self, where: str, why: str) -> None:
        self.rejected += 1
        if len(self.reasons) < _MAX_REASONS:
            self.reasons.append(f"{where}: {why}")

    @property
    def error_message(self) -> str:
        more = self.rejected - len(self.reasons)
        return "; ".join(self.reasons) + (f"; and {more} more" if more > 0 else "")


def decode_traces(body: bytes, *, json_body: bool) -> Decoded:
    """The span records in one export request; raises ``UndecodableBody``."""
    return _decoded(body, ExportTraceServiceRequest(), otlp_json.spans, _proto_spans, _records, json_body=json_body)


def decode_logs(body: bytes, *, json_body: bool) -> Decoded:
    """The GenAI events in one logs export request, as records for their traces; raises ``UndecodableBody``."""
    return _decoded(body, ExportLogsServiceRequest(), otlp_json.log_records, _proto_log_records, _events,
                    json_body=json_body)


def _decoded(body: bytes, request, direct, from_message, decoded, *, json_body: bool) -> Decoded:
    """``decoded`` of the items (spans, log records) of one request, ``request`` the empty message it is: read
    directly from OTLP/JSON (``direct``) unless it holds what only protobuf's JSON mapping reads, else from the
    message (``from_message``); raises ``UndecodableBody``. ``bad``: the items the mapping could not read."""
    bad: dict[tuple[int, int, int], str] = {}
    if not json_body:
        return decoded(from_message(_parse(body, request)), bad)
    data = _json(body)
    try:
        return decoded(direct(data, body), bad)
    except otlp_json.Slow:
        pass
    return decoded(from_message(_from_json(data, request, bad=bad)), bad)


def _proto_log_records(request: ExportLogsServiceRequest) -> Iterator[tuple[int, int, int, dict[str, Any], str,
                                                                             LogRecord]]:
    """The log records of a protobuf request, as ``otlp_json.log_records`` reads those of an OTLP/JSON one."""
    for r, resource_logs in enumerate(request.resource_logs):
        resource = otlp_json.kept(_attributes(resource_logs.resource.attributes))
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            scope = scope_logs.scope.name
            for i, record in enumerate(scope_logs.log_records):
                yield r, s, i, resource, scope, LogRecord(
                    record.trace_id, record.span_id, record.event_name, record.time_unix_nano,
                    record.observed_time_unix_nano, _attributes(record.attributes),
                    _value(record.body) if record.HasField("body") else None)


def _events(records: Iterable[tuple[int, int, int, dict[str, Any], str, LogRecord]],
            bad: dict[tuple[int, int, int], str]) -> Decoded:
    out = Decoded()
    for r, s, i, resource, scope, record in records:
        if (r, s, i) in bad:
            out.reject(f"resource_logs[{r}].scope_logs[{s}].log_records[{i}]", bad[r, s, i])
            continue
        attributes = record.attributes
        name = record.event_name or str(attributes.pop("event.name", "") or "")
        if name not in CONTENT_EVENTS:  # not content (vigil's own gen_ai.evaluation.result among them)
            continue
        if not _otlp_ids(record.trace_id, record.span_id):  # no trace context: well formed, attaches nowhere
            out.unattached += 1
            if len(out.unattached_from) < _MAX_UNREAD:
                out.unattached_from.add(str(resource.get("service.name") or ""))
            continue
        body_value = record.body
        if isinstance(body_value, str) and body_value[:1] == "{":
            body_value = _map_text(body_value)
        if isinstance(body_value, dict):
            attributes.update(body_value)
        elif body_value not in (None, ""):
            attributes.setdefault("content", body_value)
        event = {"name": name, "time": record.time or record.observed_time, "attributes": attributes}
        out.spans.append(log_record(record.trace_id.hex(), record.span_id.hex(), event, resource, scope))
    return out


def _map_text(text: str) -> Any:
    """A text body that is the JSON text of a map is that map (an SDK that logs the event's map serialized: Semantic
    Kernel's ``json.dumps(message.to_dict())``); any other text stays text."""
    parsed = json_value(text)
    return parsed if isinstance(parsed, dict) else text


def _parse(body: bytes, request):
    """A protobuf ``body`` parsed into the (empty) message ``request``; raises ``UndecodableBody``."""
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise UndecodableBody(f"not a protobuf {type(request).__name__}: {exc}") from None
    return request


def _json(body: bytes) -> dict[str, Any]:
    """An OTLP/JSON body parsed; raises ``UndecodableBody``."""
    try:
        data = loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UndecodableBody(f"body is not JSON: {exc}") from None
    except RecursionError:
        raise UndecodableBody("body is not JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise UndecodableBody(f"body must be a JSON object, got {type(data).__name__}")
    return data


# what protobuf's JSON mapping raises for a value it refuses; SystemError: its C library (upb) for text holding an
# unpaired surrogate (JSON's "\ud800", no Unicode character) where a message or an enum is due
_REFUSED = (json_format.ParseError, ValueError, TypeError, RecursionError, SystemError)


def _from_json(data: dict[str, Any], request, *, bad: dict[tuple[int, int, int], str]):
    """A parsed OTLP/JSON body read by protobuf's JSON mapping into the (empty) message ``request``; raises
    ``UndecodableBody``. The spans or log records that cannot be read (an id that is not hex, a value protobuf
    refuses) are left empty and named in ``bad`` by their (resource, scope, item) indices, so the others are kept."""
    kind = type(request).__name__
    levels = _LEVELS[kind]
    items = list(_items(data, levels))
    for where, item in items:
        reason = _hex_ids_to_base64(item)
        if reason:
            bad[where] = reason
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
        return request
    except _REFUSED:
        request.Clear()
    for where, item in items:  # which of them protobuf refuses: each alone
        if where in bad:
            continue
        alone = {levels[0]: [{levels[1]: [{levels[2]: [item]}]}]}
        try:
            json_format.ParseDict(alone, type(request)(), ignore_unknown_fields=True)
        except _REFUSED as exc:
            bad[where] = f"not OTLP: {str(exc)[:200]}"
    for where, item in items:
        if where in bad:
            item.clear()
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except _REFUSED as exc:
        raise UndecodableBody(f"not an OTLP {kind}: {exc}") from None
    return request


_LEVELS = {"ExportTraceServiceRequest": ("resourceSpans", "scopeSpans", "spans"),
           "ExportLogsServiceRequest": ("resourceLogs", "scopeLogs", "logRecords")}


def _items(data: dict[str, Any], levels: tuple[str, str, str]):
    """((resource, scope, item) indices, item) of every span or log record in an OTLP/JSON request (camelCase or
    snake_case keys), in order."""
    def children(node: Any, key: str) -> list[Any]:
        if not isinstance(node, dict):
            return []
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        value = node.get(key, node.get(snake))
        return value if isinstance(value, list) else []

    for r, resource in enumerate(children(data, levels[0])):
        for s, scope in enumerate(children(resource, levels[1])):
            for i, item in enumerate(children(scope, levels[2])):
                if isinstance(item, dict):
                    yield (r, s, i), item


def _proto_spans(request: ExportTraceServiceRequest) -> Iterator[tuple[int, int, int, dict[str, Any], str, Span]]:
    """The spans of a protobuf request, as ``otlp_json.spans`` reads those of an OTLP/JSON one."""
    for r, resource_spans in enumerate(request.resource_spans):
        resource = otlp_json.kept(_attributes(resource_spans.resource.attributes))
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope.name
            for i, span in enumerate(scope_spans.spans):
                yield r, s, i, resource, scope, Span(
                    span.trace_id, span.span_id, span.parent_span_id, span.name, span.start_time_unix_nano,
                    span.end_time_unix_nano, span.kind, span.flags, span.status.code, span.status.message,
                    [(link.trace_id, link.span_id) for link in span.links] if span.links else [],
                    _attributes(span.attributes),
                    [{"name": e.name, "time": e.time_unix_nano, "attributes": _attributes(e.attributes)}
                     for e in span.events] if span.events else [])


def _records(spans: Iterable[tuple[int, int, int, dict[str, Any], str, Span]],
             bad: dict[tuple[int, int, int], str]) -> Decoded:
    out = Decoded()
    project_of: dict[str, Any] | None = None  # the resource whose project is ``project``
    for r, s, i, resource, scope, span in spans:
        if resource is not project_of:
            project_of = resource
            # a bare span's whole resource: the project it is of
            project = {PROJECT_RESOURCE: resource[PROJECT_RESOURCE]} if PROJECT_RESOURCE in resource else None
        if (r, s, i) in bad:
            out.reject(_where(r, s, i), bad[r, s, i])
            continue
        if len(span.trace_id) != 16 or span.trace_id == _ZERO_TRACE:
            out.reject(_where(r, s, i), f"trace_id must be 16 bytes and not all zero (got {len(span.trace_id)} bytes)")
            continue
        if len(span.span_id) != 8 or span.span_id == _ZERO_SPAN:
            out.reject(_where(r, s, i), f"span_id must be 8 bytes and not all zero (got {len(span.span_id)} bytes)")
            continue
        parent = span.parent_span_id
        record: SpanRecord = {
            "trace_id": span.trace_id.hex(),
            "span_id": span.span_id.hex(),
            "parent_id": parent.hex() if len(parent) == 8 and parent != _ZERO_SPAN else None,
            "name": span.name,
            "start": span.start,
            "end": span.end,
            "attributes": {},
            "kind": span.kind,
        }
        if span.flags & _FLAGS_KNOW_REMOTE and span.flags & _FLAGS_REMOTE and record["parent_id"]:
            record["parent_remote"] = True
        if span.links:
            _links(record, span.links)
        if span.status_code == _STATUS_ERROR:  # a bare link's too: a span that kept only its name and error
            record["status"] = {"code": _STATUS_ERROR, "message": span.status_message}
        elif span.status_code == _STATUS_OK and any(e["name"] == "exception" for e in span.events):
            record["status"] = {"code": _STATUS_OK}  # the exception it recorded did not fail it
        attributes = span.attributes
        if is_genai(attributes, (e["name"] for e in span.events)):
            record["attributes"] = attributes
            record["events"] = span.events
            record["resource"] = resource
            record["scope"] = scope
            out.read.add(str(resource.get("service.name") or ""))
        else:
            if project is not None:
                record["resource"] = project
            if attributes:
                out.unreadable(str(resource.get("service.name") or ""), attributes)
        out.spans.append(record)
    return out


def _where(r: int, s: int, i: int) -> str:
    return f"resource_spans[{r}].scope_spans[{s}].spans[{i}]"


def _otlp_ids(trace_id: bytes, span_id: bytes) -> bool:
    """Whether a trace and span id are OTLP ids: 16 and 8 bytes, not all zeros."""
    return len(trace_id) == 16 and trace_id != _ZERO_TRACE and len(span_id) == 8 and span_id != _ZERO_SPAN


def _links(record: SpanRecord, links: list[tuple[bytes, bytes]]) -> None:
    """A span's links with OTLP ids, each once, at most ``MAX_LINKS`` (``links_more`` when it had others)."""
    kept: list[dict[str, str]] = []
    for trace_id, span_id in links:
        if not _otlp_ids(trace_id, span_id):
            continue
        found = {"trace_id": trace_id.hex(), "span_id": span_id.hex()}
        if found in kept:
            continue
        if len(kept) == MAX_LINKS:
            record["links_more"] = True
            break
        kept.append(found)
    if kept:
        record["links"] = kept


def _attributes(pairs) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":  # most values
        return value.string_value
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, kind)


def _hex_ids_to_base64(item: dict[str, Any]) -> str | None:
    """OTLP/JSON writes a span's (or log record's) ids as hex, where protobuf's JSON mapping expects base64: converted
    in place. Returns why an id is not hex (the item is then rejected alone), or None. A link's ids that are not hex
    are left empty: the link is dropped (``_links``), the span kept."""
    links = item.get("links")
    if isinstance(links, list):
        for link in links:
            if isinstance(link, dict) and _hex_ids_to_base64(link):
                link["traceId"] = link["spanId"] = ""
                link.pop("trace_id", None)
                link.pop("span_id", None)
    for key in _ID_FIELDS:
        value = item.get(key)
        if not isinstance(value, str):
            continue
        try:
            item[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except ValueError:
            item[key] = ""
            return f"{key}: {value[:40]!r} is not a hex id"
    return None


def _serialized(message: Any, *, json_body: bool) -> bytes:
    """An answer in the encoding its request came in: OTLP/JSON or protobuf."""
    if json_body:
        return json_format.MessageToJson(message, indent=None).encode()
    return message.SerializeToString()


def encode_response(decoded: Decoded, *, json_body: bool) -> bytes:
    response = ExportTraceServiceResponse()
    if decoded.rejected:
        response.partial_success.CopyFrom(ExportTracePartialSuccess(rejected_spans=decoded.rejected,
                                                                    error_message=decoded.error_message))
    return _serialized(response, json_body=json_body)


def encode_logs_response(decoded: Decoded, *, json_body: bool) -> bytes:
    response = ExportLogsServiceResponse()
    if decoded.rejected:
        response.partial_success.CopyFrom(ExportLogsPartialSuccess(rejected_log_records=decoded.rejected,
                                                                   error_message=decoded.error_message))
    return _serialized(response, json_body=json_body)


def encode_error(code: int, message: str, *, json_body: bool) -> bytes:
    """A ``google.rpc.Status`` body, as OTLP/HTTP asks for failed requests."""
    status = status_pb2.Status(code=code, message=message)
    return _serialized(status, json_body=json_body)
