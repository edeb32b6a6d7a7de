"""rediss:// means TLS for every Redis connection vigil makes: the SDK's shipper and the worker (its Celery
connection and its other clients), through a TLS front on the real redis-server; Sentinel URLs are refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from producers._transport import CeleryTransport
from schemas.broker import INGEST_QUEUE, broker_ssl
from tests.pipeline import WorkerProcess, make_turn, wait_drained
from tests.security.tls_proxy import TLSProxy, self_signed
from worker.store import connect

CONFIG = Path(__file__).parent.parent / "fixtures" / "pipeline.yaml"


@pytest.fixture
def tls(redis_url, tmp_path):
    cert, key = self_signed(tmp_path)
    port = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs["port"]
    with TLSProxy(port, cert, key) as proxy:
        yield proxy, f"rediss://127.0.0.1:{proxy.port}/0", cert


def test_the_sdk_shipper_speaks_tls_to_a_rediss_url(redis_url, tls):
    proxy, url, cert = tls
    shipper = CeleryTransport(f"{url}?ssl_ca_certs={cert}")
    try:
        shipper.send([make_turn(1)])
    finally:
        shipper.close()
    assert redis.Redis.from_url(redis_url).llen(INGEST_QUEUE) == 1
    assert proxy.handshakes >= 1 and proxy.failed_handshakes == 0


def test_a_rediss_url_verifies_the_server_certificate_by_default(redis_url, tls):
    _, url, _ = tls  # a self-signed certificate nobody said to trust
    shipper = CeleryTransport(url)
    with pytest.raises(Exception, match="(?i)certificate"):
        shipper.send([make_turn(1)])
    shipper.close()
    assert redis.Redis.from_url(redis_url).llen(INGEST_QUEUE) == 0


def test_a_worker_on_a_rediss_url_scores_turns_with_every_connection_over_tls(redis_url, tls, tmp_path):
    proxy, url, cert = tls
    turn = make_turn(1)
    shipper = CeleryTransport(f"{url}?ssl_ca_certs={cert}")
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


@pytest.mark.parametrize("url", ["sentinel://10.0.0.1:26379", "redis+sentinel://h:26379/0",
                                 "sentinel://a:26379;sentinel://b:26379"])
def test_a_sentinel_url_is_refused_saying_what_to_do(url):
    with pytest.raises(ValueError, match="REDIS_URL: Sentinel URLs are not supported; give the address of"):
        broker_ssl(url)


def test_vigil_worker_with_a_sentinel_url_fails_with_one_line(tmp_path):
    env = {**os.environ, "REDIS_URL": "sentinel://:secret@10.0.0.1:26379", "VIGIL_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "worker", "worker"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Sentinel URLs are not supported" in lines[0] and "secret" not in done.stderr


def test_tls_options_on_a_plain_url_are_refused_rather_than_ignored():
    with pytest.raises(ValueError, match="ssl_ca_certs given for a plain redis:// URL; use rediss://"):
        broker_ssl("redis://h:6379/0?ssl_ca_certs=/ca.pem")
