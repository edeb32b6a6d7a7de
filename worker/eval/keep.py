"""Keeping an eval run: one row of ``judge_evals`` (migration 0007) in the store ``vigil report`` reads.

The store is ``CLICKHOUSE_DSN``, else the embedded chDB under ``VIGIL_HOME``. chDB lets one process hold a
directory: while a running worker holds it, the run cannot be kept, and ``keep`` says so instead of failing.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from worker.eval.runner import EvalReport
from worker.store import connect, default_dsn, migrate

__all__ = ["COLUMNS", "NotKept", "keep", "row"]

COLUMNS = (
    "run_id", "dataset", "dataset_format", "dataset_sha256", "scorer", "scorer_version", "params_json", "judge",
    "judge_model", "n", "scored", "unscored", "failed", "abstained", "pairs", "ties", "pairwise_accuracy",
    "pairwise_accuracy_low", "pairwise_accuracy_high", "spearman", "kendall_tau_b", "pearson", "cohen_kappa",
    "reference_pairwise_accuracy", "reference_spearman", "judge_calls", "prompt_tokens", "completion_tokens",
    "cost_usd", "p50_latency_ms", "p95_latency_ms", "report_json", "started_at", "ended_at",
)


class NotKept(Exception):
    """The run could not be written to the store (the message says why, in one line)."""


def _value(estimate: Any) -> float | None:
    return None if estimate is None else estimate.value


def row(report: EvalReport) -> list[Any]:
    """The ``judge_evals`` row of a report, in ``COLUMNS`` order."""
    a, c, ref = report.agreement, report.cost, report.reference
    summary = report.model_dump(mode="json", include={"agreement", "cost", "reference", "bad_lines"})
    values = {
        "run_id": report.run_id, "dataset": Path(report.dataset).name, "dataset_format": report.format,
        "dataset_sha256": report.dataset_sha256, "scorer": report.scorer, "scorer_version": report.scorer_version,
        "params_json": json.dumps(report.params, sort_keys=True), "judge": report.judge,
        "judge_model": report.judge_model, "n": a.n, "scored": a.scored, "unscored": a.unscored,
        "failed": a.failed, "abstained": a.abstained, "pairs": a.pairs, "ties": a.ties,
        "pairwise_accuracy": _value(a.pairwise_accuracy),
        "pairwise_accuracy_low": a.pairwise_accuracy.low if a.pairwise_accuracy else None,
        "pairwise_accuracy_high": a.pairwise_accuracy.high if a.pairwise_accuracy else None,
        "spearman": _value(a.spearman), "kendall_tau_b": _value(a.kendall_tau_b), "pearson": _value(a.pearson),
        "cohen_kappa": _value(a.cohen_kappa),
        "reference_pairwise_accuracy": _value(ref.pairwise_accuracy) if ref else None,
        "reference_spearman": _value(ref.spearman) if ref else None,
        "judge_calls": c.judge_calls, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
        "cost_usd": c.cost_usd, "p50_latency_ms": c.p50_latency_ms, "p95_latency_ms": c.p95_latency_ms,
        "report_json": json.dumps(summary, sort_keys=True), "started_at": report.started_at,
        "ended_at": report.ended_at,
    }
    return [values[column] for column in COLUMNS]


def _held(directory: Path) -> bool:
    """Whether another process holds the chDB directory (ClickHouse flocks its ``status`` file while open)."""
    status = directory / "status"
    if not status.exists():
        return False
    with status.open("rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


@contextmanager
def _quiet_stderr():
    """chDB's engine writes its own errors straight to file descriptor 2; keep them off the user's terminal."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def keep(report: EvalReport, dsn: str | None = None) -> str:
    """Write the run's row; returns where. Raises ``NotKept`` with a one-line reason when the store refuses."""
    dsn = dsn or default_dsn()
    where = dsn.split("@")[-1] if "://" in dsn else dsn  # never echo a password from a DSN
    if dsn.startswith("chdb://") and _held(Path(dsn.removeprefix("chdb://"))):
        raise NotKept(f"the store {where} is held by a running vigil worker (chDB allows one process); "
                      "stop it, or set CLICKHOUSE_DSN to a ClickHouse server, to keep eval runs")
    try:
        with _quiet_stderr():
            client = connect(dsn)
        try:
            migrate(client)
            client.insert("judge_evals", [row(report)], column_names=list(COLUMNS))
        finally:
            client.close()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotKept(f"the store {where} refused the run: {first}") from exc
    return where
