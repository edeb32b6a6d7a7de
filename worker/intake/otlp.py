"""OTLP/HTTP requests in and out: decoding ``ExportTraceServiceRequest`` (protobuf or JSON) into span records and
``ExportLogsServiceRequest`` into the GenAI events they carry, and encoding the answers (``ExportTraceServiceResponse``
/ ``ExportLogsServiceResponse`` with ``partial_success``, ``google.rpc.Status`` on errors).

Of the resource, only the attributes assembly reads are kept (``vigil.schemas.spans.RESOURCE_KEYS``), once per span. A span
with nothing GenAI or OpenInference on it (an HTTP server span, a database call) is kept as a bare link: its ids,
parent, name and times, so the trace's tree stays whole while its attributes, events and resource are dropped.
A span whose ids are not OTLP ids (a 16-byte trace id and an 8-byte span id, not all zeros) is rejected, and the
answer's ``partial_success`` says which and why; the others are kept.

Of logs, only the GenAI events that carry content are kept: a log record whose event name (``event_name``, else the
``event.name`` attribute) is one of ``vigil.schemas.spans.CONTENT_EVENTS``, as a span event of its span
(``vigil.schemas.spans.log_record``): its attributes, and its body's fields (a map body; a text body as ``content``). Other
log records are accepted and dropped (vigil's own ``gen_ai.evaluation.result`` among them: kept, each score would
re-assemble the trace it scored, and score it again); a content event without a valid trace and span id cannot be
attached to a trace and is rejected, named in ``partial_success``.
"""

from __future__ import annotations

import base64
import json
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
from vigil.schemas.spans import (
    CONTENT_EVENTS,
    RESOURCE_KEYS,
    SpanRecord,
    is_genai,
    log_record,
)

__all__ = ["Decoded", "UndecodableBody", "decode_logs", "decode_traces", "encode_error", "encode_logs_response",
           "encode_response"]

_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
_MAX_REASONS = 10


class UndecodableBody(ValueError):
    """The body is not an ``ExportTraceServiceRequest`` in the declared encoding; the message says why."""


@dataclass
class Decoded:
    spans: list[SpanRecord] = field(default_factory=list)
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

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
    return _records(_parse(body, ExportTraceServiceRequest(), json_body=json_body))


def decode_logs(body: bytes, *, json_body: bool) -> Decoded:
    """The GenAI events in one logs export request, as records for their traces; raises ``UndecodableBody``."""
    request = _parse(body, ExportLogsServiceRequest(), json_body=json_body)
    out = Decoded()
    for r, resource_logs in enumerate(request.resource_logs):
        resource = {kv.key: _value(kv.value) for kv in resource_logs.resource.attributes if kv.key in RESOURCE_KEYS}
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            for i, record in enumerate(scope_logs.log_records):
                attributes = _attributes(record.attributes)
                name = record.event_name or str(attributes.pop("event.name", "") or "")
                if name not in CONTENT_EVENTS:  # not content (vigil's own gen_ai.evaluation.result among them)
                    continue
                where = f"resource_logs[{r}].scope_logs[{s}].log_records[{i}] ({name})"
                if len(record.trace_id) != 16 or record.trace_id == _ZERO_TRACE or len(record.span_id) != 8 \
                        or record.span_id == _ZERO_SPAN:
                    out.reject(where, "a GenAI event needs the trace_id and span_id of its span")
                    continue
                body_value = _value(record.body) if record.HasField("body") else None
                if isinstance(body_value, dict):
                    attributes.update(body_value)
                elif body_value not in (None, ""):
                    attributes.setdefault("content", body_value)
                event = {"name": name, "time": record.time_unix_nano or record.observed_time_unix_nano,
                         "attributes": attributes}
                out.spans.append(log_record(record.trace_id.hex(), record.span_id.hex(), event, resource))
    return out


def _parse(body: bytes, request, *, json_body: bool):
    """``body`` parsed into the (empty) protobuf message ``request``; raises ``UndecodableBody``."""
    kind = type(request).__name__
    if json_body:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise UndecodableBody(f"body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise UndecodableBody(f"body must be a JSON object, got {type(data).__name__}")
        try:
            json_format.ParseDict(_hex_ids_to_base64(data), request, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError) as exc:
            raise UndecodableBody(f"not an OTLP {kind}: {exc}") from None
    else:
        try:
            request.ParseFromString(body)
        except (DecodeError, ValueError) as exc:
            raise UndecodableBody(f"not a protobuf {kind}: {exc}") from None
    return request


def _records(request: ExportTraceServiceRequest) -> Decoded:
    out = Decoded()
    for r, resource_spans in enumerate(request.resource_spans):
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes if kv.key in RESOURCE_KEYS}
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):
                where = f"resource_spans[{r}].scope_spans[{s}].spans[{i}]"
                if len(span.trace_id) != 16 or span.trace_id == _ZERO_TRACE:
                    out.reject(where, f"trace_id must be 16 bytes and not all zero (got {len(span.trace_id)} bytes)")
                    continue
                if len(span.span_id) != 8 or span.span_id == _ZERO_SPAN:
                    out.reject(where, f"span_id must be 8 bytes and not all zero (got {len(span.span_id)} bytes)")
                    continue
                parent = span.parent_span_id
                record: SpanRecord = {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_id": parent.hex() if len(parent) == 8 and parent != _ZERO_SPAN else None,
                    "name": span.name,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {},
                }
                attributes = _attributes(span.attributes)
                if is_genai(attributes, (e.name for e in span.events)):
                    record["attributes"] = attributes
                    record["events"] = [{"name": e.name, "time": e.time_unix_nano,
                                         "attributes": _attributes(e.attributes)} for e in span.events]
                    record["resource"] = resource
                out.spans.append(record)
    return out


def _attributes(pairs) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, kind)


def _hex_ids_to_base64(data: Any) -> Any:
    """OTLP/JSON writes span and trace ids as hex, where protobuf's JSON mapping expects base64."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if key in _ID_FIELDS and isinstance(value, str):
                try:
                    value = base64.b64encode(bytes.fromhex(value)).decode("ascii")
                except ValueError:
                    raise UndecodableBody(f"{key}: {value[:40]!r} is not a hex id") from None
                out[key] = value
            else:
                out[key] = _hex_ids_to_base64(value)
        return out
    if isinstance(data, list):
        return [_hex_ids_to_base64(item) for item in data]
    return data


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
