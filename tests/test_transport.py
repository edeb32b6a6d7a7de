"""The judge transport against the scripted server and a real Redis: accounting, retries, backoff, timeouts.

Retries sleep through an injected ``sleep`` that advances an injected clock, so a storm of 429s costs no wall
time and the retry age is exact.
"""

from __future__ import annotations

import json

import pytest
from vigil.schemas import JudgeConfig
from vigil.worker.judge.base import JudgeFailed
from vigil.worker.judge.limiter import RateLimits, RedisRateBackend
from vigil.worker.judge.transport import ModeRejected, JudgeTransport

from tests.judge_server import Reply

MESSAGES = [{"role": "user", "content": "Is the sky blue?"}]


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
async def make_transport(judge_server, redis):
    made: list[JudgeTransport] = []
    fake = FakeTime()

    def make(**settings) -> JudgeTransport:
        config = JudgeConfig(**({"name": "judge", "base_url": judge_server.base_url, "model": "m"} | settings))
        made.append(JudgeTransport(config, redis=redis, clock=fake.clock, sleep=fake.sleep, rand=lambda: 1.0))
        return made[-1]

    make.time = fake  # type: ignore[attr-defined]
    yield make
    for transport in made:
        await transport.aclose()


async def test_a_reply_is_one_ok_call_with_its_tokens_and_cost(judge_server, make_transport):
    judge_server.replies.append(Reply("yes", prompt_tokens=100, completion_tokens=20))
    transport = make_transport(price_per_prompt_token=0.001, price_per_completion_token=0.002)

    result = await transport.chat(step="s.step", messages=MESSAGES)

    assert result.text == "yes"
    [call] = result.calls
    assert (call.step, call.status, call.attempt, call.cached) == ("s.step", "ok", 1, False)
    assert (call.prompt_tokens, call.completion_tokens, call.cost_usd) == (100, 20, pytest.approx(0.14))


async def test_a_429_storm_without_retry_after_backs_off_exponentially_then_succeeds(judge_server, make_transport):
    judge_server.replies.extend([Reply.error(429)] * 3 + [Reply("yes")])

    result = await make_transport().chat(step="s", messages=MESSAGES)

    assert result.text == "yes"
    assert [(c.attempt, c.status) for c in result.calls] == [(1, "http_429"), (2, "http_429"), (3, "http_429"),
                                                             (4, "ok")]
    assert make_transport.time.sleeps == [0.5, 1.0, 2.0]


async def test_a_429_storm_with_retry_after_never_comes_back_earlier_than_asked(judge_server, make_transport):
    judge_server.replies.extend([Reply.error(429, headers={"Retry-After": "3"})] * 2
                                + [Reply.error(429, headers={"retry-after-ms": "250"}), Reply("yes")])

    result = await make_transport().chat(step="s", messages=MESSAGES)

    assert [c.status for c in result.calls] == ["http_429"] * 3 + ["ok"]
    assert make_transport.time.sleeps == [3.0, 3.0, 2.0]  # the third: backoff (2 s) is longer than 250 ms


async def test_retries_stop_at_max_retry_age_failing_with_the_error_type_and_every_attempt(judge_server,
                                                                                          make_transport):
    judge_server.script = lambda body: Reply.error(503, "overloaded")

    with pytest.raises(JudgeFailed) as failed:
        await make_transport(max_retry_age_s=10).chat(step="s", messages=MESSAGES)

    assert failed.value.error_type == "http_503"
    assert [c.attempt for c in failed.value.calls] == [1, 2, 3, 4, 5]  # slept 0.5+1+2+4; 8 more would pass 10
    assert {c.status for c in failed.value.calls} == {"http_503"}
    assert sum(make_transport.time.sleeps) <= 10


async def test_a_timeout_is_retried_and_recorded_as_a_timeout_call(judge_server, make_transport):
    judge_server.replies.extend([Reply("late", delay=2.0), Reply("yes")])

    # 1 s: the late reply times out; the prompt one answers in time on a loaded machine too
    result = await make_transport(timeout_s=1.0).chat(step="s", messages=MESSAGES)

    assert result.text == "yes"
    assert [c.status for c in result.calls] == ["timeout", "ok"]


async def test_a_judge_that_always_times_out_fails_as_timeout(judge_server, make_transport):
    judge_server.script = lambda body: Reply("late", delay=2.0)

    with pytest.raises(JudgeFailed) as failed:
        await make_transport(timeout_s=0.1, max_retry_age_s=1.0).chat(step="s", messages=MESSAGES)

    assert failed.value.error_type == "timeout"
    assert [c.status for c in failed.value.calls] == ["timeout", "timeout"]


async def test_a_bad_request_fails_at_once_without_retrying(judge_server, make_transport):
    judge_server.script = lambda body: Reply.error(400, "bad request")

    with pytest.raises(JudgeFailed) as failed:
        await make_transport().chat(step="s", messages=MESSAGES)

    assert failed.value.error_type == "http_400"
    assert len(failed.value.calls) == 1 and len(judge_server.requests) == 1


@pytest.mark.parametrize("reply, raised", [
    (Reply.error(400, "response_format type json_schema is unsupported"), ModeRejected),
    (Reply.error(500, "json_schema is not supported"), ModeRejected),
], ids=["400 about the format", "500 about the schema"])
async def test_a_refused_response_format_is_a_rejected_mode(judge_server, make_transport, reply, raised):
    judge_server.script = lambda body: reply

    with pytest.raises(raised):
        await make_transport().chat(step="s", messages=MESSAGES, response_format={"type": "json_object"})


async def test_a_context_overflow_with_a_response_format_fails_without_blaming_the_format(judge_server,
                                                                                          make_transport):
    judge_server.script = lambda body: Reply.error(400, "the request exceeds the available context size")

    with pytest.raises(JudgeFailed) as failed:
        await make_transport().chat(step="s", messages=MESSAGES, response_format={"type": "json_object"})
    assert failed.value.error_type == "http_400"


async def test_a_plain_500_with_a_response_format_is_retried(judge_server, make_transport):
    judge_server.replies.extend([Reply.error(500, "upstream hiccup"), Reply("{}")])

    result = await make_transport().chat(step="s", messages=MESSAGES, response_format={"type": "json_object"})

    assert [c.status for c in result.calls] == ["http_500", "ok"]


async def test_a_429_lowers_the_judges_rate_for_every_worker(judge_server, make_transport, redis):
    judge_server.replies.extend([Reply.error(429), Reply("yes")])
    other_worker = RedisRateBackend(redis, "judge", RateLimits(rpm=6000))

    await make_transport(rpm=6000).chat(step="s", messages=MESSAGES)

    assert await other_worker.factor() < 1.0


async def test_the_limiter_wait_is_reported_with_the_result(judge_server, make_transport):
    judge_server.script = lambda body: Reply("yes")
    transport = make_transport(rpm=60)  # one token held: the second call waits for the next

    first = await transport.chat(step="s", messages=MESSAGES)
    second = await transport.chat(step="s", messages=MESSAGES)

    assert first.limiter_wait_s < second.limiter_wait_s


async def test_the_request_is_the_one_the_openai_clients_create_sends(judge_server, make_transport):
    """The transport posts its own body through the client's plain ``post`` (no parameter transform): the server
    must see what ``chat.completions.create`` sends for the same arguments, body and credentials alike."""
    judge_server.script = lambda body: Reply("yes")
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "strict": True, "schema": {
        "type": "object", "properties": {"v": {"type": "string", "enum": ["yes", "no"]}}, "required": ["v"],
        "additionalProperties": False}}}
    messages = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Is it blue? ✓ «quoted»"}]
    transport = make_transport(temperature=0.3, max_tokens=77)

    await transport.chat(step="s", messages=messages, response_format=fmt)
    await transport.client.chat.completions.create(model="m", messages=messages, max_tokens=77, response_format=fmt,
                                                   temperature=0.3)

    ours, clients = judge_server.requests
    assert ours.body == clients.body
    assert list(ours.body) == list(clients.body)  # the same keys in the same order
    assert ours.headers["authorization"] == clients.headers["authorization"]
    assert ours.headers["content-type"] == clients.headers["content-type"] == "application/json"


@pytest.mark.parametrize("body", [
    "<html>upstream hiccup</html>",
    '{"id": "x", "object": "chat.completion"}',
    '{"choices": [{"message": {"content": 7}}]}',
], ids=["not JSON", "no choices", "content not text"])
async def test_a_200_that_is_not_a_chat_completion_fails_as_bad_response_at_once(judge_server, make_transport, body):
    judge_server.script = lambda request: Reply(body=body)

    with pytest.raises(JudgeFailed) as failed:
        await make_transport().chat(step="s", messages=MESSAGES)

    assert failed.value.error_type == "bad_response"
    assert [c.status for c in failed.value.calls] == ["bad_response"] and len(judge_server.requests) == 1


async def test_usage_without_a_total_or_cached_tokens_is_read_as_zero_where_missing(judge_server, make_transport):
    judge_server.script = lambda request: Reply(body=json.dumps({
        "choices": [{"message": {"role": "assistant", "content": "yes"}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": None}}))

    result = await make_transport(price_per_prompt_token=0.01).chat(step="s", messages=MESSAGES)

    [call] = result.calls
    assert (result.text, call.status, call.prompt_tokens, call.completion_tokens, call.cached_prompt_tokens) == (
        "yes", "ok", 30, 0, 0)
    assert call.cost_usd == pytest.approx(0.3)
