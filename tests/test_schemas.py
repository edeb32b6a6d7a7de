"""The contracts: a turn validates with errors that name the field, truncates what is too long and says so; a score
id is deterministic; a monitor config refers only to judges and monitors it defines."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from pydantic import ValidationError
from vigil.schemas import Turn, VigilConfig, score_id
from vigil.schemas.trace import MAX_FIELD_CHARS
from vigil.worker.cli import main

TURN = {"trace_id": "t1", "agent": "bot", "input": [{"role": "user", "content": "Where is my order?"}],
        "output": "It ships today."}


def test_a_minimal_turn_gets_defaults_and_knows_its_question():
    turn = Turn.model_validate(TURN)
    assert (turn.project, turn.environment, turn.question) == ("default", "unlabelled", "Where is my order?")
    assert turn.started_at.tzinfo is not None


@pytest.mark.parametrize(("change", "field"), [
    ({"agent": None}, "agent"),
    ({"input": []}, "input"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input.0.role"),
    ({"output": 42}, "output"),
    ({"contexts": [{"txt": "x"}]}, "contexts.0.text"),
    ({"surprise": 1}, "surprise"),
], ids=["missing agent", "empty input", "unknown role", "wrong type", "misspelt context field", "unknown field"])
def test_validation_errors_name_the_field(change, field):
    with pytest.raises(ValidationError) as error:
        Turn.model_validate(TURN | change)
    assert field in {".".join(str(p) for p in e["loc"]) for e in error.value.errors()}


def test_a_field_over_the_limit_is_truncated_and_the_truncation_recorded():
    turn = Turn.model_validate(TURN | {"output": "x" * (MAX_FIELD_CHARS + 10)})
    assert len(turn.output) == MAX_FIELD_CHARS
    assert turn.truncated == [f"output:{MAX_FIELD_CHARS + 10}"]


def test_a_payload_over_the_size_limit_is_refused_naming_its_largest_field():
    with pytest.raises(ValidationError, match="largest field contexts\\[0\\].text"):
        Turn.model_validate(TURN | {"contexts": [{"text": "y" * 3_000_000}]})


def test_a_string_that_was_not_utf8_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="field output: invalid UTF-8"):
        Turn.model_validate(TURN | {"output": b"caf\xe9".decode("utf-8", "surrogateescape")})


def test_a_score_id_depends_on_trace_span_monitor_and_scorer_version_only():
    same = score_id("t1", "s1", "relevancy", "1")
    assert same == score_id("t1", "s1", "relevancy", "1")
    assert len({same, score_id("t2", "s1", "relevancy", "1"), score_id("t1", "s2", "relevancy", "1"),
                score_id("t1", "s1", "other", "1"), score_id("t1", "s1", "relevancy", "2")}) == 5


def test_a_monitor_naming_an_unknown_judge_is_a_config_error_that_says_which():
    with pytest.raises(ValidationError, match=r"monitors\[0\].judge: unknown judge 'gpt'"):
        VigilConfig.model_validate({"judges": [{"name": "offline", "kind": "baseline"}],
                                    "monitors": [{"name": "m", "scorer": "answer_relevancy", "judge": "gpt"}]})


def test_a_failed_runs_alert_is_per_agent_and_refuses_a_monitor():
    with pytest.raises(ValidationError, match=r"kind 'failed_runs' is per agent: remove its monitor"):
        VigilConfig.model_validate({"alerts": [{"name": "runs", "kind": "failed_runs", "monitor": "relevancy"}]})


def test_config_check_prints_each_error_with_its_field_and_exits_1(tmp_path):
    path = tmp_path / "vigil.yaml"
    path.write_text("judges: [{name: j, kind: openai}]\n"
                    "monitors: [{name: m, scorer: answer_relevancy, judge: j, sampling_rate: 2}]\n")
    result = CliRunner().invoke(main, ["config", "check", str(path)])
    assert result.exit_code == 1
    assert "judges.0: Value error, judge 'j': base_url is required" in result.output
    assert "monitors.0.sampling_rate: Input should be less than or equal to 1" in result.output


def test_config_check_accepts_the_bundled_demo_config():
    from vigil.worker.demo import bundled_config_path

    result = CliRunner().invoke(main, ["config", "check", str(bundled_config_path())])
    assert result.exit_code == 0 and ": ok (" in result.output


def test_a_tool_call_keeps_its_error_and_the_calls_keep_their_order_into_the_trace_row():
    from vigil.schemas.rows import trace_row

    turn = Turn.model_validate({**TURN, "tool_calls": [
        {"name": "lookup_order", "arguments": {"id": "A1"}, "result": "shipped"},
        {"name": "issue_refund", "arguments": {"id": "A1"}, "error": "PermissionDenied: refunds are closed"},
    ]})

    assert [(c.name, c.error) for c in turn.tool_calls] == [
        ("lookup_order", None), ("issue_refund", "PermissionDenied: refunds are closed")]
    stored = json.loads(trace_row(turn).tool_calls_json)
    assert [c["name"] for c in stored] == ["lookup_order", "issue_refund"]
    assert stored[1]["error"] == "PermissionDenied: refunds are closed" and stored[0]["error"] is None
