"""Keeping an eval run: one row of ``judge_evals`` (migration 0007) in the store ``vigil report`` reads.

The store is ``CLICKHOUSE_DSN``, else the embedded chDB under ``VIGIL_HOME``. chDB lets one process hold a
directory: while a running worker holds it, the row goes the way every other row goes, onto the write queue in the
worker's Redis (``REDIS_URL``), and the worker's writer inserts it. Without ``REDIS_URL`` the run cannot be kept
then, and ``keep`` says so in one line instead of failing.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from vigil.schemas.broker import broker
from vigil.schemas.rows import JudgeEvalRow
from vigil.worker.eval.runner import EvalReport
from vigil.worker.redact import redact
from vigil.worker.sinks.write_queue import push
from vigil.worker.store import connect, default_dsn, migrate

__all__ = ["NotKept", "keep", "row"]

class NotKept(Exception):
    """The run could not be written to the store (the message says why, in one line)."""


def _value(estimate: Any) -> float | None:
    return None if estimate is None else estimate.value


def row(report: EvalReport) -> JudgeEvalRow:
    """The ``judge_evals`` row of a report."""
    a, c, ref = report.agreement, report.cost, report.reference
    summary = report.model_dump(mode="json", include={"agreement", "cost", "reference", "bad_lines"})
    return JudgeEvalRow(
        run_id=report.run_id, dataset=Path(report.dataset).name, dataset_format=report.format,
        dataset_sha256=report.dataset_sha256, scorer=report.scorer, scorer_version=report.scorer_version,
        params_json=json.dumps(report.params, sort_keys=True), judge=report.judge, judge_model=report.judge_model,
        n=a.n, scored=a.scored, unscored=a.unscored, failed=a.failed, abstained=a.abstained, pairs=a.pairs,
        ties=a.ties, pairwise_accuracy=_value(a.pairwise_accuracy),
        pairwise_accuracy_low=a.pairwise_accuracy.low if a.pairwise_accuracy else None,
        pairwise_accuracy_high=a.pairwise_accuracy.high if a.pairwise_accuracy else None,
        spearman=_value(a.spearman), kendall_tau_b=_value(a.kendall_tau_b), pearson=_value(a.pearson),
        cohen_kappa=_value(a.cohen_kappa),
        reference_pairwise_accuracy=_value(ref.pairwise_accuracy) if ref else None,
        reference_spearman=_value(ref.spearman) if ref else None,
        judge_calls=c.judge_calls, prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
        cost_usd=c.cost_usd, p50_latency_ms=c.p50_latency_ms, p95_latency_ms=c.p95_latency_ms,
        report_json=json.dumps(summary, sort_keys=True), started_at=report.started_at, ended_at=report.ended_at,
    )


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


def _hand_to_writer(kept: JudgeEvalRow, redis_url: str, where: str) -> str:
    """Push the row onto the running worker's write queue; its writer inserts it as it inserts scores."""
    client = broker(redis_url).redis(socket_connect_timeout=5, socket_timeout=10)
    try:
        push(client, [("judge_evals", [kept])])
    except redis.RedisError as exc:
        raise NotKept(f"the store {where} is held by a running vigil worker and its Redis "
                      f"({redact(redis_url)}) refused the run: {exc}") from exc
    finally:
        client.close()
    return f"{where}, through the running worker's writer"


def keep(report: EvalReport, dsn: str | None = None, redis_url: str | None = None) -> str:
    """Write the run's row; returns where. While a worker holds the embedded store, the row goes to that worker's
    writer through ``redis_url``. Raises ``NotKept`` with a one-line reason when neither can take it."""
    dsn = dsn or default_dsn()
    where = redact(dsn)
    kept = row(report)
    if dsn.startswith("chdb://") and _held(Path(dsn.removeprefix("chdb://"))):
        if redis_url:
            return _hand_to_writer(kept, redis_url, where)
        raise NotKept(f"the store {where} is held by a running vigil worker (chDB allows one process); "
                      "set REDIS_URL to the worker's Redis to hand the run to its writer, or stop the worker")
    try:
        with _quiet_stderr():
            client = connect(dsn)
        try:
            migrate(client)
            columns = list(JudgeEvalRow.model_fields)
            client.insert("judge_evals", [[getattr(kept, column) for column in columns]], column_names=columns)
        finally:
            client.close()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotKept(f"the store {where} refused the run: {first}") from exc
    return where
