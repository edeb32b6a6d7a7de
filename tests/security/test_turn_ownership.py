"""A turn changes only through its own run, and re-scoring costs what changed: attacks on stored turns through a
real `vigil intake`, a real `vigil worker` and redis-server, with the scripted judge server counting the judge calls
each turn costs (a turn's calls are the requests whose prompt holds its answer).

One scenario for the module (a worker run is the slow part). Victims are sent and scored first; then, knowing only
their ids (trace ids travel in ``traceparent``), an attacker sends: a parentless ``invoke_agent`` span into a bare
LLM call's trace; a victim's span again with another answer (and once as it was); a ``/v1/turns`` item again under a
victim's ids with another answer (and once as it was). An honest late span that changes nothing a scorer reads comes
into an agent's trace, and a span over the per-trace span cap into a full trace. A second project (its own key in
the config's ``projects:``) sends the same trace ids and span ids with its own answers, and a ``/v1/turns`` item
and a feedback item claiming the default project: its rows are its own and touch nothing of the first's. The worker is stopped and the
rows read back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import clickhouse_connect
import pytest
import redis
from clickhouse_connect.driver.exceptions import DatabaseError
from vigil.schemas import load_config
from vigil.worker.assembly.traces import (
    PENDING,
    record_key,
    split_name,
    store_spans,
    trace_name,
)
from vigil.worker.serving.keys import KeyRing, hash_key
from vigil.worker.store import connect
from vigil.worker.store.clickhouse import chdb_dir
from vigil.worker.store.read_server import read_endpoint

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import IntakeProcess, WorkerProcess, wait_drained, wait_while_alive

DEFAULT_KEY = "default-project-key-0123456789"
RIVAL_KEY, EXPIRED_KEY = "rival-project-key-0123456789", "expired-rival-key-0123456789"
RIVAL_READ_KEY = "rival-read-key-0123456789"
CONFIG = f"""
projects:
  - name: rival
    keys:
      - {{sha256: {hash_key(RIVAL_KEY)}}}
      - {{sha256: {hash_key(EXPIRED_KEY)}, not_after: 2020-01-01T00:00:00Z}}
    read_keys:
      - {{sha256: {hash_key(RIVAL_READ_KEY)}}}
judges:
  - {{name: llm, kind: openai, base_url: BASE_URL, model: judge-model, api_key_env: VIGIL_TEST_JUDGE_KEY}}
monitors:
  - {{name: relevancy, scorer: answer_relevancy, judge: llm, reason: template, sampling_rate: 1.0}}
"""
STATEMENTS = {"statements": ["The answer is stated."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers the question"}]}
BARE, RESENT, AGENT, FULL = (uuid.uuid4().hex for _ in range(4))
TURNS_TRACE = uuid.uuid4().hex
ANSWERS = {BARE: "Parcels leave the depot at noon.", RESENT: "Refunds take five working days.",
           AGENT: "Your order ships on Monday.", FULL: "The warranty lasts two years.",
           TURNS_TRACE: "Gift cards never expire."}
EVIL = "Send your card number to support@evil.example to get a refund."
RUN = "Parcels are held until you pay a release fee."  # the injected agent span's answer: another run at most
RIVAL, RIVAL_RUN = "The rival project's answer.", "The rival project's own agent run."


def _reply(body: dict) -> Reply:
    step = body["response_format"]["json_schema"]["name"]
    return Reply.json(STATEMENTS if step.endswith("preprocess") else VERDICTS)


def _attrs(**attributes: str) -> list[dict[str, Any]]:
    return [{"key": k.replace("__", "."), "value": {"stringValue": v}} for k, v in attributes.items()]


def _span(trace_id: str, span_id: str, parent: str = "", name: str = "step", **attributes: str) -> dict[str, Any]:
    now = time.time_ns()
    return {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": 1,
            "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 1_000_000), "flags": 0x100,
            "attributes": _attrs(**attributes)}


def _chat(question: str, answer: str, operation: str = "chat") -> dict[str, str]:
    return {"gen_ai__operation__name": operation, "gen_ai__request__model": "m",
            "gen_ai__input__messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
            "gen_ai__output__messages": json.dumps([{"role": "assistant",
                                                     "parts": [{"type": "text", "content": answer}]}])}


def _post(url: str, body: Any, key: str = DEFAULT_KEY) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        return json.loads(response.read() or b"{}")


def export(intake: IntakeProcess, *spans: dict[str, Any], key: str = DEFAULT_KEY) -> None:
    answer = _post(f"{intake.url}/v1/traces", key=key, body={"resourceSpans": [{
        "resource": {"attributes": _attrs(service__name="parcel-bot")}, "scopeSpans": [{"spans": list(spans)}]}]})
    assert "partialSuccess" not in answer, answer


def calls(judge: ScriptedJudge, answer: str) -> int:
    return sum(1 for r in judge.requests if answer in r.prompt)


def started(redis_url: str, home, judge: ScriptedJudge, env: dict[str, str]) -> tuple[IntakeProcess, WorkerProcess]:
    """A real `vigil intake` and `vigil worker` on ``CONFIG`` (its judge the scripted ``judge``)."""
    config = home / "vigil.yaml"
    config.write_text(CONFIG.replace("BASE_URL", judge.base_url))
    intake = IntakeProcess(redis_url, home, VIGIL_CONFIG=str(config), **env).start()
    try:
        return intake, WorkerProcess(redis_url, home / "vigil", config, VIGIL_TEST_JUDGE_KEY="k", **env).start()
    except BaseException:
        intake.stop()
        raise


@pytest.fixture(scope="module")
def scenario(redis_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("ownership")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    env = {"VIGIL_INTAKE_SETTLE_S": "1", "VIGIL_INTAKE_PARENT_WAIT_S": "1", "VIGIL_INTAKE_MAX_TRACE_SPANS": "3",
           "VIGIL_INTAKE_TOKEN": DEFAULT_KEY}
    ids = {trace: uuid.uuid4().hex[:16] for trace in ANSWERS}
    turn = {"trace_id": TURNS_TRACE, "span_id": ids[TURNS_TRACE], "project": "acme", "agent": "parcel-bot",
            "input": [{"role": "user", "content": "Do gift cards expire?"}], "output": ANSWERS[TURNS_TRACE]}
    with ScriptedJudge(_reply) as judge:
        intake, worker = started(redis_server.url, home, judge, env)
        try:
            # the victims: a bare LLM call, another, an agent run, a trace at the span cap, a /v1/turns turn
            export(intake, _span(BARE, ids[BARE], name="chat", **_chat("When do parcels leave?", ANSWERS[BARE])))
            export(intake, _span(RESENT, ids[RESENT], name="chat", **_chat("How long do refunds take?",
                                                                            ANSWERS[RESENT])))
            llm = uuid.uuid4().hex[:16]
            export(intake, _span(AGENT, ids[AGENT], name="invoke_agent", gen_ai__operation__name="invoke_agent"),
                   _span(AGENT, llm, ids[AGENT], name="chat", **_chat("When does my order ship?", ANSWERS[AGENT])))
            export(intake, _span(FULL, ids[FULL], name="chat", **_chat("How long is the warranty?", ANSWERS[FULL])),
                   *(_span(FULL, uuid.uuid4().hex[:16], ids[FULL], name="db query") for _ in range(2)))
            _post(f"{intake.url}/v1/turns", [turn])
            settled(redis_server.url, worker)
            before = {trace: calls(judge, answer) for trace, answer in ANSWERS.items()}

            # the attacks, and the honest late span
            export(intake, _span(BARE, uuid.uuid4().hex[:16], name="invoke_agent",
                                 **_chat("When do parcels leave?", RUN, "invoke_agent")))
            export(intake, _span(RESENT, ids[RESENT], name="chat", **_chat("How long do refunds take?", EVIL)))
            _post(f"{intake.url}/v1/turns", [{**turn, "output": EVIL}])
            _post(f"{intake.url}/v1/turns", [turn])  # the same turn again: a producer's retry
            export(intake, _span(AGENT, uuid.uuid4().hex[:16], llm, name="SELECT orders", db__system="postgresql"))
            export(intake, _span(FULL, uuid.uuid4().hex[:16], ids[FULL], name="db query"))  # over the cap of 3
            # the second project: the same trace and span ids, its own answers
            rival_run = uuid.uuid4().hex[:16]
            export(intake, _span(BARE, rival_run, name="invoke_agent", **_chat("When?", RIVAL_RUN, "invoke_agent")),
                   _span(RESENT, ids[RESENT], name="chat", **_chat("How long do refunds take?", RIVAL)),
                   key=RIVAL_KEY)
            _post(f"{intake.url}/v1/turns", [{**turn, "project": "default", "output": RIVAL},
                                              {"feedback": {"project": "default", "trace_id": TURNS_TRACE,
                                                            "name": "thumbs", "value": 0}}], key=RIVAL_KEY)
            refused = [status(intake, key) for key in (EXPIRED_KEY, "no-such-key")]
            settled(redis_server.url, worker)
            after = {trace: calls(judge, answer) for trace, answer in ANSWERS.items()}
            assemblies = {trace: int(client.hget(record_key(trace), "assemblies") or 0) for trace in ANSWERS}
            reads = {who: read(worker, key) for who, key in (("rival", RIVAL_READ_KEY), ("everyone", None),
                                                             ("unknown", "no-such-read-key"))}
            assert worker.stop() == 0
        finally:
            intake.stop()
            worker.stop()
        evil_calls = calls(judge, EVIL)
    store = connect(worker.dsn)
    yield {"ids": ids, "before": before, "after": after, "assemblies": assemblies, "store": store,
           "evil_calls": evil_calls, "log": worker.output(), "rival_run": rival_run, "refused": refused,
           "reads": reads}
    store.close()
    client.close()


def read(worker: WorkerProcess, key: str | None) -> Any:
    """What the worker's read endpoint answers a key (None: the endpoint's own password): the projects of the
    trace and judge-call rows it sees, and whether it sees any row of a table with no project column (the migrations'
    ledger), or "refused"."""
    endpoint = read_endpoint(chdb_dir(worker.dsn))
    try:
        client = clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port, username="default",
                                               password=endpoint.password if key is None else key, compress=False)
    except DatabaseError as exc:
        return "refused" if "516" in str(exc) else str(exc)
    try:
        return (sorted(r[0] for r in client.query("SELECT DISTINCT project FROM traces").result_rows),
                sorted(r[0] for r in client.query("SELECT DISTINCT project FROM judge_calls").result_rows),
                client.query("SELECT count() FROM schema_migrations").result_rows[0][0] > 0)
    finally:
        client.close()


def status(intake: IntakeProcess, key: str) -> int:
    try:
        _post(f"{intake.url}/v1/turns", [], key=key)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


def settled(redis_url: str, worker: WorkerProcess) -> None:
    client = redis.Redis.from_url(redis_url)
    wait_drained(redis_url, worker)
    wait_while_alive(worker, lambda: client.zcard(PENDING) == 0, "every trace to be assembled")
    wait_drained(redis_url, worker)
    client.close()


def through_stack(redis_url: str, home, env: dict[str, str], sends: list) -> WorkerProcess:
    """A real intake and worker (``started``, its judge scripted) that take each of ``sends`` (a function of the
    intake that posts to it) in turn, every trace assembled before the next; both stopped, the worker having exited 0
    (it wrote everything it took). Returns the worker: its store is at ``worker.dsn``."""
    with ScriptedJudge(_reply) as judge:
        intake, worker = started(redis_url, home, judge, env)
        try:
            for posting in sends:
                posting(intake)
                settled(redis_url, worker)
            assert worker.stop() == 0
        finally:
            intake.stop()
            worker.stop()
    return worker


def rows(store, sql: str, **parameters: Any) -> list[dict[str, Any]]:
    result = store.query(sql, parameters=parameters)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def logged(scenario, words: str) -> list[dict[str, Any]]:
    """The worker's log lines (JSON) whose event says ``words``."""
    lines = [json.loads(line) for line in scenario["log"].splitlines() if line.startswith("{")]
    return [line for line in lines if words in line.get("event", "")]


def stored(scenario, trace_id: str, project: str = "default") -> list[dict[str, Any]]:
    return rows(scenario["store"], "SELECT span_id, output FROM traces FINAL WHERE trace_id = {t:String} AND "
                                   "project = {p:String} ORDER BY started_at", t=trace_id, p=project)


def scores(scenario, trace_id: str, project: str = "default") -> list[str]:
    return [r["span_id"] for r in rows(scenario["store"], "SELECT span_id FROM scores FINAL WHERE trace_id = "
                                                          "{t:String} AND project = {p:String} AND status = 'scored' "
                                                          "ORDER BY span_id", t=trace_id, p=project)]


def stages(scenario, trace_id: str, stage: str, project: str = "default") -> int:
    return rows(scenario["store"], "SELECT count() AS n FROM pipeline_events WHERE trace_id = {t:String} AND "
                                   "stage = {s:String} AND project = {p:String}", t=trace_id, s=stage,
                p=project)[0]["n"]


def test_a_parentless_agent_span_sent_into_a_victims_trace_deletes_nothing_of_the_victims_turn(scenario):
    victim = scenario["ids"][BARE]
    assert {"span_id": victim, "output": ANSWERS[BARE]} in stored(scenario, BARE)
    assert victim in scores(scenario, BARE)
    assert stages(scenario, BARE, "superseded") == 0
    assert scenario["after"][BARE] == scenario["before"][BARE]  # the victim's turn was not scored again


def test_a_span_resent_with_another_answer_is_a_conflict_and_the_scored_turn_is_kept(scenario):
    assert stored(scenario, RESENT) == [{"span_id": scenario["ids"][RESENT], "output": ANSWERS[RESENT]}]
    assert scores(scenario, RESENT) == [scenario["ids"][RESENT]]
    assert stages(scenario, RESENT, "conflict") == 1
    [line] = logged(scenario, "span resent with other content")
    assert (line["trace_id"], line["sender"], line["project"]) == (RESENT, "127.0.0.1", "default")


def test_a_turn_resent_on_v1_turns_with_another_answer_is_a_conflict_and_the_same_one_costs_nothing(scenario):
    assert stored(scenario, TURNS_TRACE) == [{"span_id": scenario["ids"][TURNS_TRACE],
                                              "output": ANSWERS[TURNS_TRACE]}]
    assert stages(scenario, TURNS_TRACE, "conflict") == 1
    [line] = logged(scenario, "turn sent again with other content")
    assert (line["trace_id"], line["sender"], line["project"]) == (TURNS_TRACE, "127.0.0.1", "default")
    assert scenario["after"][TURNS_TRACE] == scenario["before"][TURNS_TRACE] > 0  # the retry: no judge call
    assert scenario["evil_calls"] == 0  # no resent answer ever reached the judge


def test_a_late_span_that_changes_nothing_a_scorer_reads_costs_no_judge_call(scenario):
    assert scenario["before"][AGENT] > 0
    assert scenario["after"][AGENT] == scenario["before"][AGENT]
    assert scenario["assemblies"][AGENT] == 2  # it was assembled again, and found nothing to score


def test_a_span_over_the_per_trace_cap_never_reschedules_its_trace(scenario):
    assert scenario["assemblies"][FULL] == 1
    assert scenario["after"][FULL] == scenario["before"][FULL] > 0
    assert stored(scenario, FULL) == [{"span_id": scenario["ids"][FULL], "output": ANSWERS[FULL]}]


def test_a_second_project_keeps_its_own_rows_under_the_same_trace_ids_and_touches_nothing_of_the_first(scenario):
    ids = scenario["ids"]
    assert stored(scenario, RESENT, "rival") == [{"span_id": ids[RESENT], "output": RIVAL}]
    assert stored(scenario, TURNS_TRACE, "rival") == [{"span_id": ids[TURNS_TRACE], "output": RIVAL}]  # not "default"
    assert stored(scenario, BARE, "rival") == [{"span_id": scenario["rival_run"], "output": RIVAL_RUN}]
    assert scores(scenario, RESENT, "rival") == [ids[RESENT]]
    assert rows(scenario["store"], "SELECT project FROM feedback FINAL WHERE trace_id = {t:String}",
                t=TURNS_TRACE) == [{"project": "rival"}]  # its feedback is its own too, whatever it claimed
    for trace in (BARE, RESENT, TURNS_TRACE):
        assert stages(scenario, trace, "conflict", "rival") == 0
        assert stages(scenario, trace, "superseded", "rival") == stages(scenario, trace, "superseded") == 0
    assert {"span_id": ids[BARE], "output": ANSWERS[BARE]} in stored(scenario, BARE)  # the first project's own
    assert stored(scenario, RESENT) == [{"span_id": ids[RESENT], "output": ANSWERS[RESENT]}]


def test_a_projects_read_key_reads_its_own_rows_only_from_the_read_endpoint(scenario):
    assert scenario["reads"]["everyone"] == (["default", "rival"], ["default", "rival"], True)
    assert scenario["reads"]["rival"] == (["rival"], ["rival"], False)  # a table with no project: no rows
    assert scenario["reads"]["unknown"] == "refused"


def test_an_expired_or_unknown_key_is_refused(scenario):
    assert scenario["refused"] == [401, 401]


def test_vigil_keys_new_prints_a_key_once_and_the_config_lines_that_accept_it_for_its_project(tmp_path):
    made = subprocess.run([sys.executable, "-m", "vigil.worker", "keys", "new", "--project", "shop"],
                          capture_output=True, text=True, timeout=60, check=True)
    key = next(word for word in made.stdout.split() if word.startswith("vk_"))
    lines = made.stdout.split("under projects:\n")[1].split("\n(")[0]
    config = tmp_path / "vigil.yaml"
    config.write_text("projects:\n" + lines)
    ring = KeyRing.of("the-default-token", load_config(config))
    assert ring.project(f"Bearer {key}") == "shop"
    assert ring.project("Bearer the-default-token") == "default"
    assert ring.project(f"Bearer {key}x") is None
    assert key not in config.read_text()  # the config keeps only its hash


def test_vigil_keys_new_refuses_a_project_name_that_is_not_plain_in_one_line():
    made = subprocess.run([sys.executable, "-m", "vigil.worker", "keys", "new", "--project", "a b"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert made.returncode == 2 and made.stdout == ""
    assert len(made.stderr.strip().splitlines()) == 1 and "--project" in made.stderr


@pytest.mark.parametrize(("project", "trace_id"), [
    ("default", "0af7651916cd43dd8448eb211c80319c"), ("rival", "0af7651916cd43dd8448eb211c80319c"),
    ("default", "a/b"), ("a/b", "c"), ("a%2Fb", "c/d")], ids=["default", "another", "slash in the id",
                                                            "slash in an open intake's project", "escape-like project"])
def test_a_traces_name_in_redis_gives_back_its_project_and_id_and_no_two_collide(project, trace_id):
    """Every assembly key is made from the name: two (project, trace id) pairs never share one."""
    assert split_name(trace_name(project, trace_id)) == (project, trace_id)
    assert trace_name(project, trace_id) != trace_name("other", trace_id)


def test_explain_trace_reads_a_stored_trace_of_the_project_named_and_no_other(redis_url):
    trace_id = uuid.uuid4().hex
    span = {"trace_id": trace_id, "span_id": uuid.uuid4().hex[:16], "parent_id": None, "name": "chat",
            "start": time.time_ns(), "end": time.time_ns() + 1000, "attributes": {"gen_ai.operation.name": "chat"},
            "resource": {"service.name": "parcel-bot", "vigil.project": "rival"}}
    client = redis.Redis.from_url(redis_url)
    store_spans(client, [span], keep_s=600)
    client.close()

    def explain(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "vigil.worker", "explain-trace", trace_id, *args],
                              capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "REDIS_URL": redis_url})

    assert explain("--project", "rival").returncode == 0
    other = explain()
    assert other.returncode != 0 and "no spans of trace" in other.stderr
