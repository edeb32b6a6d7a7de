"""Secrets never copied: an upstream error that echoes the caller's API key, a judge base URL with a password, a
Redis password. A real worker runs against a password-protected redis-server and a judge that echoes the key;
then its log, every row of every table, every OTLP export and the pause state are searched for the secrets."""

from __future__ import annotations

import pytest
import redis
import yaml
from redis.asyncio import Redis as AsyncRedis
from vigil.producers._sender import CelerySender
from vigil.schemas import JudgeConfig
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.judge.base import JudgePaused
from vigil.worker.judge.pause import PAUSED_KEY
from vigil.worker.judge.transport import JudgeTransport
from vigil.worker.redact import redact, remember, remember_environment
from vigil.worker.store import connect

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, make_turn, wait_drained

API_KEY = "sk-live-0123456789abcdefSECRET"
JUDGE_PASSWORD = "judge-pw-SECRET-42"
REDIS_PASSWORD = "redis-pw-SECRET-43"
SECRETS = (API_KEY, JUDGE_PASSWORD, REDIS_PASSWORD, "0123456789abcdefSECRET")
ECHO = f"upstream failed for api_key={API_KEY} (Authorization: Bearer {API_KEY})"


@pytest.mark.parametrize("text", [
    f"Incorrect API key provided: {API_KEY}.", f"Authorization: Bearer {API_KEY}", f"?api_key={API_KEY}&x=1",
    f"http://user:{JUDGE_PASSWORD}@judge:8080/v1", f"redis://:{REDIS_PASSWORD}@redis:6379/0",
    f'{{"password": "{REDIS_PASSWORD}"}}',
])
def test_redaction_hides_keys_tokens_and_url_credentials(text):
    assert not any(secret in redact(text) for secret in SECRETS)
    assert "***" in redact(text)


def test_ordinary_text_is_not_redacted():
    text = "The sky is blue; ask-me-anything sessions; token bucket; see https://example.com/docs"
    assert redact(text) == text


GATEWAY_KEY = "gw_live.Zq81Kk4R1xPzT"  # a gateway's key: no sk- prefix, no key=value around it when echoed


@pytest.mark.parametrize("shape", [
    "{key}", "invalid key {key}", "'{key}' is not valid", '{{"error": {{"message": "bad key", "key": "{key}"}}}}',
    "x-api-key header {key} rejected", "key:{key}", "<key>{key}</key>", "key ({key}) revoked",
    "Unauthorized for {key}.", "{key}{key}",
])
def test_a_configured_secret_is_redacted_by_value_whatever_the_shape_it_is_echoed_in(shape):
    remember(GATEWAY_KEY)

    assert GATEWAY_KEY not in redact(shape.format(key=GATEWAY_KEY))


def test_secret_named_variables_and_url_passwords_are_remembered_at_start():
    remember_environment({"ACME_GATEWAY_TOKEN": "tok-77aa-99bb", "REDIS_URL": "redis://:pw%2Fwith%2Fslash@r:6379/0",
                          "VIGIL_LOG_LEVEL": "INFO"})

    assert redact("tok-77aa-99bb and pw/with/slash") == "*** and ***"
    assert redact("level INFO") == "level INFO", "values of other variables are not secrets"


async def test_a_401_echoing_a_key_of_no_known_shape_pauses_the_judge_with_it_redacted(judge_server, redis_url,
                                                                                      monkeypatch):
    monkeypatch.setenv("VIGIL_TEST_GATEWAY_KEY", "Gw9Q2x7LmN4pR8sT")  # remembered when the transport reads it
    config = JudgeConfig(name="gw", base_url=judge_server.base_url, model="m", api_key_env="VIGIL_TEST_GATEWAY_KEY")

    reason, stored = await _paused_by_401(judge_server, redis_url, config,
                                          "gateway refused credential Gw9Q2x7LmN4pR8sT for this route")

    assert "gateway refused credential *** for this route" in reason
    assert b"Gw9Q2x7LmN4pR8sT" not in stored


async def _paused_by_401(judge_server, redis_url: str, config: JudgeConfig, echo: str) -> tuple[str, bytes]:
    """A judge that answers 401 with ``echo``: the pause's reason and the pause record stored in Redis."""
    judge_server.replies.append(Reply.error(401, echo))
    client = AsyncRedis.from_url(redis_url)
    transport = JudgeTransport(config, redis=client)
    try:
        with pytest.raises(JudgePaused) as paused:
            await transport.chat(step="s", messages=[{"role": "user", "content": "q"}])
        stored = await client.hget(PAUSED_KEY, config.name)
    finally:
        await transport.aclose()
        await client.aclose()
    return paused.value.reason, stored


async def test_a_401_that_echoes_the_key_pauses_the_judge_with_the_key_redacted(judge_server, redis_url, caplog):
    config = JudgeConfig(name="judge", base_url=judge_server.base_url, model="m")

    reason, stored = await _paused_by_401(judge_server, redis_url, config, f"Incorrect API key provided: {API_KEY}")

    assert "Incorrect API key provided: sk-***" in reason
    assert API_KEY not in reason and API_KEY.encode() not in stored


def test_no_secret_reaches_the_log_the_rows_the_spans_or_the_pause_state(tmp_path, otlp_collector):
    endpoint = otlp_collector.url
    server = EmbeddedRedis().start()
    try:
        admin = redis.Redis.from_url(server.url)
        admin.config_set("requirepass", REDIS_PASSWORD)
        url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{server.port}/0"
        with ScriptedJudge(lambda body: Reply.error(500, ECHO)) as judge:
            config = tmp_path / "vigil.yaml"
            config.write_text(yaml.safe_dump({
                "judges": [{"name": "llm", "kind": "openai", "model": "judge-model", "max_retry_age_s": 0.3,
                            "base_url": judge.base_url.replace("http://", f"http://vigil:{JUDGE_PASSWORD}@"),
                            "api_key_env": "VIGIL_TEST_JUDGE_KEY"}],
                "monitors": [{"name": "relevancy", "scorer": "answer_relevancy", "judge": "llm"}],
            }))
            shipper = CelerySender(url)  # its own connection: the test process's Celery app may hold another's
            shipper.send([make_turn(1), make_turn(2)])
            shipper.close()
            worker = WorkerProcess(url, tmp_path / "vigil", config, VIGIL_TEST_JUDGE_KEY=API_KEY,
                                   OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_BSP_SCHEDULE_DELAY="100",
                                   OTEL_METRIC_EXPORT_INTERVAL="500").start()
            try:
                wait_drained(url, worker)
            finally:
                stopped = worker.stop()  # asserted below: an assert here would hide why wait_drained failed
            assert stopped == 0, worker.output()[-3000:]
            assert len(judge.requests) >= 2, "the judge was called and echoed the key"
        redis_state = b"".join(admin.dump(key) or b"" for key in admin.scan_iter())
    finally:
        server.stop()

    store = connect(worker.dsn)
    try:
        _assert_nothing_secret(store, worker.output(), otlp_collector, redis_state)
    finally:
        store.close()  # a store left open would fail every later test of this process that opens another


def _assert_nothing_secret(store, log: str, otlp_collector, redis_state: bytes) -> None:
    scores = store.query("SELECT status, reason FROM scores FINAL").result_rows
    # the upstream text reached a row, redacted (under load a turn may end otherwise too: a retry past its age)
    assert any(status == "failed" and "api_key=***" in reason for status, reason in scores), scores
    text_columns = store.query(
        "SELECT c.table, c.name FROM system.columns AS c JOIN system.tables AS t ON c.database = t.database AND "
        "c.table = t.name WHERE c.database = currentDatabase() AND t.engine NOT LIKE '%View' AND "
        "(c.type LIKE '%String%' OR c.type LIKE 'Map%') AND c.type NOT LIKE '%AggregateFunction%'").result_rows
    assert ("scores", "reason") in text_columns and ("judge_calls", "status") in text_columns
    rows = "".join(repr(store.query(f"SELECT `{column}` FROM `{table}`").result_rows) for table, column in text_columns)
    for secret in SECRETS:
        assert secret not in log, f"{secret} in the worker log"
        assert secret not in rows, f"{secret} in a ClickHouse row"
        assert not any(secret.encode() in body for body in otlp_collector.bodies()), f"{secret} in an OTLP export"
        assert secret.encode() not in redis_state, f"{secret} in Redis"
    assert otlp_collector.bodies(), "spans were exported"
