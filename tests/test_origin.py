"""The origin marker at the source: how an agent reads it from vigil's request, records it on its turn (the SDK
hook and the GenAI span processor), and how vigil's own calls to an agent carry it."""

from __future__ import annotations

import pytest
from vigil.producers import origin_of
from vigil.schemas import ORIGIN_HEADER, Turn
from vigil.worker.scorers.multi_turn import AgentEndpoint, OpenAIAgent

from tests.judge_server import Reply, ScriptedJudge
from tests.test_otel_producer import SEMCONV, traced
from tests.test_sdk import make_monitor, turns  # noqa: F401 - the fixture is shared


@pytest.mark.parametrize(("headers", "metadata", "origin"), [
    ({"X-Vigil-Origin": "follow_up"}, None, "follow_up"),
    ({"x-vigil-origin": "PROBE"}, None, "probe"),
    ({}, {"vigil_origin": "probe"}, "probe"),
    ({"Accept": "application/json"}, {"user": "42"}, "live"),
    ({"X-Vigil-Origin": "anything-else"}, None, "live"),
    (None, None, "live"),
])
def test_an_agent_reads_the_origin_from_the_request_header_or_the_openai_metadata(headers, metadata, origin):
    assert origin_of(headers, metadata) == origin


def test_a_turn_without_an_origin_from_an_older_sender_is_live_and_an_unknown_origin_is_refused():
    turn = {"trace_id": "t", "agent": "a", "input": [{"role": "user", "content": "q"}], "output": "a"}
    assert Turn.model_validate(turn).origin == "live"
    with pytest.raises(ValueError, match="origin"):
        Turn.model_validate(turn | {"origin": "robot"})


def test_the_sdk_hook_records_the_origin_an_agent_passes_to_capture(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    monitor.capture(input="q", output="a", origin=origin_of({"X-Vigil-Origin": "follow_up"}))
    assert monitor.flush(timeout=10)

    assert [Turn.model_validate(wire).origin for wire in turns(redis_url)] == ["follow_up"]


def test_the_span_processor_records_the_origin_set_on_the_agents_span(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    traced(monitor, SEMCONV | {"vigil.origin": "probe"})
    assert monitor.flush(timeout=10)

    assert [Turn.model_validate(wire).origin for wire in turns(redis_url)] == ["probe"]


@pytest.mark.parametrize("origin", ["follow_up", "probe"])
async def test_vigils_calls_to_the_agent_carry_the_origin_header_and_metadata(origin):
    with ScriptedJudge(lambda body: Reply(content="an answer")) as agent_server:
        agent = (AgentEndpoint(base_url=agent_server.base_url).open(origin) if origin == "follow_up"
                 else OpenAIAgent(agent_server.base_url, origin="probe"))
        try:
            assert await agent([{"role": "user", "content": "q"}]) == "an answer"
        finally:
            await agent.aclose()
    [request] = agent_server.requests
    assert request.body["metadata"] == {"vigil_origin": origin}
    assert request.headers[ORIGIN_HEADER.lower()] == origin
