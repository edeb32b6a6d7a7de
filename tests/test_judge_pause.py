"""Pausing a judge on 401/402/404, against the scripted server and a real Redis; ``vigil judge`` commands."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest
from click.testing import CliRunner
from redis.asyncio import Redis
from vigil.schemas import JudgeConfig
from vigil.worker.cli import main
from vigil.worker.judge.base import JudgePaused
from vigil.worker.judge.pause import is_paused, pause, paused_judges
from vigil.worker.judge.transport import JudgeTransport

from tests.judge_server import Reply

MESSAGES = [{"role": "user", "content": "Is the sky blue?"}]


@pytest.fixture
async def transport(judge_server, redis):
    config = JudgeConfig(name="judge", base_url=judge_server.base_url, model="m", api_key_env="VIGIL_TEST_KEY")
    made = JudgeTransport(config, redis=redis)
    yield made
    await made.aclose()


@pytest.mark.parametrize("status", [401, 402, 404])
async def test_a_refused_credential_or_model_pauses_the_judge_and_later_calls_fail_fast(
        judge_server, transport, redis, status):
    judge_server.replies.append(Reply.error(status, "no"))

    with pytest.raises(JudgePaused):
        await transport.chat(step="s", messages=MESSAGES)
    with pytest.raises(JudgePaused) as again:
        await transport.chat(step="s", messages=MESSAGES)

    assert len(judge_server.requests) == 1  # the second call never reached the judge
    assert again.value.reason.startswith(f"HTTP {status}")
    assert (await is_paused(redis, "judge")).reason.startswith(f"HTTP {status}")


async def test_work_waits_while_paused_and_resume_lets_all_of_it_through_once(judge_server, transport, redis_url):
    """Given five queued work items and a judge that answers 401 once,
    when the worker requeues what is paused and an operator runs ``vigil judge resume``,
    then every item is answered exactly once and nothing is failed or lost."""
    judge_server.replies.append(Reply.error(401, "bad key"))
    judge_server.script = lambda body: Reply(body["messages"][0]["content"])
    queue, done, requeued = deque(f"item-{i}" for i in range(5)), [], 0

    while queue and requeued < 5:
        item = queue.popleft()
        try:
            done.append((await transport.chat(step="s", messages=[{"role": "user", "content": item}])).text)
        except JudgePaused:
            queue.append(item)  # the worker requeues it with a countdown
            requeued += 1
    result = await asyncio.to_thread(CliRunner().invoke, main, ["judge", "resume", "judge"],
                                     env={"REDIS_URL": redis_url})
    while queue:
        item = queue.popleft()
        done.append((await transport.chat(step="s", messages=[{"role": "user", "content": item}])).text)

    assert result.exit_code == 0 and "resumed" in result.output
    assert sorted(done) == [f"item-{i}" for i in range(5)]


async def test_a_fixed_configuration_lifts_the_pause_by_itself(judge_server, redis, monkeypatch):
    judge_server.script = lambda body: Reply("yes")
    config = JudgeConfig(name="judge", base_url=judge_server.base_url, model="m", api_key_env="VIGIL_TEST_KEY")
    monkeypatch.setenv("VIGIL_TEST_KEY", "revoked")
    await pause(redis, "judge", "HTTP 401: bad key", fingerprint=JudgeTransport(config, redis=redis).fingerprint)

    monkeypatch.setenv("VIGIL_TEST_KEY", "rotated")
    fixed = JudgeTransport(config, redis=redis)
    result = await fixed.chat(step="s", messages=MESSAGES)
    await fixed.aclose()

    assert result.text == "yes"
    assert await paused_judges(redis) == {}


async def test_a_judge_paused_twice_keeps_its_first_reason_and_time(redis):
    await pause(redis, "judge", "HTTP 401: first", now=100.0)
    await pause(redis, "judge", "HTTP 404: second", now=200.0)

    record = await is_paused(redis, "judge")

    assert (record.reason, record.since) == ("HTTP 401: first", 100.0)


def test_judge_status_shows_each_paused_judge_with_reason_and_since(redis_url):
    async def setup() -> None:
        client = Redis.from_url(redis_url)
        await pause(client, "gpt", "HTTP 402: quota exhausted", now=1_700_000_000.0)
        await client.aclose()
    asyncio.run(setup())

    result = CliRunner().invoke(main, ["judge", "status"], env={"REDIS_URL": redis_url})

    assert result.exit_code == 0
    assert "gpt" in result.output and "paused" in result.output and "HTTP 402: quota" in result.output
    assert "2023-11-14 22:13:20" in result.output


def test_judge_commands_say_plainly_when_redis_is_not_configured():
    result = CliRunner().invoke(main, ["judge", "status"], env={"REDIS_URL": ""})

    assert result.exit_code == 2 and "REDIS_URL is not set" in result.output


async def test_a_401_pause_names_the_variable_the_key_is_read_from_and_that_it_is_not_set(
        judge_server, transport, monkeypatch):
    monkeypatch.delenv("VIGIL_TEST_KEY", raising=False)
    judge_server.replies.append(Reply.error(401, "Incorrect API key provided"))

    with pytest.raises(JudgePaused) as paused:
        await transport.chat(step="s", messages=MESSAGES)

    assert paused.value.reason.startswith("HTTP 401: ") and "Incorrect API key provided" in paused.value.reason
    assert paused.value.reason.endswith("(the key is read from VIGIL_TEST_KEY, which is not set)")


async def test_calls_in_flight_that_all_meet_the_401_log_the_pause_once(judge_server, transport, logs):
    judge_server.script = lambda body: Reply.error(401, "bad key", delay=0.2)

    outcomes = await asyncio.gather(*(transport.chat(step="s", messages=MESSAGES) for _ in range(5)),
                                    return_exceptions=True)

    assert all(isinstance(outcome, JudgePaused) for outcome in outcomes)
    assert [entry["event"] for entry in logs].count("judge_paused") == 1


def test_judge_status_shows_the_last_error_each_judge_answered_with(judge_server, redis_url, monkeypatch):
    """Given a judge whose key is unset and whose server answers 401, when it is called once,
    then `vigil judge status` shows the refusal, its time and the variable the key is read from."""
    monkeypatch.delenv("VIGIL_TEST_KEY", raising=False)
    judge_server.replies.append(Reply.error(401, "Incorrect API key provided"))
    config = JudgeConfig(name="gpt", base_url=judge_server.base_url, model="m", api_key_env="VIGIL_TEST_KEY")

    async def call() -> None:
        client = Redis.from_url(redis_url)
        made = JudgeTransport(config, redis=client)
        with pytest.raises(JudgePaused):
            await made.chat(step="s", messages=MESSAGES)
        await made.aclose()
        await client.aclose()
    asyncio.run(call())

    result = CliRunner().invoke(main, ["judge", "status"], env={"REDIS_URL": redis_url})

    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("gpt: last error")]
    assert "UTC, http_401: HTTP 401: " in line and "Incorrect API key provided" in line
    assert "read from VIGIL_TEST_KEY, which is not set" in line
