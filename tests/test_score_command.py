"""``vigil score``: one scorer on one trace file, the result printed as JSON."""

from __future__ import annotations

import json
import uuid

from click.testing import CliRunner
from vigil.worker.cli import main
from vigil.worker.judge.baseline import MODEL

from tests.judge_server import Reply
from tests.scoring_support import make_turn


def write_trace(tmp_path, **fields) -> str:
    path = tmp_path / "trace.json"
    path.write_text(make_turn(**fields).model_dump_json(), encoding="utf-8")
    return str(path)


def test_without_a_judge_url_the_baseline_judge_scores(tmp_path, monkeypatch):
    monkeypatch.delenv("VIGIL_JUDGE_BASE_URL", raising=False)

    out = CliRunner().invoke(main, ["score", "--scorer", "answer_relevancy", "--trace", write_trace(tmp_path)])

    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert (result["status"], result["judge_model"]) == ("scored", MODEL)
    assert result["score"] == 1 / 3


def test_an_openai_compatible_judge_and_params_from_the_command_line(tmp_path, judge_server):
    judge_server.replies.extend([
        Reply.json({"statements": ["a", "b"]}), Reply.json({"results": [{"result": "yes", "reason": "r"},
                                                                         {"result": "unsure", "reason": "r"}]}),
    ])

    out = CliRunner().invoke(main, [
        "score", "--scorer", "answer_relevancy", "--trace", write_trace(tmp_path),
        "--judge-base-url", judge_server.base_url, "--model", f"m-{uuid.uuid4().hex[:6]}",
        "--param", "scale=10", "--param", "uncertainty_weight=0.5", "--reason", "none",
    ])

    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert (result["score"], result["scale"], result["reason"]) == (7.5, 10.0, None)
    assert len(result["calls"]) == 2


def test_a_bad_param_is_a_usage_error_naming_it(tmp_path):
    out = CliRunner().invoke(main, ["score", "--scorer", "answer_relevancy", "--trace", write_trace(tmp_path),
                                    "--param", "uncertainty_weight=2"])

    assert out.exit_code == 2 and "uncertainty_weight" in out.output


def test_an_invalid_trace_names_the_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"trace_id": "t", "agent": "a", "input": [], "output": "x"}), encoding="utf-8")

    out = CliRunner().invoke(main, ["score", "--scorer", "answer_relevancy", "--trace", str(path)])

    assert out.exit_code == 1 and "input" in out.output


def test_a_failed_score_is_printed_and_exits_1(tmp_path):
    out = CliRunner().invoke(main, ["score", "--scorer", "prompt_alignment", "--trace",
                                    write_trace(tmp_path, input=[{"role": "system", "content": "Be brief."}])])

    assert out.exit_code == 1
    assert json.loads(out.stdout)["error_type"] == "invalid_input"
    assert out.stderr.startswith("vigil: error: the score failed (invalid_input)")
