"""rediss:// means TLS for every Redis connection vigil makes: the SDK's shipper and the worker (its Celery
connection and its other clients) and the intake, through a TLS front on the real redis-server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from vigil.producers._sender import CelerySender
from vigil.schemas.broker import INGEST_QUEUE, broker_ssl
from vigil.worker.store import connect

from tests.pipeline import IntakeProcess, WorkerProcess, make_turn, wait_drained
from tests.security.tls_proxy import TLSProxy, self_signed
from tests.test_intake import post

CONFIG = Path(__file__).parent.parent / "fixtures" / "pipeline.yaml"


@pytest.fixture
def tls(redis_url, tmp_path):
    cert, key = self_signed(tmp_path)
    port = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs["port"]
    with TLSProxy(port, cert, key) as proxy:
        yield proxy, f"rediss://127.0.0.1:{proxy.port}/0", cert


def test_the_sdk_shipper_speaks_tls_to_a_rediss_url(redis_url, tls):
    proxy, url, cert = tls
    shipper = CelerySender(f"{url}?ssl_ca_certs={cert}")
    try:
        shipper.send([make_turn(1)])
    finally:
        shipper.close()
    assert redis.Redis.from_url(redis_url).llen(INGEST_QUEUE) == 1
    assert proxy.handshakes >= 1 and proxy.failed_handshakes == 0


def test_a_rediss_url_verifies_the_server_certificate_by_default(redis_url, tls):
    _, url, _ = tls  # a self-signed certificate nobody said to trust
    shipper = CelerySender(url)
    with pytest.raises(Exception, match="(?i)certificate"):
        shipper.send([make_turn(1)])
    shipper.close()
    assert redis.Redis.from_url(redis_url).llen(INGEST_QUEUE) == 0


def test_a_worker_on_a_rediss_url_scores_turns_with_every_connection_over_tls(redis_url, tls, tmp_path):
    proxy, url, cert = tls
    turn = make_turn(1)
    shipper = CelerySender(f"{url}?ssl_ca_certs={cert}")
    shipper.send([turn])
    shipper.close()
    worker = WorkerProcess(f"{url}?ssl_ca_certs={cert}", tmp_path / "vigil", CONFIG).start()
    try:
        wait_drained(redis_url, worker)
    finally:
        assert worker.stop() == 0
    scored = connect(worker.dsn).query("SELECT trace_id FROM scores FINAL").result_rows
    assert (turn["trace_id"],) in scored
    assert proxy.failed_handshakes == 0, "some connection spoke plaintext to the TLS port"
    assert proxy.handshakes >= 3  # the shipper, Celery's connections, the worker's own clients


def test_the_intake_publishes_over_tls_to_a_rediss_url(redis_url, tls, tmp_path):
    proxy, url, cert = tls
    # no ssl_* option in the URL (kombu would read those itself): the default trust store, here the test's CA
    intake = IntakeProcess(url, tmp_path, SSL_CERT_FILE=str(cert)).start()
    try:
        status, _, _ = post(f"{intake.url}/v1/turns", json.dumps([make_turn(1)]).encode(), "application/json")
    finally:
        intake.stop()
    assert status == 200
    assert redis.Redis.from_url(redis_url).llen(INGEST_QUEUE) == 1
    assert proxy.handshakes >= 1 and proxy.failed_handshakes == 0, "the intake spoke plaintext to the TLS port"


def test_tls_options_on_a_plain_url_are_refused_rather_than_ignored():
    with pytest.raises(ValueError, match="ssl_ca_certs given for a plain redis:// URL; use rediss://"):
        broker_ssl("redis://h:6379/0?ssl_ca_certs=/ca.pem")
