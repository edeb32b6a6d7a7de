"""`vigil intake` as a real process against a real Redis: what it answers (OTLP/HTTP's status codes) and what it
keeps. Spans go to Redis as `vigil.spans` tasks; nothing here runs a worker (tests/test_intake_pipeline.py does)."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest
import redis
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from vigil.producers import Monitor

from tests.pipeline import IntakeProcess

TRACE_ID, SPAN_ID = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"


def queued(url: str, task: str) -> list[Any]:
    """The payloads of the ``task`` messages waiting on the ingest queue, oldest first."""
    client = redis.Redis.from_url(url)
    try:
        raw = client.lrange("vigil.ingest", 0, -1)
    finally:
        client.close()
    out = []
    for message in reversed(raw):
        envelope = json.loads(message)
        if envelope["headers"]["task"] == task:
            args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
            out.extend(args[0])
    return out


def post(url: str, body: bytes, content_type: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def otlp_json(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "billing-bot"}}]},
        "scopeSpans": [{"spans": list(spans)}]}]}).encode()


def json_span(trace_id: str = TRACE_ID, span_id: str = SPAN_ID, **extra: Any) -> dict[str, Any]:
    return {"traceId": trace_id, "spanId": span_id, "name": "chat m", "kind": 3,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                           {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}}], **extra}


@pytest.fixture(scope="module")
def intake(redis_server, tmp_path_factory):
    """One intake for the module's tests: it keeps nothing between requests but what it writes to Redis, which each
    test flushes first (``redis_url``)."""
    process = IntakeProcess(redis_server.url, tmp_path_factory.mktemp("intake"), VIGIL_INTAKE_MAX_BYTES="200000",
                            VIGIL_INTAKE_RETRY_AFTER_S="2")
    yield process.start()
    process.stop()


def export_one_span(endpoint: str, **exporter_options: Any) -> tuple[str, str]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, **exporter_options)))
    with provider.get_tracer("agent").start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat",
                                                                              "gen_ai.prompt": "2+2?"}) as span:
        pass
    provider.shutdown()
    context = span.get_span_context()
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def test_spans_from_the_sdk_exporter_gzip_protobuf_are_kept_in_redis_as_span_records(intake, redis_url):
    trace_id, span_id = export_one_span(f"{intake.url}/v1/traces", compression=Compression.Gzip)

    [record] = queued(redis_url, "vigil.spans")
    assert (record["trace_id"], record["span_id"], record["parent_id"]) == (trace_id, span_id, None)
    assert record["attributes"] == {"gen_ai.operation.name": "chat", "gen_ai.prompt": "2+2?"}
    assert record["end"] >= record["start"] > 0


def test_an_otlp_json_request_keeps_typed_attribute_values_and_hex_ids(intake, redis_url):
    status, headers, body = post(f"{intake.url}/v1/traces", otlp_json(json_span()), "application/json")

    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body) == {}  # no partial_success: everything was kept
    [record] = queued(redis_url, "vigil.spans")
    assert (record["trace_id"], record["span_id"]) == (TRACE_ID, SPAN_ID)
    assert record["attributes"]["gen_ai.usage.input_tokens"] == 12
    assert record["resource"] == {"service.name": "billing-bot"}


def test_spans_with_bad_ids_are_named_in_partial_success_and_the_others_are_kept(intake, redis_url):
    body = otlp_json(json_span(), json_span(trace_id="", span_id="aaaaaaaaaaaaaaaa"),
                     json_span(span_id="0000000000000000"))

    status, _, answer = post(f"{intake.url}/v1/traces", body, "application/json")

    assert status == 200
    partial = json.loads(answer)["partialSuccess"]
    assert partial["rejectedSpans"] == "2"
    assert "spans[1]: trace_id" in partial["errorMessage"] and "spans[2]: span_id" in partial["errorMessage"]
    assert [r["span_id"] for r in queued(redis_url, "vigil.spans")] == [SPAN_ID]


def test_a_span_whose_id_is_not_hex_is_rejected_alone_through_partial_success(intake, redis_url):
    body = otlp_json(json_span(trace_id="xyz"), json_span(span_id="7u6b+0v8dQE="), json_span())

    status, _, answer = post(f"{intake.url}/v1/traces", body, "application/json")

    assert status == 200
    partial = json.loads(answer)["partialSuccess"]
    assert partial["rejectedSpans"] == "2" and "spans[0]: traceId: 'xyz' is not a hex id" in partial["errorMessage"]
    assert [r["span_id"] for r in queued(redis_url, "vigil.spans")] == [SPAN_ID]


def test_a_service_whose_spans_no_convention_reads_is_named_once_with_its_attribute_families(intake, redis_url):
    def resource(service: str, *spans: dict[str, Any]) -> dict[str, Any]:
        return {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"spans": list(spans)}]}

    def plain(span_id: str, **attributes: str) -> dict[str, Any]:
        return {**json_span(span_id=span_id), "name": "work",
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()]}

    unknown = resource("griptape-bot", plain("a1a1a1a1a1a1a1a1", **{"griptape.task.id": "t1", "griptape:input": "hi"}),
                       plain("a2a2a2a2a2a2a2a2", **{"http.method": "POST"}))
    read = resource("read-bot", json_span(span_id="b1b1b1b1b1b1b1b1"),
                    plain("b2b2b2b2b2b2b2b2", **{"http.method": "POST"}))  # an HTTP span beside its LLM call
    body = json.dumps({"resourceSpans": [unknown, read]}).encode()

    first, again = (post(f"{intake.url}/v1/traces", body, "application/json")[0] for _ in range(2))

    assert first == again == 200
    assert len(queued(redis_url, "vigil.spans")) == 8  # accepted: the unread ones as bare links
    lines = [json.loads(line) for line in intake.output().splitlines() if "no convention vigil reads" in line]
    assert [(line["service"], line["spans"], line["attributes"]) for line in lines
            if line["service"] in ("griptape-bot", "read-bot")] == [
        ("griptape-bot", 2, "griptape.*, http.*")]  # once (every ten minutes), not for a service it reads


def test_a_protobuf_request_gets_a_protobuf_answer_with_partial_success(intake):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes(16), bytes.fromhex(SPAN_ID), "zero trace id"

    status, headers, answer = post(f"{intake.url}/v1/traces", request.SerializeToString(), "application/x-protobuf")

    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    response = ExportTraceServiceResponse.FromString(answer)
    assert response.partial_success.rejected_spans == 1
    assert "trace_id must be 16 bytes and not all zero" in response.partial_success.error_message


@pytest.mark.parametrize(("body", "content_type", "headers", "why"), [
    pytest.param(b"\xff\x00 not protobuf", "application/x-protobuf", {}, "protobuf", id="protobuf garbage"),
    pytest.param(b"{not json", "application/json", {}, "not JSON", id="broken JSON"),
    pytest.param(b'{"resourceSpans": 7}', "application/json", {}, "ExportTraceServiceRequest", id="wrong shape"),
    pytest.param(b"not gzip at all", "application/json", {"Content-Encoding": "gzip"}, "gzip", id="broken gzip"),
])
def test_a_body_that_cannot_be_decoded_is_answered_400_with_a_status_saying_why(intake, redis_url, body,
                                                                                 content_type, headers, why):
    status, _, answer = post(f"{intake.url}/v1/traces", body, content_type, **headers)

    assert status == 400
    if content_type == "application/json":
        message = json.loads(answer)["message"]
    else:
        message = status_pb2.Status.FromString(answer).message
    assert why in message
    assert queued(redis_url, "vigil.spans") == []


def test_a_body_over_the_limit_after_decompression_is_answered_413(intake, redis_url):
    big = otlp_json(json_span(name="x" * 300_000))
    small_on_the_wire = gzip.compress(big)
    assert len(small_on_the_wire) < 200_000 < len(big)

    status, _, answer = post(f"{intake.url}/v1/traces", small_on_the_wire, "application/json",
                             **{"Content-Encoding": "gzip"})

    assert status == 413 and "200000" in json.loads(answer)["message"]
    assert queued(redis_url, "vigil.spans") == []


def test_another_content_type_is_answered_415(intake):
    status, _, _ = post(f"{intake.url}/v1/traces", b"hello", "text/plain")

    assert status == 415


def test_when_redis_refuses_writes_the_answer_is_503_with_retry_after_never_200(intake, redis_url):
    client = redis.Redis.from_url(redis_url)
    client.config_set("maxmemory", 1)  # noeviction: every write is refused with OOM, as a full Redis does
    try:
        status, headers, answer = post(f"{intake.url}/v1/traces", otlp_json(json_span()), "application/json")
    finally:
        client.config_set("maxmemory", 0)

    assert status == 503 and headers["Retry-After"] == "2"
    assert "retry later" in json.loads(answer)["message"]
    assert queued(redis_url, "vigil.spans") == []


def test_with_a_token_set_a_request_without_it_is_answered_401_and_nothing_is_kept(redis_url, tmp_path):
    intake = IntakeProcess(redis_url, tmp_path, VIGIL_INTAKE_TOKEN="s3cret").start()
    try:
        refused, _, _ = post(f"{intake.url}/v1/traces", otlp_json(json_span()), "application/json",
                             Authorization="Bearer wrong")
        accepted, _, _ = post(f"{intake.url}/v1/traces", otlp_json(json_span()), "application/json",
                              Authorization="Bearer s3cret")
    finally:
        intake.stop()

    assert (refused, accepted) == (401, 200)
    assert len(queued(redis_url, "vigil.spans")) == 1
    assert "s3cret" not in intake.output()


def test_the_sdk_ships_turns_through_the_intake_when_given_its_url(intake, redis_url, tmp_path):
    monitor = Monitor(intake_url=intake.url, redis_url="redis://127.0.0.1:1/0", spool_path=tmp_path / "spool",
                      agent="support-bot", flush_interval=3600)
    monitor.capture(input="Where is my parcel?", output="It left the depot today.")
    assert monitor.flush(timeout=10)
    monitor.shutdown(timeout=5)

    [turn] = queued(redis_url, "vigil.ingest")
    assert (turn["agent"], turn["input"][0]["content"]) == ("support-bot", "Where is my parcel?")
    assert monitor.counters().shipped == 1


def test_the_turns_route_refuses_a_body_that_is_not_a_list_of_turns(intake, redis_url):
    status, _, answer = post(f"{intake.url}/v1/turns", b'{"input": "not a list"}', "application/json")

    assert status == 400 and "JSON list" in json.loads(answer)["message"]
    assert queued(redis_url, "vigil.ingest") == []


def test_a_port_in_use_is_one_line_on_stderr_and_a_nonzero_exit(intake):
    result = subprocess.run([sys.executable, "-m", "vigil.worker", "intake", "--port", str(intake.port)],
                            capture_output=True, text=True, timeout=60, env=intake.env, check=False)

    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "cannot listen" in result.stderr


def test_a_span_without_genai_content_is_kept_as_a_bare_link_in_its_trace(intake, redis_url):
    http = {"traceId": TRACE_ID, "spanId": "aaaaaaaaaaaaaaaa", "name": "GET /ask", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2", "attributes": [{"key": "http.route", "value": {"stringValue": "/ask"}}]}
    chat = json_span(parentSpanId="aaaaaaaaaaaaaaaa")

    status, _, _ = post(f"{intake.url}/v1/traces", otlp_json(http, chat), "application/json")

    assert status == 200
    link, llm = queued(redis_url, "vigil.spans")
    assert (link["span_id"], link["name"], link["attributes"]) == ("aaaaaaaaaaaaaaaa", "GET /ask", {})
    assert "resource" not in link and "events" not in link
    assert (llm["parent_id"], llm["attributes"]["gen_ai.operation.name"]) == ("aaaaaaaaaaaaaaaa", "chat")


def test_a_bare_span_keeps_the_project_its_resource_names_so_an_open_intake_keeps_its_trace_whole(intake, redis_url):
    http = {"traceId": TRACE_ID, "spanId": "aaaaaaaaaaaaaaaa", "name": "GET /ask", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2", "attributes": [{"key": "http.route", "value": {"stringValue": "/ask"}}]}
    body = json.loads(otlp_json(http, json_span(parentSpanId="aaaaaaaaaaaaaaaa")))
    body["resourceSpans"][0]["resource"]["attributes"].append({"key": "vigil.project",
                                                                "value": {"stringValue": "shop"}})

    status, _, _ = post(f"{intake.url}/v1/traces", json.dumps(body).encode(), "application/json")

    assert status == 200
    link, llm = queued(redis_url, "vigil.spans")
    assert link["resource"] == {"vigil.project": "shop"} and link["attributes"] == {}  # whose it is, nothing it says
    assert llm["resource"]["vigil.project"] == "shop"


def otlp_logs_json(*records: dict[str, Any]) -> bytes:
    return json.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "billing-bot"}}]},
        "scopeLogs": [{"logRecords": list(records)}]}]}).encode()


def json_log(event_name: str | None, content: str, **ids: str) -> dict[str, Any]:
    record: dict[str, Any] = {"timeUnixNano": "1700000000500000000", "body": {"kvlistValue": {"values": [
        {"key": "content", "value": {"stringValue": content}}]}}, **ids}
    if event_name:
        record["eventName"] = event_name
    return record


def test_logs_as_gzip_json_keep_the_genai_events_with_their_span_and_count_those_without_one(intake, redis_url):
    """The logs data model makes a record's trace context optional: an event with none (OpenLIT emits some outside
    the call's span) is well formed and attaches to no span, so it is accepted, not kept, and counted in the log."""
    body = otlp_logs_json(json_log(None, "GET /healthz 200", traceId=TRACE_ID, spanId=SPAN_ID),
                          json_log("gen_ai.user.message", "Why was I charged twice?", traceId=TRACE_ID, spanId=SPAN_ID),
                          json_log("gen_ai.user.message", "And where is my parcel?"),
                          json_log("gen_ai.user.message", "And my refund?", traceId="0" * 32, spanId="0" * 16))

    status, _, answer = post(f"{intake.url}/v1/logs", gzip.compress(body), "application/json",
                             **{"Content-Encoding": "gzip"})

    assert status == 200
    assert json.loads(answer) == {}  # no partial_success: nothing the sender should fix
    lines = [json.loads(line) for line in intake.log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("unattached") == 2 and line.get("path") == "/v1/logs" for line in lines)
    assert any(line.get("unattached") == 2 and line.get("services") == "billing-bot" for line in lines)
    [record] = queued(redis_url, "vigil.spans")  # the application log and the unattached events are not kept
    assert (record["trace_id"], record["span_id"], record["log"]) == (TRACE_ID, SPAN_ID, True)
    assert record["events"] == [{"name": "gen_ai.user.message", "time": 1700000000500000000,
                                 "attributes": {"content": "Why was I charged twice?"}}]
    assert record["resource"] == {"service.name": "billing-bot"}


def test_vigils_own_evaluation_events_sent_back_as_logs_are_dropped_not_kept_for_assembly(intake, redis_url):
    """Kept, each score would re-assemble the trace it scored and score it again."""
    body = otlp_logs_json(json_log("gen_ai.evaluation.result", "relevancy 0.8", traceId=TRACE_ID, spanId=SPAN_ID),
                          json_log("gen_ai.choice", "Yes.", traceId=TRACE_ID, spanId=SPAN_ID))

    status, _, _ = post(f"{intake.url}/v1/logs", body, "application/json")

    assert status == 200
    assert [r["events"][0]["name"] for r in queued(redis_url, "vigil.spans")] == ["gen_ai.choice"]


def test_a_logs_body_that_cannot_be_decoded_is_answered_400_and_another_content_type_415(intake, redis_url):
    garbage, _, answer = post(f"{intake.url}/v1/logs", b"\xff\x00 not protobuf", "application/x-protobuf")
    wrong_type, _, _ = post(f"{intake.url}/v1/logs", b"hello", "text/plain")

    assert (garbage, wrong_type) == (400, 415)
    assert "ExportLogsServiceRequest" in status_pb2.Status.FromString(answer).message
    assert queued(redis_url, "vigil.spans") == []


def test_when_redis_refuses_writes_a_logs_request_is_answered_503_with_retry_after(intake, redis_url):
    client = redis.Redis.from_url(redis_url)
    client.config_set("maxmemory", 1)
    try:
        status, headers, _ = post(f"{intake.url}/v1/logs", otlp_logs_json(
            json_log("gen_ai.user.message", "hi", traceId=TRACE_ID, spanId=SPAN_ID)), "application/json")
    finally:
        client.config_set("maxmemory", 0)

    assert status == 503 and headers["Retry-After"] == "2"
    assert queued(redis_url, "vigil.spans") == []
