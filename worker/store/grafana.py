"""Grafana provisioning generated from ``queries``: the dashboard JSON and the alert rules YAML.

``python -m vigil.worker.store.grafana [DEPLOY_DIR]`` rewrites ``deploy/grafana/dashboards/vigil.json`` and
``deploy/grafana/provisioning/alerting/vigil-alerts.yaml``; a test checks the committed files match, so the panels
never drift from the SQL the report and the detector run.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from vigil.worker.store.queries import (
    ALERT_QUERIES,
    ANNOTATIONS,
    PANELS,
    VARIABLES,
    Query,
    bind,
)

__all__ = ["ALERT_RULES", "DATASOURCE", "REPORT_URL", "TURN_LINK", "alert_rules", "dashboard", "write_provisioning"]

DATASOURCE = {"type": "grafana-clickhouse-datasource", "uid": "vigil-clickhouse"}
DASHBOARD_UID = "vigil-quality"

# (panel, x, y, w, h): a 24-column grid, top to bottom in the order an on-call engineer reads it.
_LAYOUT = [
    ("score_mean_ci", 0, 0, 8, 8),  # repeated per monitor: one small chart each, three to a row
    ("score_over_time", 0, 8, 16, 9), ("score_distribution", 16, 8, 8, 9),
    ("score_quantiles", 0, 17, 12, 8), ("status_over_time", 12, 17, 12, 8),
    ("coverage_funnel", 0, 25, 14, 8), ("queue_lag", 14, 25, 10, 8),
    ("judge_calls", 0, 33, 8, 8), ("judge_tokens_cost", 8, 33, 8, 8), ("judge_latency", 16, 33, 8, 8),
    ("judge_summary", 0, 41, 12, 7), ("judge_errors", 12, 41, 6, 7), ("paused_judges", 18, 41, 6, 7),
    ("worst_turns", 0, 48, 24, 10),
    ("monitor_summary", 0, 58, 14, 8), ("recent_alerts", 14, 58, 10, 8),
    ("judge_evals", 0, 66, 24, 8),
    ("judge_agreement", 0, 74, 24, 7),
    ("unscored_reasons", 0, 81, 14, 8), ("dead_letters", 14, 81, 10, 8),
    ("lost_turns", 0, 89, 24, 6),
    ("detector_statistic", 0, 95, 24, 8),
    ("judge_spend", 0, 103, 24, 7),
]


@dataclass(frozen=True)
class _AlertRule:
    """One provisioned rule: a query from ``ALERT_QUERIES`` bound to its windows, and a threshold on ``value``."""

    uid: str
    query: str
    op: str  # gt | lt
    limit: float
    window_minutes: int
    summary: str
    baseline_minutes: int = 0
    min_samples: int = 30
    pending: str = "5m"  # Grafana's "for"
    severity: str = "warning"


ALERT_RULES = [
    _AlertRule("vigil-regression", "detector_firing", op="gt", limit=0.5, window_minutes=10, pending="0s",
               summary="{{ $labels.monitor }}: the sequential regression detector ({{ $labels.rule }}) is firing; "
               "vigil's alert says since when and which segments"),
    _AlertRule("vigil-failure-rate", "failure_rate", op="gt", limit=0.20, window_minutes=15, min_samples=20,
               summary="{{ $labels.monitor }} on {{ $labels.agent }}: {{ humanizePercentage $values.A.Value }} of "
               "scores failed in 15 min"),
    _AlertRule("vigil-failed-runs", "failed_runs", op="gt", limit=0.05, window_minutes=60, min_samples=20,
               summary="{{ $labels.agent }}: {{ humanizePercentage $values.A.Value }} of its runs failed in 1 h"),
    _AlertRule("vigil-coverage-drop", "coverage_drop", op="lt", limit=0.90, window_minutes=60, min_samples=20,
               summary="{{ $labels.monitor }} on {{ $labels.agent }}: only {{ humanizePercentage $values.A.Value }} "
               "of sampled turns scored in 1 h"),
    _AlertRule("vigil-judge-agreement", "agreement_low", op="lt", limit=0.70, window_minutes=24 * 60,
               summary="{{ $labels.monitor }} on {{ $labels.agent }}: the judge agrees with human feedback on only "
               "{{ humanizePercentage $values.A.Value }} of pairs in 24 h"),
    _AlertRule("vigil-judge-paused", "judge_paused", op="gt", limit=0.5, window_minutes=60, pending="0s",
               severity="critical", summary="judge {{ $labels.judge }} is paused (refused with 401/402/403/404)"),
]


def _target(query: Query, sql: str) -> dict[str, Any]:
    timeseries = query.kind == "timeseries"
    return {"refId": "A", "datasource": DATASOURCE, "editorType": "sql", "rawSql": sql.strip(),
            "format": 0 if timeseries else 1, "queryType": "timeseries" if timeseries else "table"}


def _panel(index: int, query: Query, x: int, y: int, w: int, h: int) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "id": index + 1, "type": query.kind, "title": query.title, "description": query.description,
        "datasource": DATASOURCE, "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [_target(query, query.sql)],
        "fieldConfig": {"defaults": {"unit": query.unit} if query.unit else {}, "overrides": []},
        "options": {},
    }
    if query.name == "score_over_time":
        panel["fieldConfig"]["defaults"] |= {
            "min": 0, "max": 1,
            "displayName": "${__field.labels.agent} / ${__field.labels.monitor} @ v${__field.labels.scorer_version}",
        }
    if query.name == "score_mean_ci":  # one panel per monitor; per agent its mean and the 95% interval dashed
        panel |= {"repeat": "monitor", "repeatDirection": "h", "maxPerRow": 3}
        panel["fieldConfig"]["defaults"] |= {"min": 0, "max": 1,
                                             "displayName": "${__field.labels.agent} ${__field.name}"}
        panel["fieldConfig"]["overrides"] = [
            {"matcher": {"id": "byRegexp", "options": "^ci_(low|high).*"},
             "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [4, 4]}},
                            {"id": "custom.lineWidth", "value": 1}]},
            {"matcher": {"id": "byRegexp", "options": "^turns.*"},
             "properties": [{"id": "custom.hideFrom", "value": {"viz": True, "legend": True, "tooltip": False}}]},
        ]
    if query.kind == "barchart":  # long (monitor, bin, turns) to one bar series per monitor
        panel["transformations"] = [{"id": "groupingToMatrix", "options": {
            "columnField": "monitor", "rowField": "bin", "valueField": "turns"}}]
        panel["options"] = {"xField": "bin\\monitor", "showValue": "never", "stacking": "none"}
    if query.name == "detector_statistic":  # the statistic with its threshold drawn at 1.0; firing as bars
        panel["fieldConfig"]["defaults"] |= {
            "min": 0, "displayName": "${__field.labels.monitor} ${__field.name}",
            "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None},
                                                         {"color": "red", "value": 1}]},
            "custom": {"thresholdsStyle": {"mode": "line"}},
        }
    if query.name == "judge_agreement":
        panel["fieldConfig"]["defaults"] |= {"min": 0, "max": 1}
    if query.name == "coverage_funnel":
        panel["fieldConfig"]["defaults"]["custom"] = {"cellOptions": {"type": "gauge", "mode": "basic"}}
    if query.name == "worst_turns":  # each trace id opens the turn's page on the report server
        panel["fieldConfig"]["defaults"]["custom"] = {"cellOptions": {"type": "auto"}, "inspect": True}
        panel["fieldConfig"]["overrides"] = [{"matcher": {"id": "byName", "options": "trace_id"}, "properties": [
            {"id": "links", "value": [{"title": "Open the turn (span tree, tools, scores)", "url": TURN_LINK,
                                       "targetBlank": True}]}]}]
    return panel


def _annotation(query: Query) -> dict[str, Any]:
    """Marks on every time series where the query's rows fall (vigil's alerts where they fired)."""
    return {"name": query.title, "datasource": DATASOURCE, "enable": True, "iconColor": "red",
            "target": {"refId": "Anno", "datasource": DATASOURCE, "editorType": "sql", "format": 1,
                       "queryType": "annotation", "rawSql": query.sql.strip()}}


def _variable(query: Query) -> dict[str, Any]:
    return {"name": query.name, "label": query.name, "type": "query", "datasource": DATASOURCE,
            "query": query.sql, "definition": query.sql, "refresh": 2, "multi": True, "includeAll": True,
            "current": {"text": "All", "value": "$__all"}, "sort": 1}


# Where `vigil report --serve` answers, for the data links to a turn's page (a dashboard text box to set once).
REPORT_URL = {"name": "report_url", "label": "vigil report --serve URL", "type": "textbox", "hide": 0,
              "query": "http://127.0.0.1:8765", "current": {"text": "http://127.0.0.1:8765",
                                                           "value": "http://127.0.0.1:8765"}}
TURN_LINK = "${report_url}/turn/${__value.raw}"


def dashboard() -> dict[str, Any]:
    """The vigil dashboard: every panel's SQL straight from ``PANELS``."""
    return {
        "uid": DASHBOARD_UID, "title": "vigil: agent quality", "tags": ["vigil", "llm", "quality"],
        "timezone": "utc", "schemaVersion": 39, "version": 1, "editable": True, "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [*(_variable(q) for q in VARIABLES.values()), REPORT_URL]},
        "annotations": {"list": [_annotation(q) for q in ANNOTATIONS.values()]},
        "panels": [_panel(i, PANELS[name], x, y, w, h) for i, (name, x, y, w, h) in enumerate(_LAYOUT)],
    }


def _rule(rule: _AlertRule) -> dict[str, Any]:
    query = ALERT_QUERIES[rule.query]
    sql = bind(query.sql, window_minutes=rule.window_minutes, baseline_minutes=rule.baseline_minutes,
               min_samples=rule.min_samples)
    span_s = (rule.window_minutes + rule.baseline_minutes + 60) * 60
    return {
        "uid": rule.uid, "title": query.title, "condition": "C",
        "data": [
            {"refId": "A", "relativeTimeRange": {"from": span_s, "to": 0}, "datasourceUid": DATASOURCE["uid"],
             "model": _target(query, sql) | {"intervalMs": 60000, "maxDataPoints": 43200}},
            {"refId": "C", "datasourceUid": "__expr__",
             "model": {"refId": "C", "type": "threshold", "expression": "A", "datasource": {
                 "type": "__expr__", "uid": "__expr__"},
                 "conditions": [{"evaluator": {"type": rule.op, "params": [rule.limit]}}]}},
        ],
        "noDataState": "OK", "execErrState": "Error", "for": rule.pending,
        "annotations": {"summary": rule.summary, "description": query.description,
                        "dashboardUid": DASHBOARD_UID},
        "labels": {"service": "vigil", "severity": rule.severity},
        "isPaused": False,
    }


def alert_rules() -> dict[str, Any]:
    """Grafana's file-provisioned alert rules (apiVersion 1), one group evaluated every minute."""
    return {"apiVersion": 1, "groups": [{"orgId": 1, "name": "vigil", "folder": "vigil", "interval": "1m",
                                         "rules": [_rule(r) for r in ALERT_RULES]}]}


class _Dumper(yaml.SafeDumper):
    """Readable YAML: SQL as literal blocks, no anchors for repeated values."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)


def write_provisioning(deploy_dir: str | Path = "deploy") -> list[Path]:
    """Write the generated dashboard and alert rules under ``deploy_dir/grafana``."""
    root = Path(deploy_dir) / "grafana"
    board = root / "dashboards" / "vigil.json"
    rules = root / "provisioning" / "alerting" / "vigil-alerts.yaml"
    for path in (board, rules):
        path.parent.mkdir(parents=True, exist_ok=True)
    board.write_text(json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    header = "# Generated by `python -m vigil.worker.store.grafana` from worker/store/queries.py: edit the SQL there.\n"
    rules.write_text(header + yaml.dump(alert_rules(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120),
                     encoding="utf-8")
    return [board, rules]


if __name__ == "__main__":
    for written in write_provisioning(sys.argv[1] if len(sys.argv) > 1 else "deploy"):
        print(written)
