"""An OTLP/JSON request (traces or logs) decodes to the records its protobuf twin decodes to: read directly
(``otlp_json``) when it is written as exporters write it, by protobuf's JSON mapping when it holds anything else."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from vigil.worker.intake import otlp_json
from vigil.worker.intake.otlp import decode_logs, decode_traces

FIXTURES = Path(__file__).parent / "fixtures" / "otlp"
RECORDINGS = [path for path in sorted(FIXTURES.glob("**/*.json")) if not path.name.endswith(".expected.json")]


def requests(path: Path, kind: str = "traces") -> list[dict[str, Any]]:
    """The trace (or logs) requests of one recording."""
    return [r["body"] for r in json.loads(path.read_text()).get("requests", []) if r["path"].endswith(f"/v1/{kind}")]


def base64_ids(body: dict[str, Any]) -> dict[str, Any]:
    """The request (traces or logs) with its hex ids in base64, as protobuf's JSON mapping reads bytes."""
    body = copy.deepcopy(body)
    for resource in body.get("resourceSpans", body.get("resourceLogs", [])):
        for scope in resource.get("scopeSpans", resource.get("scopeLogs", [])):
            for span in scope.get("spans", scope.get("logRecords", [])):
                for item in [span, *span.get("links", [])]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in item:
                            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    return body


def protobuf(body: dict[str, Any]) -> bytes:
    """The request in protobuf: its ids as bytes, the rest as protobuf's JSON mapping reads it."""
    message = ExportLogsServiceRequest() if "resourceLogs" in body else ExportTraceServiceRequest()
    return json_format.ParseDict(base64_ids(body), message, ignore_unknown_fields=True).SerializeToString()


def as_json(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def test_every_recorded_request_is_read_directly():
    traces = [as_json(body) for path in RECORDINGS for body in requests(path)]
    logs = [as_json(body) for path in RECORDINGS for body in requests(path, "logs")]
    assert len(traces) > 500 and len(logs) > 100
    for body in traces:
        otlp_json.spans(json.loads(body), body)  # no Slow
    for body in logs:
        otlp_json.log_records(json.loads(body), body)


@pytest.mark.parametrize("directory", sorted({path.parent for path in RECORDINGS}), ids=lambda d: d.name)
def test_a_recorded_request_decodes_as_its_protobuf_twin(directory):
    """The first recording of each framework (of the loose recordings, each): building the protobuf twin is what
    the direct reading saves, too slow for all of them."""
    paths = sorted(directory.glob("*.json"))
    paths = paths if directory == FIXTURES else [p for p in paths if p in RECORDINGS][:1]
    for decode, kind in ((decode_traces, "traces"), (decode_logs, "logs")):
        for body in [body for path in paths for body in requests(path, kind)]:
            assert decode(as_json(body), json_body=True) == decode(protobuf(body), json_body=False)


def attribute(value: dict[str, Any], **span: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
                               "scopeSpans": [{"scope": {"name": "agent"}, "spans": [{
                                   "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                                   "name": "chat m", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
                                   "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                                                  {"key": "gen_ai.x", "value": value}], **span}]}]}]}


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "deep"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


@pytest.mark.parametrize(("body", "direct"), [
    pytest.param(attribute({"intValue": 7}), True, id="an int64 as a number"),
    pytest.param(attribute({"intValue": "-7"}), True, id="an int64 as text"),
    pytest.param(attribute({"doubleValue": 2}), True, id="a double written as an integer"),
    pytest.param(attribute({"boolValue": False}), True, id="a bool"),
    pytest.param(attribute({}), True, id="no value"),
    pytest.param(attribute({"kvlistValue": {"values": [{"key": "a", "value": {"doubleValue": 0.5}}, {"key": "a"}]}}),
                 True, id="a map, a key twice"),
    pytest.param(attribute({"stringValue": "x"}, kind="SPAN_KIND_CLIENT", status={"code": "STATUS_CODE_ERROR"}),
                 True, id="enums by name"),
    pytest.param(attribute({"stringValue": "x"}, flags=0x300, parentSpanId="aaaaaaaaaaaaaaaa"), True,
                 id="a remote parent"),
    pytest.param(attribute({"stringValue": "x"}, events=[{"name": "exception", "timeUnixNano": 3}],
                           status={"code": 1}), True, id="an exception event on an OK span"),
    pytest.param(attribute({"stringValue": "x"}, links=[{"traceId": "5b8efff798038103d269b633813fc60d",
                                                         "spanId": "eee19b7ec3c1b175", "traceState": "a=b"}]),
                 True, id="a link"),
    pytest.param(attribute(nested(otlp_json.MAX_NESTING)), True, id="values nested to the limit"),
    pytest.param(attribute(nested(otlp_json.MAX_NESTING + 1)), False, id="values nested past the limit"),
    pytest.param(attribute({"bytesValue": "aGk="}), False, id="bytes"),
    pytest.param(attribute({"doubleValue": "Infinity"}), False, id="a quoted Infinity"),
    pytest.param(attribute({"stringValue": "\U0001f600"}), False, id="an escaped surrogate pair"),
    pytest.param(attribute({"string_value": "x"}), False, id="a snake_case name"),
    pytest.param(attribute({"stringValue": "x"}, kind=2.0), False, id="an enum as a float"),
    pytest.param(attribute({"stringValue": "x"}, startTimeUnixNano="1e3"), False, id="a time in exponent notation"),
    pytest.param(attribute({"stringValue": "x"}, unknown={"ignored": None}), True, id="an unknown field"),
])
def test_a_request_decodes_as_its_protobuf_twin_read_directly_or_not(body, direct):
    try:
        otlp_json.spans(json.loads(as_json(body)), as_json(body))
        read_directly = True
    except otlp_json.Slow:
        read_directly = False

    assert read_directly == direct
    assert decode_traces(as_json(body), json_body=True) == decode_traces(protobuf(body), json_body=False)


@pytest.mark.parametrize("value", [
    pytest.param({"intValue": 1.5}, id="a fraction as an int64"),
    pytest.param({"intValue": str(2**63)}, id="an int64 out of range"),
    pytest.param({"boolValue": "true"}, id="a bool as text"),
    pytest.param({"stringValue": "a", "intValue": "1"}, id="two values"),
    pytest.param({"stringValue": "\ud800"}, id="an unpaired surrogate"),
    pytest.param({"kvlistValue": {"values": [None]}}, id="a null in a list"),
])
def test_a_value_the_mapping_refuses_rejects_its_span_in_the_mappings_words(value):
    body = attribute(value)
    with pytest.raises(json_format.ParseError) as refused:
        json_format.ParseDict(base64_ids(body), ExportTraceServiceRequest(), ignore_unknown_fields=True)

    decoded = decode_traces(as_json(body), json_body=True)

    assert decoded.spans == []
    assert decoded.reasons == [f"resource_spans[0].scope_spans[0].spans[0]: not OTLP: {str(refused.value)[:200]}"]
