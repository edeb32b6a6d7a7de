"""Provider prefix caching: the cached prompt tokens a provider reports are read per judge call, priced at the
judge's cached price, stored in ``judge_calls`` and shown as a share in ``vigil report``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis
from rich.console import Console
from vigil.schemas import JudgeCall, JudgeConfig, JudgeUsage, Score, ScoreStatus
from vigil.schemas.rows import JudgeCallRow
from vigil.worker.judge.transport import JudgeTransport
from vigil.worker.report import build_report
from vigil.worker.report.text import print_report
from vigil.worker.sinks.write_queue import push
from vigil.worker.sinks.writer import Writer

from tests.judge_server import Reply, ScriptedJudge

STATIC = "You are a careful evaluator. " * 40  # a static system message well over any provider's minimum


def _config(base_url: str, **prices: float) -> JudgeConfig:
    return JudgeConfig(name="judge", base_url=base_url, model="m", **prices)


async def test_the_cached_tokens_a_provider_reports_are_kept_on_the_call_and_priced_at_the_cached_price(
        judge_server):
    judge_server.replies.append(Reply("yes", prompt_tokens=1000, completion_tokens=10, cached_tokens=800))
    transport = JudgeTransport(_config(judge_server.base_url, price_per_prompt_token=0.001,
                                  price_per_cached_prompt_token=0.0005, price_per_completion_token=0.002))
    try:
        [call] = (await transport.chat(step="s", messages=[{"role": "user", "content": "q"}])).calls
    finally:
        await transport.aclose()

    assert (call.prompt_tokens, call.cached_prompt_tokens) == (1000, 800)
    assert call.cost_usd == pytest.approx(200 * 0.001 + 800 * 0.0005 + 10 * 0.002)


async def test_without_a_cached_price_cached_tokens_cost_what_any_prompt_token_costs(judge_server):
    judge_server.replies.append(Reply("yes", prompt_tokens=1000, completion_tokens=0, cached_tokens=600))
    transport = JudgeTransport(_config(judge_server.base_url, price_per_prompt_token=0.001))
    try:
        [call] = (await transport.chat(step="s", messages=[{"role": "user", "content": "q"}])).calls
    finally:
        await transport.aclose()

    assert call.cached_prompt_tokens == 600 and call.cost_usd == pytest.approx(1.0)


async def test_an_endpoint_that_reports_no_cache_details_counts_no_cached_tokens(judge_server):
    judge_server.replies.append(Reply("yes", prompt_tokens=50))
    transport = JudgeTransport(_config(judge_server.base_url))
    try:
        [call] = (await transport.chat(step="s", messages=[{"role": "user", "content": "q"}])).calls
    finally:
        await transport.aclose()

    assert call.cached_prompt_tokens == 0


async def test_a_repeated_static_system_message_is_reported_cached_on_the_second_call():
    """The scripted server's provider-like usage: the prefix shared with an earlier request is cached."""
    with ScriptedJudge(lambda body: Reply("ok"), usage="chars") as server:
        transport = JudgeTransport(_config(server.base_url))
        try:
            first = await transport.chat(step="s", messages=[{"role": "system", "content": STATIC},
                                                             {"role": "user", "content": "first trace"}])
            second = await transport.chat(step="s", messages=[{"role": "system", "content": STATIC},
                                                              {"role": "user", "content": "second trace"}])
        finally:
            await transport.aclose()

    assert first.calls[0].cached_prompt_tokens == 0
    assert len(STATIC) // 4 <= second.calls[0].cached_prompt_tokens < second.calls[0].prompt_tokens


def test_usage_adds_up_the_cached_prompt_tokens_of_the_calls_made_not_of_reply_cache_hits():
    calls = [JudgeCall(step="a", model="m", prompt_tokens=100, cached_prompt_tokens=60),
             JudgeCall(step="b", model="m", prompt_tokens=100, cached_prompt_tokens=30),
             JudgeCall(step="b", model="m", prompt_tokens=100, cached_prompt_tokens=30, cached=True)]

    assert JudgeUsage.of(calls).cached_prompt_tokens == 90


def test_the_report_shows_the_share_of_prompt_tokens_served_from_the_prefix_cache(redis_url, store):
    score = Score(score_id="s1", trace_id="t1", project="p", agent="a", environment="prod", monitor="m",
                  scorer="answer_relevancy", scorer_version="1", status=ScoreStatus.SCORED, score=0.5,
                  trace_time=datetime.now(UTC))
    rows = [JudgeCallRow.of(JudgeCall(step="analyze", model="m", prompt_tokens=400, cached_prompt_tokens=300), 0,
                            score=score),
            JudgeCallRow.of(JudgeCall(step="reason", model="m", prompt_tokens=400, cached_prompt_tokens=100), 1,
                            score=score)]
    client = redis.Redis.from_url(redis_url)
    push(client, [("scores", [score]), ("judge_calls", rows)])
    Writer(client, store, writer_id="w", batch_age_s=0.05).run_once()

    now = datetime.now(UTC)
    report = build_report(store, start=now - timedelta(hours=1), end=now + timedelta(minutes=1), now=now)
    [judge] = report.judges
    console = Console(record=True, width=220)
    print_report(report, console)
    text = console.export_text()

    assert (judge.prompt_tokens, judge.cached_prompt_tokens, judge.cached_share) == (800, 400, 0.5)
    assert "prefix-cached" in text and "50%" in text
    assert report.model_dump(mode="json")["judges"][0]["cached_share"] == 0.5
