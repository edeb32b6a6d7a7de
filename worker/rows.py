"""A scorer's result on a turn, as the ``scores`` row."""

from __future__ import annotations

import json

from schemas import MonitorConfig, Score, ScoreResult, Turn, score_id

__all__ = ["score_row"]


def score_row(turn: Turn, monitor: MonitorConfig, result: ScoreResult) -> Score:
    usage = result.usage
    value = None if result.score is None else min(max(result.score, 0.0), result.scale)
    return Score(
        score_id=score_id(turn.trace_id, turn.span_id, monitor.name, result.scorer_version),
        trace_id=turn.trace_id,
        span_id=turn.span_id or "",
        session_id=turn.session_id or "",
        project=turn.project,
        agent=turn.agent,
        environment=turn.environment,
        monitor=monitor.name,
        scorer=result.scorer,
        scorer_version=result.scorer_version,
        status=result.status,
        score=value,
        scale=result.scale,
        label=result.label or "",
        reason=result.reason or "",
        steps_json=json.dumps([s.model_dump(mode="json") for s in result.steps], ensure_ascii=False, default=str),
        details_json=json.dumps(result.details, ensure_ascii=False, default=str),
        error_type=result.error_type or "",
        judge=monitor.judge,
        judge_model=result.judge_model or "",
        judge_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_usd=usage.cost_usd,
        latency_ms=usage.latency_ms,
        trace_time=turn.started_at,
    )
