"""Hostile and malformed OTLP never loses the good spans beside it: each span (or log record) that cannot be read is
rejected alone and named in ``partial_success``; the request is refused whole only when it is not OTLP at all."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from vigil.worker.intake.otlp import UndecodableBody, decode_logs, decode_traces

GOOD = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"


def span(trace_id: str = GOOD[0], span_id: str = GOOD[1], **extra: Any) -> dict[str, Any]:
    return {"traceId": trace_id, "spanId": span_id, "name": "chat m", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2", "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
            **extra}


def body(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "deep"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


@pytest.mark.parametrize(("bad", "why"), [
    pytest.param(span(trace_id="not-hex"), "traceId: 'not-hex' is not a hex id", id="a trace id not in hex"),
    pytest.param(span(span_id="7u6b+0v8dQE="), "is not a hex id", id="a base64 span id"),
    pytest.param(span(parentSpanId="zz"), "parentSpanId", id="a parent id not in hex"),
    pytest.param(span(span_id="eee19b7ec3c1b1"), "span_id must be 8 bytes", id="a short span id"),
    pytest.param(span(attributes=[{"key": "x", "value": {"intValue": "seven"}}]), "not OTLP", id="a value of the wrong type"),
    pytest.param(span(attributes=[{"key": "x", "value": nested(150)}]), "not OTLP", id="attributes nested past the limit"),
    pytest.param(span(startTimeUnixNano={"a": 1}), "not OTLP", id="a time that is an object"),
    pytest.param(span(status="\ud800"), "not OTLP", id="an unpaired surrogate where a message is due"),
    pytest.param(span(kind="\ud800"), "not OTLP", id="an unpaired surrogate where an enum is due"),
])
def test_a_malformed_span_is_rejected_alone_and_the_good_ones_beside_it_are_kept(bad, why):
    good = span(span_id="aaaaaaaaaaaaaaaa")

    decoded = decode_traces(body(good, bad, span()), json_body=True)

    assert [s["span_id"] for s in decoded.spans] == ["aaaaaaaaaaaaaaaa", GOOD[1]]
    assert decoded.rejected == 1 and "spans[1]: " in decoded.error_message and why in decoded.error_message


def test_a_huge_attribute_is_kept_with_its_span_and_the_others():
    huge = span(span_id="bbbbbbbbbbbbbbbb", attributes=[{"key": "gen_ai.prompt", "value": {"stringValue": "x" * 3_000_000}}])

    decoded = decode_traces(body(huge, span()), json_body=True)

    assert decoded.rejected == 0 and len(decoded.spans[0]["attributes"]["gen_ai.prompt"]) == 3_000_000


def test_a_log_record_with_an_id_not_in_hex_is_rejected_alone():
    def record(span_id: str) -> dict[str, Any]:
        return {"traceId": GOOD[0], "spanId": span_id, "eventName": "gen_ai.user.message",
                "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "hi"}}]}}}
    logs = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [record("nothex!!"), record(GOOD[1])]}]}]})

    decoded = decode_logs(logs.encode(), json_body=True)

    assert [s["span_id"] for s in decoded.spans] == [GOOD[1]]
    assert decoded.rejected == 1 and "log_records[0]: spanId" in decoded.error_message


@pytest.mark.parametrize("raw", [
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="JSON nested past the parser's limit"),
    pytest.param(b'{"resourceSpans": {"not": "a list"}}', id="not the request's shape"),
    pytest.param(b'{"resourceSpans": ["\\ud800"]}', id="an unpaired surrogate where a resource is due"),
])
def test_a_body_that_is_not_otlp_at_all_is_refused_whole_with_a_reason(raw):
    with pytest.raises(UndecodableBody):
        decode_traces(raw, json_body=True)


def test_span_kind_error_status_scope_and_a_remote_parent_are_kept_for_assembly():
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    scope_spans.scope.name = "opentelemetry.instrumentation.openai_v2"
    tool = scope_spans.spans.add(trace_id=bytes.fromhex(GOOD[0]), span_id=bytes.fromhex(GOOD[1]), name="execute_tool x",
                                 parent_span_id=bytes(range(1, 9)), flags=0x300, kind=1)
    tool.attributes.add(key="gen_ai.operation.name").value.string_value = "execute_tool"
    tool.status.code, tool.status.message = 2, "timed out"
    scope_spans.spans.add(trace_id=bytes.fromhex(GOOD[0]), span_id=bytes(range(1, 9)), name="POST /chat",
                                   kind=2, flags=0x100)

    decoded = decode_traces(request.SerializeToString(), json_body=False)

    record, link = decoded.spans
    assert (record["kind"], record["status"], record["scope"], record["parent_remote"]) == (
        1, {"code": 2, "message": "timed out"}, "opentelemetry.instrumentation.openai_v2", True)
    assert (link["kind"], link["attributes"], "parent_remote" in link) == (2, {}, False)


def _event_log(name: str, body: dict[str, Any]) -> bytes:
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{
        "traceId": GOOD[0], "spanId": GOOD[1], "timeUnixNano": "5", "eventName": name, "body": body}]}]}]}).encode()


@pytest.mark.parametrize("body", [
    pytest.param({"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "Where is my order?"}}]}},
                 id="a map body"),
    pytest.param({"stringValue": json.dumps({"role": "user", "content": "Where is my order?"})},
                 id="the JSON text of a map (Semantic Kernel logs its messages so)"),
])
def test_a_content_event_body_is_read_as_its_map_whether_sent_as_a_map_or_as_its_json_text(body):
    decoded = decode_logs(_event_log("gen_ai.user.message", body), json_body=True)

    assert decoded.spans[0]["events"][0]["attributes"]["content"] == "Where is my order?"


def test_a_text_body_that_is_not_a_map_stays_the_events_content():
    decoded = decode_logs(_event_log("gen_ai.user.message", {"stringValue": "[1, 2] is not a message"}),
                          json_body=True)

    assert decoded.spans[0]["events"][0]["attributes"]["content"] == "[1, 2] is not a message"
