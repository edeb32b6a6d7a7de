"""The Grafana provisioning: every panel's and alert rule's SQL, as committed in deploy/grafana, runs on chDB over
seeded data with Grafana's macros substituted, returns the columns its panel expects, and names the provisioned
datasource."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from vigil.worker.store import connect, migrate
from vigil.worker.store.grafana import DATASOURCE, alert_rules, dashboard
from vigil.worker.store.queries import (
    ALERT_QUERIES,
    ANNOTATIONS,
    DETECTOR_QUERIES,
    PANELS,
    VARIABLES,
    bind,
    render,
)

from tests.quality_seed import seed_everything

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "deploy" / "grafana"
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)

BOARD = json.loads((GRAFANA / "dashboards" / "vigil.json").read_text())
RULES = yaml.safe_load((GRAFANA / "provisioning" / "alerting" / "vigil-alerts.yaml").read_text())
DATASOURCES = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "clickhouse.yaml").read_text())
BY_TITLE = {q.title: q for q in PANELS.values()}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """One chDB store for the module, seeded with two agents, two monitors and a paused judge."""
    client = connect(f"chdb://{tmp_path_factory.mktemp('dashboards') / 'chdb'}")
    migrate(client)
    seed_everything(client, now=NOW)
    yield client
    client.close()


def _panels() -> list[dict]:
    return BOARD["panels"]


def _rules() -> list[dict]:
    return [rule for group in RULES["groups"] for rule in group["rules"]]


def test_the_committed_dashboard_and_alert_rules_are_generated_from_the_shared_queries():
    """Run `python -m vigil.worker.store.grafana` after editing worker/store/queries.py."""
    assert BOARD == dashboard()
    assert RULES == alert_rules()


def test_every_panel_of_the_dashboard_is_a_named_shared_query():
    assert sorted(BY_TITLE[p["title"]].name for p in _panels()) == sorted(PANELS)
    for panel in _panels():
        assert panel["targets"][0]["rawSql"] == BY_TITLE[panel["title"]].sql.strip()


@pytest.mark.parametrize("panel", _panels(), ids=lambda p: BY_TITLE[p["title"]].name)
def test_each_panel_query_runs_with_macros_substituted_and_returns_its_columns(seeded, panel):
    query = BY_TITLE[panel["title"]]
    sql = render(panel["targets"][0]["rawSql"], start=NOW - timedelta(hours=24), end=NOW, interval_s=900)

    result = seeded.query(sql)

    assert tuple(result.column_names) == query.columns
    assert result.result_rows, f"{query.name} returned no rows on the seeded data"


def test_a_panel_narrowed_by_the_monitor_variable_shows_only_that_monitor(seeded):
    sql = render(PANELS["monitor_summary"].sql, start=NOW - timedelta(hours=24), end=NOW,
                 variables={"monitor": ["relevancy"], "agent": ["assistant", "support-bot"]})

    rows = seeded.query(sql).result_rows

    assert {row[2] for row in rows} == {"relevancy"} and {row[1] for row in rows} == {"assistant", "support-bot"}


def test_the_coverage_funnel_panel_counts_the_traces_that_joined_another_traces_run_per_agent(seeded):
    [panel] = [p for p in _panels() if BY_TITLE[p["title"]].name == "coverage_funnel"]
    result = seeded.query(render(panel["targets"][0]["rawSql"], start=NOW - timedelta(hours=24), end=NOW,
                                 interval_s=900))

    joined = {(row["agent"], row["monitor"]): row["joined"]
              for row in (dict(zip(result.column_names, r, strict=True)) for r in result.result_rows)}

    assert joined == {("support-bot", "relevancy"): 3, ("support-bot", "alignment"): 3,
                      ("assistant", "relevancy"): 0, ("assistant", "alignment"): 0}
    assert "joined: traces that joined another trace's run" in panel["description"]


QUERY_VARIABLES = [v for v in BOARD["templating"]["list"] if v["type"] == "query"]


@pytest.mark.parametrize("variable", QUERY_VARIABLES, ids=lambda v: v["name"])
def test_each_dashboard_variable_lists_values(seeded, variable):
    rows = seeded.query(variable["query"]).result_rows

    assert variable["query"] == VARIABLES[variable["name"]].sql and rows


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["uid"])
def test_each_alert_rule_query_returns_labels_and_one_numeric_value(seeded, rule):
    model = rule["data"][0]["model"]
    span = timedelta(seconds=rule["data"][0]["relativeTimeRange"]["from"])

    result = seeded.query(render(model["rawSql"], start=NOW - span, end=NOW))

    expected = next(q for q in ALERT_QUERIES.values() if q.title == rule["title"])
    assert tuple(result.column_names) == expected.columns and expected.columns[-1] == "value"
    assert result.result_rows
    assert all(isinstance(row[-1], float) for row in result.result_rows)
    assert all(isinstance(cell, str) for row in result.result_rows for cell in row[:-1])


def test_the_judge_paused_alert_query_flags_the_judge_refused_with_401(seeded):
    sql = render(bind(ALERT_QUERIES["judge_paused"].sql, window_minutes=60), start=NOW, end=NOW)

    assert dict(seeded.query(sql).result_rows) == {"baseline": 0.0, "openai-main": 1.0}


@pytest.mark.parametrize("name", sorted(DETECTOR_QUERIES))
def test_each_detector_query_runs_and_returns_its_columns(seeded, name):
    query = DETECTOR_QUERIES[name]
    sql = render(bind(query.sql, window_minutes=60, baseline_minutes=7 * 24 * 60, min_samples=30),
                 start=NOW, end=NOW)

    result = seeded.query(sql)

    assert tuple(result.column_names) == query.columns
    assert result.result_rows


def test_the_datasource_is_the_clickhouse_plugin_with_the_uid_every_panel_and_rule_names():
    (source,) = DATASOURCES["datasources"]
    assert (source["type"], source["uid"]) == (DATASOURCE["type"], DATASOURCE["uid"])
    for panel in _panels():
        assert panel["datasource"] == DATASOURCE
        assert all(target["datasource"] == DATASOURCE for target in panel["targets"])
    for variable in QUERY_VARIABLES:
        assert variable["datasource"] == DATASOURCE
    for rule in _rules():
        assert rule["data"][0]["datasourceUid"] == source["uid"]
        assert rule["data"][0]["model"]["datasource"] == DATASOURCE
        assert rule["condition"] == rule["data"][-1]["refId"]


def test_the_alert_rules_cover_regression_failure_rate_failed_runs_coverage_agreement_and_paused_judges():
    assert {r["uid"] for r in _rules()} == {"vigil-regression", "vigil-failure-rate", "vigil-failed-runs",
                                            "vigil-coverage-drop", "vigil-judge-agreement", "vigil-judge-paused"}


def test_panels_do_not_overlap_on_the_grid():
    cells = set()
    for panel in _panels():
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & mine, panel["title"]
        cells |= mine


def test_the_dashboard_provider_loads_the_directory_the_dashboard_is_mounted_at():
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "vigil.yaml").read_text())

    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/vigil"


def test_the_dashboard_marks_alerts_where_they_fired_with_the_shared_annotation_query(seeded):
    [annotation] = BOARD["annotations"]["list"]
    sql = annotation["target"]["rawSql"]
    assert sql == ANNOTATIONS["alerts_fired"].sql.strip()

    every = seeded.query(render(sql, start=NOW - timedelta(hours=24), end=NOW)).result_rows
    narrowed = seeded.query(render(sql, start=NOW - timedelta(hours=24), end=NOW,
                                   variables={"monitor": ["alignment"]})).result_rows

    assert {tuple(row[3]) for row in every} == {("regression", "support-bot", "relevancy"), ("judge_paused", "openai-main")}
    assert [tuple(row[3]) for row in narrowed] == [("judge_paused", "openai-main")]  # not about a monitor: kept
    stored = dict(seeded.query("SELECT monitor, message FROM alerts FINAL").result_rows)
    assert sorted(row[2] for row in every) == sorted(stored.values()), "the text is the alert's own sentence"
