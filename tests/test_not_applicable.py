"""A scorer that does not apply to a turn says so: *unscored*, labelled ``not_applicable``, with its reason; its own
funnel stage, out of means and coverage. A rubric says it with ``applies_when`` or a categorical label scored
``null``, a Python scorer by returning ``NotApplicable(reason)``. End to end: a rubric "the answer cites the order id"
through a real `vigil worker` on the scripted judge, over FAQ turns without an order and turns about one.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from pydantic import ValidationError
from vigil.schemas import NOT_APPLICABLE, ScoreStatus, Turn, VigilConfig
from vigil.worker.alerts.check import check_alerts
from vigil.worker.judge import NO_JUDGE
from vigil.worker.report.build import run_query
from vigil.worker.scorers.user import build_user_scorer
from vigil.worker.store import connect
from vigil.worker.store.queries import PANELS

from tests.judge_server import Reply, ScriptedJudge
from tests.pipeline import WorkerProcess, send, wait_drained
from tests.scoring_support import judge_factory, llm_judge  # noqa: F401 (fixtures)

CITES_ORDER = {"name": "cites_order", "kind": "llm_judge", "output": {"type": "boolean"},
               "applies_when": "the user asks about one specific order of theirs",
               "prompt": "Question: {{ question }}\nAnswer: {{ answer }}\nDoes the answer cite the order id?"}
GRADED = {"name": "graded", "kind": "llm_judge", "prompt": "Question: {{ question }}\nAnswer: {{ answer }}\nGrade it.",
          "output": {"type": "categorical", "labels": {"cites": 1, "vague": 0.4, "wrong": 0, "n/a": None}}}
ORDER_FN = {"name": "order_fn", "kind": "python", "function": "tests.user_scorer_functions:cites_the_order"}


def built(definition: dict):
    return build_user_scorer(VigilConfig.model_validate({"scorers": [definition]}).scorers[0])


def turn(question: str, answer: str = "See our help page.", **fields) -> Turn:
    return Turn.model_validate({"trace_id": uuid.uuid4().hex, "agent": "bot", "output": answer,
                                "input": [{"role": "user", "content": question}], **fields})


async def test_a_rubric_whose_judge_says_the_clause_does_not_hold_is_not_applicable(judge_server, llm_judge):
    judge_server.replies.append(Reply.json({"applies": False, "reason": "A general FAQ question.", "verdict": False}))

    result = await built(CITES_ORDER).score(turn("What are your opening hours?"), llm_judge)

    sent = judge_server.requests[0].body
    assert list(sent["response_format"]["json_schema"]["schema"]["properties"]) == ["applies", "reason", "verdict"]
    assert "applies only to turns where this holds: the user asks about one specific order" in \
        sent["messages"][0]["content"]
    assert (result.status, result.label, result.reason, result.score) == (
        ScoreStatus.UNSCORED, NOT_APPLICABLE, "A general FAQ question.", None)
    assert result.outcome == "not_applicable"


async def test_a_rubric_whose_clause_holds_is_scored_as_ever(judge_server, llm_judge):
    judge_server.replies.append(Reply.json({"applies": True, "reason": "Names 40-1.", "verdict": True}))

    result = await built(CITES_ORDER).score(turn("Where is order 40-1?", "Order 40-1 ships today."), llm_judge)

    assert (result.status, result.score, result.label, result.outcome) == (ScoreStatus.SCORED, 1.0, "yes", "scored")


async def test_a_categorical_label_scored_null_is_not_applicable(judge_server, llm_judge):
    judge_server.replies.append(Reply.json({"reason": "No order is involved.", "label": "n/a"}))

    result = await built(GRADED).score(turn("Do you ship abroad?"), llm_judge)

    assert "Answer n/a when the rubric does not apply to this turn." in judge_server.requests[0].body["messages"][0][
        "content"]
    assert (result.status, result.label, result.reason) == (ScoreStatus.UNSCORED, NOT_APPLICABLE,
                                                            "No order is involved.")


@pytest.mark.parametrize(("fields", "status", "label", "reason"), [
    pytest.param({}, ScoreStatus.UNSCORED, NOT_APPLICABLE, "the turn is about no order (no metadata.order_id)",
                 id="no-order"),
    pytest.param({"metadata": {"order_id": "40-7"}}, ScoreStatus.SCORED, "", "does not name order 40-7",
                 id="an-order"),
])
def test_a_python_scorer_returns_not_applicable_with_its_reason(fields, status, label, reason):
    result = asyncio.run(built(ORDER_FN).score(turn("Hi", **fields), NO_JUDGE))

    assert (result.status, result.label or "", result.reason) == (status, label, reason)


def test_a_categorical_output_needs_two_scored_labels():
    with pytest.raises(ValidationError, match="give at least two labels with a score"):
        built({**GRADED, "output": {"type": "categorical", "labels": {"cites": 1, "n/a": None}}})


# -- through a real worker ---------------------------------------------------------------------------------------

def judge_script(body: dict) -> Reply:
    """The judge: the rubric applies when the question names an order (``order 40-``); it cites it when the answer
    repeats the id."""
    prompt = body["messages"][-1]["content"]
    question = prompt.split("Answer:")[0]
    order = next((w.strip("?.") for w in question.split() if w.startswith("40-")), None)
    if order is None:
        return Reply.json({"applies": False, "reason": "A general question about no order.", "verdict": False})
    cited = order in prompt.split("Answer:")[1]
    return Reply.json({"applies": True, "reason": "Cites it." if cited else "Leaves it out.", "verdict": cited})


FAQ = ["What are your opening hours?", "Do you ship abroad?", "How do I reset my password?"]
ORDERS = [("Where is order 40-118873?", "Order 40-118873 left the warehouse today."),
          ("Can I cancel order 40-220001?", "Yes, cancellations are free within a day.")]


@pytest.fixture(scope="module")
def scenario(redis_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("not-applicable")
    config = home / "vigil.yaml"
    turns = [{"trace_id": uuid.uuid4().hex, "project": "shop", "agent": "bot", "output": "See our help page.",
              "input": [{"role": "user", "content": q}]} for q in FAQ]
    turns += [{"trace_id": uuid.uuid4().hex, "project": "shop", "agent": "bot", "output": a,
               "input": [{"role": "user", "content": q}], "metadata": {"order_id": q.split()[-1].strip("?")}}
              for q, a in ORDERS]
    with ScriptedJudge(judge_script) as judge:
        config.write_text(yaml.safe_dump({
            "judges": [{"name": "llm", "base_url": judge.base_url, "model": "judge-model",
                        "api_key_env": "VIGIL_TEST_JUDGE_KEY"}],
            "scorers": [CITES_ORDER, ORDER_FN],
            "monitors": [{"name": "cites_order", "scorer": "cites_order", "judge": "llm"},
                         {"name": "order_fn", "scorer": "order_fn", "pass_at": 0.8}],
        }, sort_keys=False))
        worker = WorkerProcess(redis_server.url, home / "vigil", config, VIGIL_TEST_JUDGE_KEY="k").start()
        try:
            send(redis_server.url, turns)
            wait_drained(redis_server.url, worker)
            assert worker.stop() == 0, worker.output()[-3000:]
        finally:
            worker.stop()
    store = connect(worker.dsn)
    yield {"store": store, "faq": [t["trace_id"] for t in turns[:3]], "orders": [t["trace_id"] for t in turns[3:]]}
    store.close()


def rows(store, monitor: str) -> dict[str, tuple]:
    result = store.query("SELECT trace_id, status, score, label, reason, pass_line FROM scores FINAL "
                         "WHERE monitor = {m:String}", parameters={"m": monitor})
    return {r[0]: r[1:] for r in result.result_rows}


@pytest.mark.parametrize("monitor", ["cites_order", "order_fn"])
def test_faq_turns_are_not_applicable_with_the_reason_and_order_turns_are_scored(scenario, monitor):
    got = rows(scenario["store"], monitor)

    assert {got[t][:2] + (got[t][2],) for t in scenario["faq"]} == {("unscored", None, "not_applicable")}
    assert all(got[t][3] for t in scenario["faq"])  # each with its reason
    assert [got[t][:3] for t in scenario["orders"]] == [("scored", 1.0, got[scenario["orders"][0]][2]),
                                                        ("scored", 0.0, got[scenario["orders"][1]][2])]
    assert {got[t][4] for t in got} == {0.8 if monitor == "order_fn" else 0.5}  # the monitor's pass line


def test_the_funnel_counts_them_and_coverage_and_the_mean_leave_them_out(scenario):
    window = {"start": datetime.now(UTC) - timedelta(hours=1), "end": datetime.now(UTC) + timedelta(minutes=1)}

    funnel = {r["monitor"]: r for r in run_query(scenario["store"], PANELS["coverage_funnel"], **window)}
    summary = {r["monitor"]: r for r in run_query(scenario["store"], PANELS["monitor_summary"], **window)}

    for monitor in ("cites_order", "order_fn"):
        assert (funnel[monitor]["sampled"], funnel[monitor]["scored"], funnel[monitor]["not_applicable"],
                funnel[monitor]["unscored"], funnel[monitor]["lost"], funnel[monitor]["coverage"]) == (5, 2, 3, 0, 0, 1.0)
        assert (summary[monitor]["not_applicable"], summary[monitor]["unscored"], summary[monitor]["mean_score"]) == (
            3, 0, 0.5)


def test_a_coverage_alert_does_not_count_them_as_missing_verdicts(scenario):
    config = VigilConfig.model_validate({"alerts": [{"name": "coverage", "kind": "coverage", "threshold": 0.9,
                                                     "min_samples": 1, "window_minutes": 60}]})

    assert check_alerts(scenario["store"], config, now=datetime.now(UTC) + timedelta(minutes=1),
                        notifier=lambda event: None) == []


def test_the_report_names_the_reason_of_turns_a_scorer_does_not_apply_to_apart_from_unscored_ones(scenario):
    window = {"start": datetime.now(UTC) - timedelta(hours=1), "end": datetime.now(UTC) + timedelta(minutes=1)}

    reasons = {(r["monitor"], r["status"]): r for r in run_query(scenario["store"], PANELS["unscored_reasons"], **window)}

    assert set(reasons) == {("cites_order", "not_applicable"), ("order_fn", "not_applicable")}
    assert (reasons["order_fn", "not_applicable"]["turns"], reasons["order_fn", "not_applicable"]["reason"]) == (
        3, "the turn is about no order (no metadata.order_id)")

