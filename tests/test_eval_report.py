"""Kept `vigil eval` runs in `vigil report`: switching the judge shows as two runs with their agreement."""

from __future__ import annotations

import uuid

from rich.console import Console
from vigil.schemas import JudgeConfig, MonitorConfig
from vigil.worker.eval.items import load_dataset
from vigil.worker.eval.keep import keep
from vigil.worker.eval.runner import evaluate
from vigil.worker.judge import build_judge
from vigil.worker.report import build_report
from vigil.worker.report.html import render_html
from vigil.worker.report.text import print_report
from vigil.worker.scorers import build_scorer
from vigil.worker.store import connect

from tests.test_eval import grading_judge, labelled_file


async def _run(dataset, judge_config: JudgeConfig):
    scorer = build_scorer(MonitorConfig(name="eval", scorer="rag_correctness", judge=judge_config.name))
    judge = build_judge(judge_config)
    try:
        return await evaluate(dataset, scorer, judge, concurrency=4)
    finally:
        if hasattr(judge, "aclose"):
            await judge.aclose()


async def test_two_judges_runs_are_listed_newest_first_with_their_agreement(tmp_path, judge_server):
    grading_judge(judge_server)
    dataset = load_dataset(labelled_file(tmp_path))
    dsn = f"chdb://{tmp_path / 'chdb'}"
    baseline = await _run(dataset, JudgeConfig(name="baseline", kind="baseline"))
    keep(baseline, dsn)
    scripted = await _run(dataset, JudgeConfig(name="graded", base_url=judge_server.base_url,
                                               model=f"m-{uuid.uuid4().hex[:6]}"))
    keep(scripted, dsn)

    client = connect(dsn)
    try:
        report = build_report(client)
    finally:
        client.close()

    assert [(e.run_id, e.judge, e.pairwise_accuracy) for e in report.judge_evals] == [
        (r.run_id, r.judge, r.agreement.pairwise_accuracy.value) for r in (scripted, baseline)]
    assert report.judge_evals[0].reference_pairwise_accuracy == scripted.reference.pairwise_accuracy.value
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    assert "judge evaluations (vigil eval)" in text and f"graded ({scripted.judge_model})" in text
    assert "Judge evaluations (vigil eval)" in render_html(report)
