"""A turn changes only through its own run, whatever carries its content: GenAI log records (``/v1/logs``) sent
into stored turns through a real `vigil intake`, a real `vigil worker` and redis-server, with the scripted judge
server counting each turn's judge calls (a turn's calls are the requests whose prompt holds its answer).

A span's log records come with it, or before its trace is assembled. Victims are sent and scored first: a chat span
whose messages are log events, and an agent run under an HTTP server span. Then, knowing only their ids, an attacker
sends log records: a ``gen_ai.choice`` with another answer into the chat span; a
``gen_ai.client.inference.operation.details`` event making the HTTP span an agent run above the victim's; and the
victim's own records again, as an exporter's retry does. An honest late span comes with its own log records into
an assembled trace: its run is a turn of its own.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import redis
from vigil.worker.store import connect

from tests.judge_server import ScriptedJudge
from tests.pipeline import IntakeProcess
from tests.security.test_turn_ownership import (
    DEFAULT_KEY,
    EVIL,
    _attrs,
    _chat,
    _post,
    _reply,
    _span,
    calls,
    export,
    logged,
    scores,
    settled,
    stages,
    started,
    stored,
)

CHAT, NESTED, LATE = (uuid.uuid4().hex for _ in range(3))
ANSWERS = {CHAT: "Refunds take five working days.", NESTED: "Your order ships on Monday.",
           LATE: "Returns are free within 30 days."}
LATE_RUN = "Exchanges are free too."  # an honest late run's answer, its content in log records


def log_record(trace_id: str, span_id: str, event: str, at: int, **attributes: str) -> dict[str, Any]:
    return {"timeUnixNano": str(at), "traceId": trace_id, "spanId": span_id,
            "attributes": _attrs(event__name=event, **attributes)}


def send_logs(intake: IntakeProcess, *records: dict[str, Any], key: str = DEFAULT_KEY) -> None:
    answer = _post(f"{intake.url}/v1/logs", key=key, body={"resourceLogs": [{
        "resource": {"attributes": _attrs(service__name="parcel-bot")},
        "scopeLogs": [{"scope": {"name": "agent"}, "logRecords": list(records)}]}]})
    assert "partialSuccess" not in answer, answer


@pytest.fixture(scope="module")
def scenario(redis_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("log-ownership")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    env = {"VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_PARENT_WAIT_S": "1", "VIGIL_INTAKE_TOKEN": DEFAULT_KEY}
    ids = {trace: uuid.uuid4().hex[:16] for trace in ANSWERS}
    now = time.time_ns()
    chat_logs = [log_record(CHAT, ids[CHAT], "gen_ai.user.message", now, content="How long do refunds take?"),
                 log_record(CHAT, ids[CHAT], "gen_ai.choice", now + 1, content=ANSWERS[CHAT])]
    agent, llm = uuid.uuid4().hex[:16], uuid.uuid4().hex[:16]
    with ScriptedJudge(_reply) as judge:
        intake, worker = started(redis_server.url, home, judge, env)
        try:
            # the victims: a chat span whose messages are log records; an agent run under an HTTP server span
            send_logs(intake, *chat_logs)
            export(intake, _span(CHAT, ids[CHAT], name="chat m", gen_ai__operation__name="chat",
                                 gen_ai__request__model="m"))
            export(intake, {**_span(NESTED, ids[NESTED], name="POST /chat", http__request__method="POST",
                                    url__path="/chat"), "kind": 2},
                   _span(NESTED, agent, ids[NESTED], name="invoke_agent", gen_ai__operation__name="invoke_agent"),
                   _span(NESTED, llm, agent, name="chat", **_chat("When does my order ship?", ANSWERS[NESTED])))
            export(intake, _span(LATE, ids[LATE], name="chat", **_chat("Are returns free?", ANSWERS[LATE])))
            settled(redis_server.url, worker)
            before = {trace: calls(judge, answer) for trace, answer in ANSWERS.items()}

            # the attacks: another answer into the chat span; the HTTP span made an agent run above the victim's
            send_logs(intake, log_record(CHAT, ids[CHAT], "gen_ai.choice", now + 2, content=EVIL))
            send_logs(intake, log_record(NESTED, ids[NESTED], "gen_ai.client.inference.operation.details", now + 3,
                                         gen_ai__operation__name="invoke_agent",
                                         **{k: v for k, v in _chat("When does my order ship?", EVIL).items()
                                            if k.startswith(("gen_ai__input", "gen_ai__output"))}))
            send_logs(intake, *chat_logs)  # the victim's own records again: an exporter's retry
            # an honest late run into an assembled trace, its content in log records of its own span
            late = uuid.uuid4().hex[:16]
            send_logs(intake, log_record(LATE, late, "gen_ai.user.message", now + 4, content="And exchanges?"),
                      log_record(LATE, late, "gen_ai.choice", now + 5, content=LATE_RUN))
            export(intake, _span(LATE, late, name="chat m", gen_ai__operation__name="chat",
                                 gen_ai__request__model="m"))
            settled(redis_server.url, worker)
            after = {trace: calls(judge, answer) for trace, answer in ANSWERS.items()}
            assert worker.stop() == 0
        finally:
            intake.stop()
            worker.stop()
        evil_calls, late_calls = calls(judge, EVIL), calls(judge, LATE_RUN)
    store = connect(worker.dsn)
    yield {"ids": ids, "before": before, "after": after, "store": store, "evil_calls": evil_calls,
           "late": late, "late_calls": late_calls, "log": worker.output()}
    store.close()
    client.close()


def test_a_log_record_with_another_answer_for_a_stored_turns_span_is_a_conflict_and_the_turn_is_kept(scenario):
    assert stored(scenario, CHAT) == [{"span_id": scenario["ids"][CHAT], "output": ANSWERS[CHAT]}]
    assert scores(scenario, CHAT) == [scenario["ids"][CHAT]]
    assert scenario["after"][CHAT] == scenario["before"][CHAT] > 0  # neither the attack nor the retry re-scored it
    assert scenario["evil_calls"] == 0
    assert stages(scenario, CHAT, "conflict") == 1  # the retry of its own records is no conflict
    [line] = [line for line in logged(scenario, "log record") if line["trace_id"] == CHAT]
    assert (line["span_id"], line["sender"], line["project"]) == (scenario["ids"][CHAT], "127.0.0.1", "default")


def test_a_log_record_cannot_make_a_span_above_a_stored_turn_a_run_that_supersedes_it(scenario):
    assert [r["output"] for r in stored(scenario, NESTED)] == [ANSWERS[NESTED]]
    assert len(scores(scenario, NESTED)) == 1
    assert stages(scenario, NESTED, "superseded") == 0
    assert stages(scenario, NESTED, "conflict") == 1
    assert scenario["after"][NESTED] == scenario["before"][NESTED] > 0


def test_a_late_span_with_its_own_log_records_is_a_turn_of_its_own_beside_the_stored_one(scenario):
    assert stored(scenario, LATE) == [{"span_id": scenario["ids"][LATE], "output": ANSWERS[LATE]},
                                      {"span_id": scenario["late"], "output": LATE_RUN}]
    assert scenario["after"][LATE] == scenario["before"][LATE] > 0 and scenario["late_calls"] > 0
    assert stages(scenario, LATE, "conflict") == 0
