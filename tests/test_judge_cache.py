"""The judge reply cache, against the scripted server and a real Redis. Budgets (bytes in the process, a Redis of
its own) and the broker kept out of it: tests/test_cache_budget.py."""

from __future__ import annotations

import pytest
from vigil.schemas import JudgeConfig, JudgeUsage
from vigil.worker.judge.base import JudgeFailed
from vigil.worker.judge.cache import CachedReply, LocalReplyCache, cache_key
from vigil.worker.judge.transport import JudgeTransport

from tests.judge_server import Reply

MESSAGES = [{"role": "user", "content": "Is the sky blue?"}]
FORMAT = {"type": "json_object"}


@pytest.fixture
async def transport(judge_server, redis):
    judge_server.script = lambda body: Reply('{"verdict": "yes"}', prompt_tokens=50, completion_tokens=7)
    config = JudgeConfig(name="judge", base_url=judge_server.base_url, model="m", cache_ttl_s=600,
                         price_per_prompt_token=0.01)
    made = JudgeTransport(config, redis=redis, cache=LocalReplyCache(2**20))
    yield made
    await made.aclose()


async def test_an_identical_request_within_the_ttl_is_a_cached_call_that_never_reaches_the_judge(
        judge_server, transport):
    first = await transport.chat(step="s", messages=MESSAGES, response_format=FORMAT, cache_key_extra="ar@1")
    again = await transport.chat(step="s", messages=MESSAGES, response_format=FORMAT, cache_key_extra="ar@1")

    assert again.text == first.text
    assert len(judge_server.requests) == 1
    [hit] = again.calls
    assert (hit.status, hit.cached, hit.prompt_tokens, hit.cost_usd) == ("cached", True, 0, 0.0)
    usage = JudgeUsage.of(first.calls + again.calls)
    assert (usage.calls, usage.cache_hits, usage.prompt_tokens) == (1, 1, 50)


@pytest.mark.parametrize("change", [
    {"cache_key_extra": "ar@2"},
    {"messages": [{"role": "user", "content": "Is the sea blue?"}]},
    {"response_format": None},
], ids=["another scorer version", "another prompt", "another response format"])
async def test_a_request_that_differs_in_anything_that_shapes_the_reply_misses(judge_server, transport, change):
    request = {"step": "s", "messages": MESSAGES, "response_format": FORMAT, "cache_key_extra": "ar@1"}
    await transport.chat(**request)

    result = await transport.chat(**(request | change))

    assert [c.cached for c in result.calls] == [False]
    assert len(judge_server.requests) == 2


async def test_a_stored_reply_expires_after_cache_ttl_s():
    now = [1000.0]
    cache = LocalReplyCache(2**20, timer=lambda: now[0])
    await cache.put("k", CachedReply("yes"), 600)

    now[0] += 599
    assert await cache.get("k") == CachedReply("yes")
    now[0] += 2
    assert await cache.get("k") is None and cache.bytes == 0


async def test_failed_calls_are_not_cached(judge_server, transport):
    judge_server.replies.append(Reply.error(400, "bad"))
    with pytest.raises(JudgeFailed):
        await transport.chat(step="s", messages=MESSAGES)

    result = await transport.chat(step="s", messages=MESSAGES)

    assert [c.status for c in result.calls] == ["ok"]
