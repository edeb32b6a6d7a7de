"""`vigil eval`: a labelled file through a scorer and a judge (the scripted OpenAI-compatible server, or the offline
baseline), the agreement statistics equal to scipy's on the same numbers, bad lines named, runs kept in judge_evals.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy import stats
from vigil.worker.cli import main
from vigil.worker.store import connect

from tests.judge_server import Reply

# (group, human, the grade the scripted judge gives; None: a verdict outside 0-5, so unscored)
LABELLED = [
    ("capital", 3, 5), ("capital", 1, 2), ("capital", 2, 2),
    ("river", 2, 4), ("river", 1, 4),
    ("moon", 3, 1), ("moon", 1, 3),
    ("planet", 2, 3), ("planet", 1, None),
    (None, 1, 1), (None, 3, 4),
]
_GRADE = re.compile(r"grade (\d+)")


def labelled_file(tmp_path: Path, rows=LABELLED) -> Path:
    path = tmp_path / "labelled.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i, (group, human, grade) in enumerate(rows):
            item = {"id": f"item-{i}", "human": human,
                    "turn": {"input": [{"role": "user", "content": f"Question about the {group or 'sea'}?"}],
                             "output": f"An answer of grade {grade if grade is not None else 9}.",
                             "reference": "The reference answer, with no grade in it."}}
            if group is not None:
                item["group"] = group
            out.write(json.dumps(item) + "\n")
    return path


def grading_judge(server) -> None:
    """The scripted judge answers the RAG rubric with the grade written in the response."""
    def script(body):
        response = body["messages"][-1]["content"].split("Response to evaluate")[1]
        grade = _GRADE.search(response).group(1)
        return Reply.json({"evaluation": f"Feedback: graded as asked. [RESULT] {grade}"})
    server.script = script


def run_eval(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["eval", "--no-keep", *args], env=env, catch_exceptions=False)


@pytest.fixture
def report(tmp_path, judge_server):
    grading_judge(judge_server)
    out = run_eval("--dataset", str(labelled_file(tmp_path)), "--scorer", "rag_correctness",
                   "--judge-base-url", judge_server.base_url, "--model", f"m-{uuid.uuid4().hex[:6]}", "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _scored(report):
    items = [i for i in report["items"] if i["score"] is not None]
    return [i["human"] for i in items], [i["score"] for i in items]


def test_every_item_is_scored_by_the_judge_and_listed_with_its_reason(report):
    items = {i["id"]: i for i in report["items"]}
    assert [items[f"item-{n}"]["score"] for n in range(len(LABELLED))] == [
        None if grade is None else grade / 5 for _, _, grade in LABELLED]
    assert items["item-8"]["status"] == "unscored" and items["item-0"]["status"] == "scored"
    assert items["item-0"]["reason"] == "graded as asked." and items["item-0"]["group"] == "capital"
    assert set(report) >= {"agreement", "cost", "reference", "items"}


def test_counts_and_pairwise_accuracy_where_ties_and_unscored_items_count_wrong(report):
    a = report["agreement"]
    # pairs: capital 3 (one tie: 1 vs 2 both grade 2), river 1 (tie), moon 1 (reversed), planet 1 (unscored)
    assert (a["n"], a["scored"], a["unscored"], a["failed"]) == (11, 10, 1, 0)
    assert (a["pairs"], a["ties"]) == (6, 2)
    assert a["pairwise_accuracy"]["value"] == pytest.approx(2 / 6)  # capital 3>1 and 3>2
    wilson = stats.binomtest(2, 6).proportion_ci(0.95, method="wilson")
    assert (a["pairwise_accuracy"]["low"], a["pairwise_accuracy"]["high"]) == pytest.approx((wilson.low, wilson.high))


def test_rank_correlations_over_scored_items_equal_scipys(report):
    human, score = _scored(report)
    a = report["agreement"]
    assert a["spearman"]["value"] == pytest.approx(stats.spearmanr(human, score).statistic)
    assert a["kendall_tau_b"]["value"] == pytest.approx(stats.kendalltau(human, score, variant="b").statistic)


def test_pearson_with_scipys_interval_when_human_values_take_more_than_two_levels(report):
    human, score = _scored(report)
    expected = stats.pearsonr(human, score)
    interval = expected.confidence_interval(0.95)
    a = report["agreement"]
    assert a["pearson"] == pytest.approx({"value": expected.statistic, "low": interval.low, "high": interval.high})
    assert a["cohen_kappa"] is None


def test_correlation_intervals_are_fisher_z_with_the_fieller_standard_errors(report):
    human, _score = _scored(report)
    n, z = len(human), stats.norm.ppf(0.975)
    for name, variance, lost in (("spearman", 1.06, 3), ("kendall_tau_b", 0.437, 4)):
        r = report["agreement"][name]["value"]
        half = z * (variance / (n - lost)) ** 0.5
        low, high = math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)
        assert (report["agreement"][name]["low"], report["agreement"][name]["high"]) == pytest.approx((low, high))


def test_cohen_kappa_when_human_values_are_binary(tmp_path, judge_server):
    grading_judge(judge_server)
    rows = [("a", 1, 4), ("a", 0, 1), ("b", 1, 2), ("b", 0, 3), ("c", 1, 5), ("c", 0, 5), ("d", 1, 3), ("d", 0, 1)]
    out = run_eval("--dataset", str(labelled_file(tmp_path, rows)), "--scorer", "rag_correctness",
                   "--judge-base-url", judge_server.base_url, "--model", f"m-{uuid.uuid4().hex[:6]}", "--json")
    a = json.loads(out.stdout)["agreement"]

    # judge "good" at score/scale >= 0.5: grades 3, 4, 5. human good = 1.
    human_good = [h == 1 for _, h, _ in rows]
    judge_good = [g / 5 >= 0.5 for _, _, g in rows]
    table = stats.contingency.crosstab(human_good, judge_good).count
    n = len(rows)
    observed = (table[0, 0] + table[1, 1]) / n
    expected = (table[0].sum() * table[:, 0].sum() + table[1].sum() * table[:, 1].sum()) / n**2
    assert a["cohen_kappa"]["value"] == pytest.approx((observed - expected) / (1 - expected))
    assert a["binary_accuracy"]["value"] == pytest.approx(observed)
    assert a["pearson"] is None and a["kappa_threshold"] == 0.5


def test_the_reference_section_is_plain_word_recall_of_the_items_reference(tmp_path):
    rows = [{"id": "good", "group": "g", "human": 2, "turn": {"input": [{"role": "user", "content": "Capital?"}],
             "output": "Canberra is the capital of Australia.", "reference": "Canberra, capital of Australia."}},
            {"id": "bad", "group": "g", "human": 1, "turn": {"input": [{"role": "user", "content": "Capital?"}],
             "output": "Sydney.", "reference": "Canberra, capital of Australia."}}]
    path = tmp_path / "ref.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")

    out = run_eval("--dataset", str(path), "--scorer", "rag_correctness", "--json")

    reference = json.loads(out.stdout)["reference"]
    assert (reference["n"], reference["pairs"], reference["pairwise_accuracy"]["value"]) == (2, 1, 1.0)


def test_items_with_the_same_turn_are_judged_once(tmp_path, judge_server):
    grading_judge(judge_server)
    turn = {"trace_id": "shared", "input": [{"role": "user", "content": "Q?"}], "output": "grade 4",
            "reference": "r"}
    other = turn | {"trace_id": "other", "output": "grade 2"}
    lines = [{"id": "a1-x", "group": "a1", "human": 1, "turn": turn}, {"id": "a1-y", "group": "a1", "human": 0,
             "turn": other}, {"id": "a2-x", "group": "a2", "human": 0, "turn": turn},
             {"id": "a2-y", "group": "a2", "human": 1, "turn": other}]
    path = tmp_path / "two-annotators.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")

    out = run_eval("--dataset", str(path), "--scorer", "rag_correctness", "--judge-base-url",
                   judge_server.base_url, "--model", f"m-{uuid.uuid4().hex[:6]}", "--json")

    result = json.loads(out.stdout)
    assert len(judge_server.requests) == 2 and result["cost"]["judge_calls"] == 2
    assert result["agreement"]["pairs"] == 2 and result["agreement"]["pairwise_accuracy"]["value"] == 0.5


def test_a_bad_line_is_named_with_its_number_and_field_and_the_other_lines_still_run(tmp_path):
    good = {"id": "ok", "human": 1, "turn": {"input": [{"role": "user", "content": "Q?"}], "output": "A."}}
    lines = [json.dumps(good), "{not json", json.dumps({"id": "no-human", "turn": good["turn"]}),
             json.dumps(good | {"id": "bad-turn", "turn": {"input": [], "output": "A."}}),
             json.dumps(good | {"id": "ok"}), json.dumps(good | {"id": "ok-2", "human": "high"})]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")

    out = run_eval("--dataset", str(path), "--scorer", "answer_relevancy", "--json")

    assert out.exit_code == 1
    errors = out.stderr.splitlines()
    assert [line.split(": ", 1)[1] for line in errors if line.startswith(str(path))] == [
        "line 2: (line): not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "line 3: human: Field required",
        "line 4: turn.input: List should have at least 1 item after validation, not 0",
        "line 5: id: 'ok' is already the id of line 1",
        "line 6: human: Input should be a valid number, unable to parse string as a number",
    ]
    assert [i["id"] for i in json.loads(out.stdout)["items"]] == ["ok"]


def test_a_file_with_no_readable_item_names_its_bad_lines_and_exits_1(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("[1, 2]\n", encoding="utf-8")

    out = run_eval("--dataset", str(path), "--scorer", "answer_relevancy")

    assert out.exit_code == 1 and out.stderr.strip().splitlines() == [
        f"{path}: line 1: (line): expected a JSON object", f"vigil: error: {path}: no item could be read"]


def test_usage_mistakes_are_one_line(tmp_path):
    path = labelled_file(tmp_path)
    for args, expected in (([], "give --scorer"), (["--scorer", "rag_correctness", "--params", "[1]"],
                                                   "expected a JSON object"),
                           (["--scorer", "rag_correctness", "--params", '{"bogus": 1}'], "bogus")):
        out = run_eval("--dataset", str(path), *args)
        assert out.exit_code == 2 and expected in out.output, out.output


def test_a_monitor_of_the_config_gives_scorer_params_and_judge(tmp_path, judge_server):
    grading_judge(judge_server)
    config = tmp_path / "vigil.yaml"
    config.write_text(f"""
judges: [{{name: graded, base_url: "{judge_server.base_url}", model: m-{uuid.uuid4().hex[:6]}, max_concurrency: 2}}]
monitors: [{{name: correctness, scorer: rag_correctness, judge: graded, params: {{scale: 10}}}}]
""", encoding="utf-8")
    env = {"VIGIL_CONFIG": str(config)}
    from vigil.worker.settings import get_settings, monitor_config
    get_settings.cache_clear()
    monitor_config.cache_clear()
    try:
        out = run_eval("--dataset", str(labelled_file(tmp_path)), "--monitor", "correctness", "--json", env=env)
    finally:
        get_settings.cache_clear()
        monitor_config.cache_clear()

    result = json.loads(out.stdout)
    assert (result["judge"], result["params"]) == ("graded", {"scale": 10})
    assert result["items"][0]["score"] == 10.0 and len(judge_server.requests) == len(LABELLED)


def test_a_monitor_of_a_users_own_rubric_is_measured_against_people_like_a_built_in_scorer(tmp_path, judge_server):
    def script(body):
        grade = int(_GRADE.search(body["messages"][-1]["content"]).group(1))
        return Reply.json({"reason": f"grade {grade}", "score": min(grade, 5)})
    judge_server.script = script
    config = tmp_path / "vigil.yaml"
    config.write_text(f"""
judges: [{{name: graded, base_url: "{judge_server.base_url}", model: m-{uuid.uuid4().hex[:6]}}}]
scorers: [{{name: grade, kind: llm_judge, prompt: "Grade {{{{output}}}} from 0 to 5.", output: {{type: numeric, min: 0, max: 5}}}}]
monitors: [{{name: graded_answers, scorer: grade, judge: graded}}]
""", encoding="utf-8")
    from vigil.worker.settings import get_settings, monitor_config
    get_settings.cache_clear()
    monitor_config.cache_clear()
    try:
        out = run_eval("--dataset", str(labelled_file(tmp_path)), "--monitor", "graded_answers", "--json",
                       env={"VIGIL_CONFIG": str(config)})
    finally:
        get_settings.cache_clear()
        monitor_config.cache_clear()

    result = json.loads(out.stdout)
    assert (result["scorer"], result["judge"]) == ("grade", "graded") and len(result["scorer_version"]) == 12
    assert [i["score"] for i in result["items"]][:3] == [1.0, 0.4, 0.4]
    assert result["agreement"]["pairs"] > 0


def _subprocess_eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIGIL_HOME": str(tmp_path / "home")}
    env.pop("CLICKHOUSE_DSN", None)
    env.pop("REDIS_URL", None)  # no worker's Redis to hand the run to
    return subprocess.run([sys.executable, "-m", "vigil.worker", "eval", "--dataset", str(labelled_file(tmp_path)),
                           "--scorer", "answer_relevancy", "--json", *args],
                          check=False, env=env, capture_output=True, text=True, timeout=120)


def test_a_run_is_kept_as_a_judge_evals_row_in_the_embedded_store(tmp_path):
    done = _subprocess_eval(tmp_path)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    client = connect(f"chdb://{tmp_path / 'home' / 'chdb'}")
    try:
        rows = client.query("SELECT run_id, scorer, scorer_version, judge, judge_model, n, pairs, "
                            "pairwise_accuracy, spearman, dataset_sha256, report_json FROM judge_evals").result_rows
    finally:
        client.close()
    (row,) = rows
    a = result["agreement"]
    assert row[:7] == (result["run_id"], "answer_relevancy", result["scorer_version"], "baseline",
                       result["judge_model"], a["n"], a["pairs"])
    assert row[7] == pytest.approx(a["pairwise_accuracy"]["value"])
    assert row[8] == (a["spearman"]["value"] if a["spearman"] else None)
    assert row[9] == result["dataset_sha256"] and json.loads(row[10])["agreement"] == a
    assert f"kept as run {result['run_id']}" in done.stderr


def test_a_store_held_by_another_process_is_a_one_line_note_and_the_results_still_print(tmp_path):
    holder = connect(f"chdb://{tmp_path / 'home' / 'chdb'}")  # as a running worker's writer holds it
    try:
        holder.command("SELECT 1")
        done = _subprocess_eval(tmp_path)
    finally:
        holder.close()

    assert done.returncode == 0
    assert json.loads(done.stdout)["agreement"]["n"] == len(LABELLED)
    (note,) = done.stderr.strip().splitlines()
    assert note.startswith("not kept: the store") and "held by a running vigil worker" in note
    assert "set REDIS_URL" in note


def test_an_abstention_orders_below_every_scored_item_and_two_abstentions_tie(tmp_path, judge_server):
    grading_judge(judge_server)
    rows = [("worse-abstains", 2, 1), ("worse-abstains", 1, 0), ("better-abstains", 2, 0),
            ("better-abstains", 1, 1), ("both", 2, 0), ("both", 1, 0)]
    out = run_eval("--dataset", str(labelled_file(tmp_path, rows)), "--scorer", "rag_correctness",
                   "--judge-base-url", judge_server.base_url, "--model", f"m-{uuid.uuid4().hex[:6]}", "--json")

    result = json.loads(out.stdout)
    a = result["agreement"]
    assert [i["status"] for i in result["items"]] == ["scored", "abstained", "abstained", "scored", "abstained",
                                                      "abstained"]
    assert (a["abstained"], a["pairs"], a["ties"], a["pairwise_accuracy"]["value"]) == (4, 3, 1, pytest.approx(1 / 3))


def test_limit_takes_the_first_n_items(tmp_path):
    out = run_eval("--dataset", str(labelled_file(tmp_path)), "--scorer", "answer_relevancy", "--limit", "3",
                   "--json")

    assert [i["id"] for i in json.loads(out.stdout)["items"]] == ["item-0", "item-1", "item-2"]


def test_the_tables_show_the_worst_disagreements_with_the_judges_reasons(tmp_path, judge_server):
    grading_judge(judge_server)
    out = run_eval("--dataset", str(labelled_file(tmp_path)), "--scorer", "rag_correctness",
                   "--judge-base-url", judge_server.base_url, "--model", f"m-{uuid.uuid4().hex[:6]}",
                   env={"COLUMNS": "200"})

    assert out.exit_code == 0
    assert "pairwise accuracy" in out.stdout and "0.333 [" in out.stdout
    worst = out.stdout[out.stdout.index("worst disagreements"):]
    assert "item-5 (3)" in worst and "graded as asked." in worst  # people's best "moon" answer, graded 1


def test_a_paused_judge_stops_the_run_with_one_line(tmp_path, judge_server):
    judge_server.script = lambda body: Reply.error(401, "invalid api key")
    out = run_eval("--dataset", str(labelled_file(tmp_path)), "--scorer", "rag_correctness",
                   "--judge-base-url", judge_server.base_url, "--model", f"m-{uuid.uuid4().hex[:6]}")

    assert out.exit_code == 1
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "is paused" in out.stderr


CITES_ORDER = """
scorers:
  - {name: cites_order, kind: regex, pattern: "order [0-9]+"}
monitors:
  - {name: relevancy, scorer: cites_order}
"""


def test_eval_on_review_labels_lists_the_turns_the_scorer_got_wrong_with_the_reviewers_comments(
        store, chdb_dsn, tmp_path):
    """Review labels are single turns, no pairs: `vigil eval` on a `vigil review export` leads with accuracy and
    kappa and lists each turn where the verdict and the reviewer differ, with the verdict's reason and the comment."""
    from vigil.schemas.feedback import Feedback

    from tests.test_review import add_feedback, seed

    turns = {  # answer -> (the reviewer's value, their comment)
        "Your order 42 ships today.": (1, ""),
        "Your order 77 was refunded.": (0, "order 77 is another customer's"),
        "Returns are free within 30 days.": (1, "a FAQ question: there is no order to cite"),
        "I cannot help with that.": (0, "no answer at all"),
    }
    labelled = {}
    for output, (value, comment) in turns.items():
        (trace,) = seed(store, [0.5], output=output)
        labelled[output] = trace
        add_feedback(store, [Feedback(trace_id=trace, name="review", value=value, source="reviewer", author="ana",
                                      monitor="relevancy", queue="random", comment=comment)])
    config, dataset = tmp_path / "vigil.yaml", tmp_path / "labels.jsonl"
    config.write_text(CITES_ORDER)

    exported = CliRunner().invoke(main, ["review", "export", "--monitor", "relevancy", "--out", str(dataset),
                                         "--dsn", chdb_dsn])
    from vigil.worker.settings import get_settings, monitor_config
    get_settings.cache_clear()
    monitor_config.cache_clear()
    try:
        text = run_eval("--dataset", str(dataset), "--monitor", "relevancy",
                        env={"VIGIL_CONFIG": str(config), "COLUMNS": "240"})
        as_json = run_eval("--dataset", str(dataset), "--monitor", "relevancy", "--json",
                           env={"VIGIL_CONFIG": str(config)})
    finally:
        get_settings.cache_clear()
        monitor_config.cache_clear()

    assert exported.exit_code == 0 and text.exit_code == 0, exported.output + text.output
    wrong = [f"shop/{labelled[answer]}" for answer in ("Your order 77 was refunded.",
                                                       "Returns are free within 30 days.")]  # the turns' names
    assert sorted(json.loads(as_json.stdout)["misjudged"]) == sorted(wrong)
    out = text.stdout
    assert out.index("binary accuracy") < out.index("cohen kappa") < out.index("judge and people disagree on 2 of 4")
    assert "pairs" not in out.split("judge and people disagree")[0]  # no pairs: no pairwise figures
    listed = out[out.index("judge and people disagree"):]
    for trace, verdict, person, comment in (
            (wrong[0], "pass 1.000", "bad (0)", "ana: order 77 is another customer's"),
            (wrong[1], "fail 0.000", "good (1)", "ana: a FAQ question: there is no order to cite")):
        row = listed[listed.index(trace[:12]):]
        assert verdict in row and person in row and comment in " ".join(row.split()), row
    for agreed in (labelled["Your order 42 ships today."], labelled["I cannot help with that."]):
        assert agreed[:12] not in listed
