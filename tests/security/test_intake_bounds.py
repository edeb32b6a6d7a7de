"""What one sender can make a real `vigil intake` process spend: credentials and the declared length are checked
from the headers before a body is read, a body is counted as it streams and inflated within the same budget, the
connections are capped, and `/v1/turns` is bounded by items as well as bytes. Each test measures the process (its
resident memory or CPU seconds, from psutil) or what reached Redis, and checks that good traffic still gets in."""

from __future__ import annotations

import functools
import gzip
import json
import socket
import threading
import time
import urllib.request

import pytest
import redis

from tests.abuse import cpu_seconds, held_connections, raw_request, rss_mb, wait_until
from tests.pipeline import IntakeProcess, make_turn
from tests.test_intake import json_span, otlp_json, post, queued

TOKEN = "abuse-test-token-0123456789"
MB = 2**20


@functools.cache
def bomb() -> bytes:
    """250 KB on the wire, 256 MB inflated: made when a test asks (a third of a CPU second), not when every xdist
    worker collects this module."""
    return gzip.compress(bytes(256 * MB))


@pytest.fixture(scope="module")
def intake(redis_server, tmp_path_factory):
    """One intake for the tests of its budgets (each measures it before and after, on a flushed Redis: ``redis_url``):
    what one sender did must not change what the next one gets."""
    process = IntakeProcess(redis_server.url, tmp_path_factory.mktemp("intake"), VIGIL_INTAKE_TOKEN=TOKEN,
                            VIGIL_INTAKE_MAX_BYTES=str(MB), VIGIL_INTAKE_MAX_CONNECTIONS="12",
                            VIGIL_INTAKE_MAX_TURNS="100")
    yield process.start()
    process.stop()


def _auth(**headers: str) -> dict[str, str]:
    return {"Host": "127.0.0.1", "Authorization": f"Bearer {TOKEN}", **headers}


def _good_span_is_kept(intake: IntakeProcess, redis_url: str) -> None:
    status, _, _ = post(f"{intake.url}/v1/traces", otlp_json(json_span()), "application/json",
                        Authorization=f"Bearer {TOKEN}")
    assert status == 200
    assert len(queued(redis_url, "vigil.spans")) == 1


def test_unauthenticated_requests_declaring_1_gib_bodies_are_refused_from_their_headers(intake, redis_url):
    before = rss_mb(intake.process.pid)

    answers = [raw_request(intake.port, "POST", "/v1/traces",
                           {"Host": "127.0.0.1", "Content-Type": "application/x-protobuf",
                            "Content-Length": str(2**30)}, bytes(256 * 1024)) for _ in range(8)]

    assert {status for status, _, _ in answers} == {401}
    assert all(headers.get("connection") == "close" for _, headers, _ in answers)
    assert rss_mb(intake.process.pid) - before < 30
    _good_span_is_kept(intake, redis_url)


def test_gzip_bombs_without_a_token_are_refused_without_being_inflated_and_healthz_keeps_answering(intake):
    """16 bombs (4 GB inflated) from 8 connections at once (under the cap): refused 401 from the headers; the intake
    never inflates them, not even after it has answered (aiohttp would read a refused body on, to reuse the
    connection: 6.9 CPU seconds here before)."""
    payload = bomb()
    before = cpu_seconds(intake.process.pid)
    statuses, health = [], []

    def bombs() -> None:
        for _ in range(2):
            statuses.append(raw_request(intake.port, "POST", "/v1/traces",
                                        {"Host": "127.0.0.1", "Content-Type": "application/x-protobuf",
                                         "Content-Encoding": "gzip", "Content-Length": str(len(payload))}, payload)[0])

    threads = [threading.Thread(target=bombs) for _ in range(8)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        with urllib.request.urlopen(f"{intake.url}/healthz", timeout=30) as response:
            health.append(response.status)
    for thread in threads:
        thread.join()

    assert statuses == [401] * 16
    assert set(health) == {200}
    assert cpu_seconds(intake.process.pid) - before < 2.0


def test_an_authenticated_gzip_bomb_stops_inflating_at_the_budget(intake, redis_url):
    payload = bomb()
    before_cpu, before_rss = cpu_seconds(intake.process.pid), rss_mb(intake.process.pid)

    status, _, answer = raw_request(intake.port, "POST", "/v1/traces",
                                    _auth(**{"Content-Type": "application/json", "Content-Encoding": "gzip",
                                             "Content-Length": str(len(payload))}), payload)

    assert status == 413 and b"over 1048576 bytes" in answer
    assert cpu_seconds(intake.process.pid) - before_cpu < 1.0
    assert rss_mb(intake.process.pid) - before_rss < 30
    assert queued(redis_url, "vigil.spans") == []


def test_a_declared_length_over_the_budget_is_answered_before_any_body_is_sent(intake, redis_url):
    status, headers, _ = raw_request(intake.port, "POST", "/v1/traces",
                                     _auth(**{"Content-Type": "application/json", "Content-Length": str(2**30)}))

    assert status == 413 and headers.get("connection") == "close"
    assert queued(redis_url, "vigil.spans") == []


def test_an_authenticated_sender_still_sending_a_body_over_the_budget_reads_the_413_not_a_reset(intake, redis_url):
    """A client writes its whole body before it reads the answer (urllib, the SDK's sender). Here the rest of a
    3-budget body follows after the intake has had time to refuse it: had the intake closed the connection on the
    unread rest, the rest would meet a reset (BrokenPipe or ConnectionReset) and the client could not know to send
    less. Bodies up to a few budgets from a sender with the token are drained, unkept, so it reads the 413."""
    first, rest = bytes(2 * MB), bytes(MB)
    head = ("POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(first) + len(rest)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", intake.port), timeout=30) as sock:
        sock.sendall(head + first)
        time.sleep(0.5)  # the window in which a client is still writing when the intake has already answered
        sock.sendall(rest)
        answer = sock.recv(200)

    assert answer.startswith(b"HTTP/1.1 413")
    assert queued(redis_url, "vigil.spans") == []
    _good_span_is_kept(intake, redis_url)


def test_a_chunked_body_is_refused_once_it_streams_past_the_budget(intake, redis_url):
    chunk = b"%x\r\n%s\r\n" % (256 * 1024, b" " * (256 * 1024))

    status, _, _ = raw_request(intake.port, "POST", "/v1/traces",
                               _auth(**{"Content-Type": "application/json", "Transfer-Encoding": "chunked"}),
                               chunk * 5 + b"0\r\n\r\n")

    assert status == 413
    assert queued(redis_url, "vigil.spans") == []


def test_connections_over_the_cap_are_answered_503_with_retry_after_and_served_again_once_closed(intake, redis_url):
    logged = len(intake.output())
    with held_connections(intake.port, 12):
        status, headers, _ = raw_request(intake.port, "GET", "/healthz", {"Host": "127.0.0.1"})
        assert status == 503 and headers["retry-after"] == "1"

    assert "connection refused: at the connection cap" in intake.output()[logged:]
    wait_until(lambda: raw_request(intake.port, "GET", "/healthz", {"Host": "127.0.0.1"})[0] == 200,
               what="the held connections to be released")
    _good_span_is_kept(intake, redis_url)


def test_turns_are_bounded_by_items_as_well_as_bytes(intake, redis_url):
    junk = json.dumps([{}] * 5000).encode()  # 15 KB: far under the byte budget

    status, _, answer = post(f"{intake.url}/v1/turns", junk, "application/json", Authorization=f"Bearer {TOKEN}")
    ok, _, _ = post(f"{intake.url}/v1/turns", json.dumps([make_turn(i) for i in range(100)]).encode(),
                    "application/json", Authorization=f"Bearer {TOKEN}")

    assert status == 413 and "5000 turns in one request, over VIGIL_INTAKE_MAX_TURNS (100)" in answer.decode()
    assert ok == 200 and len(queued(redis_url, "vigil.ingest")) == 100


@pytest.mark.parametrize("path", ["/v1/turns", "/v1/traces"])
def test_json_nested_deeper_than_the_parser_goes_is_answered_400_not_500(intake, path):
    deep = b"[" * 100_000 + b"]" * 100_000 if path == "/v1/turns" else b'{"a":' * 50_000 + b"1" + b"}" * 50_000

    status, _, answer = post(f"{intake.url}{path}", deep, "application/json", Authorization=f"Bearer {TOKEN}")

    assert status == 400 and b"nested too deeply" in answer


def test_an_empty_token_means_no_token_and_is_warned_about_beyond_loopback(redis_url, tmp_path):
    process = IntakeProcess(redis_url, tmp_path, VIGIL_INTAKE_TOKEN="").start("--host", "0.0.0.0")
    try:
        status, _, _ = post(f"{process.url}/v1/traces", otlp_json(json_span()), "application/json")
    finally:
        process.stop()

    assert status == 200 and len(queued(redis_url, "vigil.spans")) == 1
    assert "listening beyond loopback without a token (VIGIL_INTAKE_TOKEN is empty, which means no token)" \
        in process.output()


def test_no_warning_on_loopback_without_a_token(redis_url, tmp_path):
    process = IntakeProcess(redis_url, tmp_path).start()
    process.stop()

    assert "without a token" not in process.output()
    assert redis.Redis.from_url(redis_url).ping()
