"""The checks every served page and the intake make before spending on a request (``vigil.worker.serving``):
bodies within a byte budget, inflated piecewise; the Host header; credentials."""

from __future__ import annotations

import gzip
import threading
import urllib.request
import zlib

import pytest
from vigil.worker.serving import (
    BodyTooLarge,
    GuardedHandler,
    GuardedServer,
    Inflater,
    UnreadableBody,
    UnsupportedEncoding,
    allowed_hosts,
    check_declared,
    credential_ok,
    host_allowed,
)

from tests.abuse import held_connections, raw_request, wait_until

MB = 2**20


def test_a_gzip_bomb_is_refused_after_inflating_at_most_the_budget():
    bomb = gzip.compress(bytes(200 * MB))  # 200 KB on the wire
    inflater = Inflater("gzip", 1 * MB)

    with pytest.raises(BodyTooLarge):
        for start in range(0, len(bomb), 65536):
            inflater.feed(bomb[start:start + 65536])

    assert len(inflater._out) <= 1 * MB


@pytest.mark.parametrize("encoding,compress", [
    pytest.param("gzip", gzip.compress, id="gzip"),
    pytest.param("deflate", zlib.compress, id="deflate (zlib)"),
    pytest.param(None, lambda body: body, id="identity"),
])
def test_a_body_within_the_budget_comes_back_whole_in_any_encoding(encoding, compress):
    body = b"".join(b"span %d " % i for i in range(50_000))
    wire = compress(body)
    inflater = Inflater(encoding, len(body))

    for start in range(0, len(wire), 1000):
        inflater.feed(wire[start:start + 1000])

    assert inflater.finish() == body


def test_received_bytes_count_against_the_budget_even_uncompressed():
    inflater = Inflater(None, 10)
    inflater.feed(b"0123456789")
    with pytest.raises(BodyTooLarge):
        inflater.feed(b"x")


@pytest.mark.parametrize("wire,encoding,error", [
    pytest.param(b"not gzip", "gzip", UnreadableBody, id="corrupt gzip"),
    pytest.param(gzip.compress(b"x" * 1000)[:20], "gzip", UnreadableBody, id="truncated gzip"),
    pytest.param(b"x", "br", UnsupportedEncoding, id="brotli"),
])
def test_a_body_that_cannot_be_inflated_says_why(wire, encoding, error):
    with pytest.raises(error):
        inflater = Inflater(encoding, MB)
        inflater.feed(wire)
        inflater.finish()


@pytest.mark.parametrize("declared,error", [
    pytest.param("1073741824", BodyTooLarge, id="1 GiB declared"),
    pytest.param("-1", UnreadableBody, id="negative"),
    pytest.param("lots", UnreadableBody, id="not a number"),
])
def test_a_declared_length_is_refused_before_anything_is_read(declared, error):
    with pytest.raises(error):
        check_declared(declared, MB)


def test_no_declared_length_is_left_to_the_streamed_count():
    assert check_declared(None, MB) is None
    assert check_declared("100", MB) == 100


@pytest.mark.parametrize("header,allowed", [
    pytest.param("127.0.0.1:8765", True, id="loopback address with port"),
    pytest.param("localhost", True, id="localhost"),
    pytest.param("[::1]:8765", True, id="IPv6 loopback"),
    pytest.param("LOCALHOST:1", True, id="case"),
    pytest.param("attacker.example:8765", False, id="a rebinding DNS name"),
    pytest.param("127.0.0.1.attacker.example", False, id="a name that starts like loopback"),
    pytest.param("", False, id="empty"),
    pytest.param(None, True, id="no Host (HTTP/1.0, not a browser)"),
])
def test_a_loopback_page_answers_only_to_loopback_names(header, allowed):
    assert host_allowed(header, allowed_hosts("127.0.0.1")) is allowed


def test_further_host_names_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("VIGIL_ALLOWED_HOSTS", "vigil.internal, review.example")

    hosts = allowed_hosts("0.0.0.0")

    assert host_allowed("review.example:443", hosts) and host_allowed("vigil.internal", hosts)
    assert not host_allowed("0.0.0.0", hosts)


def test_an_empty_expected_credential_accepts_nothing():
    assert not credential_ok("", "")
    assert credential_ok("Bearer abc", "Bearer abc") and not credential_ok("Bearer abd", "Bearer abc")


class _Echo(GuardedHandler):
    def do_POST(self) -> None:
        try:
            body = self.read_body(1000)
        except BodyTooLarge:
            self.send_error(413)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST


@pytest.fixture
def echo():
    server = GuardedServer(("127.0.0.1", 0), _Echo, max_connections=3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_guarded_server_refuses_a_connection_over_its_cap_and_serves_again_once_one_closes(echo):
    port = echo.server_address[1]
    with held_connections(port, 3):
        status, headers, _ = raw_request(port, "GET", "/", {"Host": "127.0.0.1"})
        assert (status, headers["retry-after"]) == (503, "1")
    wait_until(lambda: echo.open_connections == 0, what="the held connections to be released")
    status, _, _ = raw_request(port, "GET", "/", {"Host": "127.0.0.1", "Content-Length": "0"})
    assert status == 200 and echo.refused == 1


def test_a_guarded_server_refuses_a_foreign_host_before_the_handler_runs(echo):
    port = echo.server_address[1]

    status, _, body = raw_request(port, "POST", "/", {"Host": "attacker.example", "Content-Length": "3"}, b"abc")

    assert status == 403 and b"Host" in body


def test_a_chunked_body_is_counted_as_it_streams(echo):
    port = echo.server_address[1]
    chunk = b"%x\r\n%s\r\n" % (600, b"a" * 600)

    status, _, _ = raw_request(port, "POST", "/", {"Host": "127.0.0.1", "Transfer-Encoding": "chunked"},
                               chunk + chunk + b"0\r\n\r\n")
    ok, _, body = raw_request(port, "POST", "/", {"Host": "127.0.0.1", "Transfer-Encoding": "chunked"},
                              chunk + b"0\r\n\r\n")

    assert status == 413
    assert (ok, body) == (200, b"a" * 600)


def test_a_gzip_body_is_inflated_for_the_handler(echo):
    port = echo.server_address[1]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=gzip.compress(b"hello"),
                                     headers={"Content-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.read() == b"hello"
