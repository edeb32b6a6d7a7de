"""Conversations chained by response ids (``vigil.schemas.chains``, ``vigil.worker.assembly.chains``): each agent run
is a trace of its own, its model calls chain each other by response id (the Responses API's ``previous_response_id``
written as ``gen_ai.conversation.id``, as Microsoft Agent Framework does) and each run names the last response of the
run before it. The rule on hand-made spans, the links on a real Redis, and the whole path through a real
``vigil intake`` and ``vigil worker``, with a second project (its own key) naming the first project's responses."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import redis
from vigil.schemas.chains import join
from vigil.schemas.spans import assembly
from vigil.worker.assembly.chains import (
    EVICTED,
    LINK_OVERHEAD,
    LINKS,
    LINKS_BYTES,
    chain_sessions,
)
from vigil.worker.store import connect

from tests.security.test_turn_ownership import (
    DEFAULT_KEY,
    RIVAL_KEY,
    _attrs,
    _post,
    rows,
    through_stack,
)

SECOND = 1_000_000_000


def run_spans(trace_id: str, start: int, question: str, responses: tuple[str, str],
              continues: str | None = None) -> list[dict[str, Any]]:
    """One agent run as span records: an ``invoke_agent`` root (naming ``continues`` as its conversation id, when it
    continues a run), a call that answers ``responses[0]``, and a call chained to it that answers ``responses[1]``."""
    agent, first, second = (uuid.uuid4().hex[:16] for _ in range(3))
    root = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_bot"}
    if continues:
        root["gen_ai.conversation.id"] = continues
    call = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    return [
        {"trace_id": trace_id, "span_id": agent, "parent_id": None, "name": "invoke_agent support_bot",
         "start": start, "end": start + 3 * SECOND, "attributes": root},
        {"trace_id": trace_id, "span_id": first, "parent_id": agent, "name": "chat m", "start": start + SECOND // 10,
         "end": start + SECOND, "attributes": {**call, "gen_ai.prompt": question, "gen_ai.completion": "One moment.",
                                               "gen_ai.response.id": responses[0]}},
        {"trace_id": trace_id, "span_id": second, "parent_id": agent, "name": "chat m", "start": start + SECOND,
         "end": start + 2 * SECOND, "attributes": {**call, "gen_ai.prompt": question,
                                                   "gen_ai.completion": f"About {question}: yes.",
                                                   "gen_ai.conversation.id": responses[0],
                                                   "gen_ai.response.id": responses[1]}},
    ]


CONVERSATION = [  # three runs of one conversation, each continuing the last response of the one before
    ("Where is my order?", ("resp_a1", "resp_a2"), None),
    ("Can I change its address?", ("resp_a3", "resp_a4"), "resp_a2"),
    ("And the delivery day?", ("resp_a5", "resp_a6"), "resp_a4"),
]


def conversation_traces(start: int = 1_700_000_000 * SECOND) -> list[list[dict[str, Any]]]:
    return [run_spans(uuid.uuid4().hex, start + i * 10 * SECOND, question, responses, continues)
            for i, (question, responses, continues) in enumerate(CONVERSATION)]


def sessions_of(traces: list[list[dict[str, Any]]]) -> list[str | None]:
    """Each trace's run's session, the traces assembled in the order given, with a dict for the worker's links."""
    links: dict[str, str] = {}
    out = []
    for spans in traces:
        result = assembly(spans)
        links = {**join(result.turns, result.chains, links)[0], **links}
        [turn] = result.turns
        out.append(turn.get("session_id"))
    return out


def test_runs_that_continue_each_others_last_response_are_one_session_named_by_the_first_runs_last_response():
    traces = conversation_traces()

    assert [assembly(spans).turns[0]["session_id"] for spans in traces] == ["resp_a1", "resp_a2", "resp_a4"]  # as stated
    assert sessions_of(traces) == ["resp_a2"] * 3


def test_the_first_two_runs_agree_on_the_session_whichever_is_assembled_first():
    first, second, _ = conversation_traces()

    assert sessions_of([second, first]) == ["resp_a2", "resp_a2"]


def test_a_stated_conversation_id_that_is_no_response_is_the_session_and_a_run_continuing_it_joins_it():
    first = run_spans(uuid.uuid4().hex, 0, "Where is my order?", ("resp_b1", "resp_b2"))
    first[0]["attributes"]["session.id"] = "chat-42"  # the app's own conversation id, on the root
    second = run_spans(uuid.uuid4().hex, 10 * SECOND, "Thanks. And the address?", ("resp_b3", "resp_b4"), "resp_b2")

    assert sessions_of([first, second]) == ["chat-42", "chat-42"]


def test_a_run_stating_no_conversation_id_has_no_session_and_leaves_no_link():
    spans = run_spans(uuid.uuid4().hex, 0, "Where is my order?", ("resp_c1", "resp_c2"))
    del spans[2]["attributes"]["gen_ai.conversation.id"]
    result = assembly(spans)

    assert join(result.turns, result.chains, {}) == ({}, {})
    assert "session_id" not in result.turns[0]


# -- the links on a real Redis -------------------------------------------------------------------------------------


def test_links_are_a_projects_own_a_run_of_another_project_naming_the_same_response_starts_its_own_session(client):
    first, second, third = (assembly(spans) for spans in conversation_traces())
    chain_sessions(client, [("shop", first), ("shop", second)], keep_s=600, budget=2**20)
    rival = assembly(conversation_traces()[2])  # the third run again, sent by another project

    chain_sessions(client, [("rival", rival)], keep_s=600, budget=2**20)
    chain_sessions(client, [("shop", third)], keep_s=600, budget=2**20)

    assert [r.turns[0]["session_id"] for r in (first, second, third)] == ["resp_a2"] * 3
    assert rival.turns[0]["session_id"] == "resp_a4"  # what it states: shop's link is not its to read


def test_the_runs_of_one_sweep_are_joined_in_the_order_they_started_whatever_order_they_settled_in(client):
    results = [assembly(spans) for spans in conversation_traces()]

    chain_sessions(client, [("shop", r) for r in reversed(results)], keep_s=600, budget=2**20)

    assert [r.turns[0]["session_id"] for r in results] == ["resp_a2"] * 3


def test_a_response_ids_first_link_is_kept(client):
    first, second, _ = (assembly(spans) for spans in conversation_traces())
    chain_sessions(client, [("shop", first)], keep_s=600, budget=2**20)
    forged = assembly(run_spans(uuid.uuid4().hex, 0, "Other words", ("resp_x", "resp_a2"), "elsewhere"))

    chain_sessions(client, [("shop", forged)], keep_s=600, budget=2**20)  # states resp_a2 as its own last response
    chain_sessions(client, [("shop", second)], keep_s=600, budget=2**20)

    assert second.turns[0]["session_id"] == "resp_a2"


def test_links_are_bounded_by_bytes_oldest_first_out_and_forgotten_after_the_keep_time(client):
    runs = [assembly(run_spans(uuid.uuid4().hex, i * SECOND, f"question {i}", (f"resp_{i}a", f"resp_{i}b"),
                               f"chat-{i}")) for i in range(4)]
    size = len(json.dumps(["shop", "resp_0b"])) + len("chat-0") + LINK_OVERHEAD

    for i, run in enumerate(runs[:3]):
        chain_sessions(client, [("shop", run)], keep_s=600, budget=2 * size, now=1000 + i)

    assert int(client.get(LINKS_BYTES)) == 2 * size and client.hlen(LINKS) == 2
    assert int(client.get(EVICTED)) == 1
    assert client.hget(LINKS, json.dumps(["shop", "resp_0b"])) is None  # the oldest went first
    chain_sessions(client, [("shop", runs[3])], keep_s=600, budget=2 * size, now=1000 + 601 + 2)
    assert client.hlen(LINKS) == 1 and int(client.get(LINKS_BYTES)) == size  # the others were older than the keep time


# -- through a real intake and worker ------------------------------------------------------------------------------


def otlp(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Span records as OTLP/JSON spans (every attribute a string), with their links."""
    return [{"traceId": s["trace_id"], "spanId": s["span_id"], "parentSpanId": s["parent_id"] or "",
             "name": s["name"], "kind": 1, "startTimeUnixNano": str(s["start"]), "endTimeUnixNano": str(s["end"]),
             "links": [{"traceId": link["trace_id"], "spanId": link["span_id"]} for link in s.get("links", [])],
             "attributes": _attrs(**{k.replace(".", "__"): str(v) for k, v in s["attributes"].items()})}
            for s in spans]


def send(intake, traces: list[list[dict[str, Any]]], key: str) -> None:
    answer = _post(f"{intake.url}/v1/traces", key=key, body={"resourceSpans": [{
        "resource": {"attributes": _attrs(service__name="parcel-bot")},
        "scopeSpans": [{"spans": [span for spans in traces for span in otlp(spans)]}]}]})
    assert "partialSuccess" not in answer, answer


@pytest.fixture(scope="module")
def stored(redis_server, tmp_path_factory):
    """A conversation of three runs sent by the default project in one request (the last run first), then a second
    project's run naming the conversation's last response as its conversation id, and the default project's fourth
    run continuing it; the ``traces`` rows by trace id."""
    home = tmp_path_factory.mktemp("chains")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    env = {"VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_PARENT_WAIT_S": "1", "VIGIL_INTAKE_TOKEN": DEFAULT_KEY}
    now = time.time_ns()
    traces = conversation_traces(now)
    rival = run_spans(uuid.uuid4().hex, now + 40 * SECOND, "Rival words", ("resp_r1", "resp_r2"), "resp_a6")
    fourth = run_spans(uuid.uuid4().hex, now + 50 * SECOND, "One more thing", ("resp_a7", "resp_a8"), "resp_a6")
    worker = through_stack(redis_server.url, home, env, [lambda intake: send(intake, traces[::-1], DEFAULT_KEY),
                                                        lambda intake: send(intake, [rival], RIVAL_KEY),
                                                        lambda intake: send(intake, [fourth], DEFAULT_KEY)])
    store = connect(worker.dsn)
    found = {r["trace_id"]: r for r in rows(store, "SELECT trace_id, project, session_id FROM traces FINAL")}
    store.close()
    client.close()
    yield {"conversation": [spans[0]["trace_id"] for spans in [*traces, fourth]], "rival": rival[0]["trace_id"],
           "rows": found}


def test_the_worker_stores_the_runs_of_a_chained_conversation_in_one_session(stored):
    assert [(stored["rows"][t]["project"], stored["rows"][t]["session_id"]) for t in stored["conversation"]] == [
        ("default", "resp_a2")] * 4


def test_another_projects_run_naming_the_conversations_response_does_not_join_its_session(stored):
    rival = stored["rows"][stored["rival"]]

    assert (rival["project"], rival["session_id"]) == ("rival", "resp_a6")
