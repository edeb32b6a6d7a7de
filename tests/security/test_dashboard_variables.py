"""Hostile names in the dashboard's variables (project, agent, monitor): a selection narrows a panel to exactly the
rows of the names selected, whatever bytes the names hold, run on chDB with the SQL as Grafana would send it.

Grafana's formats are ported from its source (``formatRegistry``, scenes and legacy alike): ``render`` holds the
``percentencode`` the dashboard uses; the ``singlequote`` it used before is ported here, to show what it let
through. The ClickHouse plugin's ``$__conditionalAll`` is ported in ``render`` too. No Grafana server runs here.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from vigil.worker.store import connect, migrate
from vigil.worker.store.queries import PANELS, VARIABLES, _vars, option_value, render

from tests.quality_seed import insert_scores, score_row

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
PLAIN = "plain"

# Names an agent, a monitor or a project may carry: quotes and backslashes (ClickHouse escapes), percent signs and
# already-encoded text (a decode too many), commas and braces (Grafana's list syntax), unicode, Grafana's own All.
HOSTILE = [
    "zz\\') OR 1=1 --", "a'b", "back\\slash", "trailing\\", "quote\"d", "100%", "%27", "%41", "A", "x,y", "x", "y",
    "{x}", "日本語 エージェント", "All", "$__all", "tab\there", "new\nline", " spaced ",
]
DIMENSIONS = ("project", "agent", "monitor")
TURNS = {name: 2 + i for i, name in enumerate(HOSTILE)}  # each name its own number of turns


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Per dimension, every hostile name in that column (the two others plain), each with its own turn count."""
    client = connect(f"chdb://{tmp_path_factory.mktemp('variables') / 'chdb'}")
    migrate(client)
    rows = []
    for dim in DIMENSIONS:
        for name, turns in TURNS.items():
            names = {d: PLAIN for d in DIMENSIONS} | {dim: name}
            rows += [score_row(at=NOW - timedelta(minutes=10 + i), score=0.5, seq=i, project=names["project"],
                               agent=names["agent"], monitor=names["monitor"]) for i in range(turns)]
    insert_scores(client, rows)
    yield client
    client.close()


def _summary(store, **variables) -> dict[tuple[str, str, str], int]:
    sql = render(PANELS["monitor_summary"].sql, start=NOW - timedelta(hours=1), end=NOW, variables=variables)
    return {(r[0], r[1], r[2]): r[5] for r in store.query(sql).result_rows}


def _expected(dim: str, names: list[str]) -> dict[tuple[str, str, str], int]:
    keys = {}
    for name in names:
        row = tuple(name if d == dim else PLAIN for d in DIMENSIONS)
        keys[row] = TURNS[name]
    return keys


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("dim", DIMENSIONS)
def test_selecting_one_hostile_name_shows_exactly_its_rows(store, dim, name):
    assert _summary(store, **{dim: [name]}) == _expected(dim, [name])


@pytest.mark.parametrize("dim", DIMENSIONS)
def test_selecting_x_and_y_is_not_selecting_the_name_x_comma_y(store, dim):
    assert _summary(store, **{dim: ["x", "y"]}) == _expected(dim, ["x", "y"])
    assert _summary(store, **{dim: ["x,y"]}) == _expected(dim, ["x,y"])


def test_selecting_every_hostile_name_at_once_shows_exactly_their_rows(store):
    assert _summary(store, agent=HOSTILE) == _expected("agent", HOSTILE)


def test_all_shows_every_row_and_a_name_spelled_like_all_is_only_itself(store):
    everything = _summary(store)
    assert sum(everything.values()) == 3 * sum(TURNS.values())
    assert _summary(store, agent=["$__all"]) == _expected("agent", ["$__all"])
    assert _summary(store, agent=["All"]) == _expected("agent", ["All"])


@pytest.mark.parametrize("dim", DIMENSIONS)
def test_every_panel_narrowed_to_the_injection_name_runs_and_shows_nothing_else(store, dim):
    name = "zz\\') OR 1=1 --"
    for query in (q for q in PANELS.values() if f"${{{dim}:percentencode}}" in q.sql):
        sql = render(query.sql, start=NOW - timedelta(hours=1), end=NOW, variables={dim: [name]})
        result = store.query(sql)
        if dim in result.column_names:
            column = result.column_names.index(dim)
            assert {row[column] for row in result.result_rows} <= {name}, query.name


def _grafana_singlequote(values: list[str]) -> str:
    """Grafana's ``singlequote`` (formatRegistry): each value's ``'`` escaped as ``\\'``, nothing else; quoted and
    joined with commas."""
    return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)


def test_the_old_singlequote_filter_let_the_injection_name_widen_it_and_the_new_one_does_not(store):
    name = "zz\\') OR 1=1 --"
    template = "SELECT DISTINCT agent FROM scores FINAL WHERE monitor = 'plain' AND {filter}\nORDER BY agent"
    # The old phrase as $__conditionalAll leaves it when a name is selected, then Grafana's singlequote of the old
    # option value (the raw name).
    before = template.format(filter="agent IN (${agent:singlequote})").replace(
        "${agent:singlequote}", _grafana_singlequote([name]))
    after = render(template.format(filter=_vars("agent")), start=NOW, end=NOW, variables={"agent": [name]})

    widened = [row[0] for row in store.query(before).result_rows]
    assert len(widened) > 1 and name in widened  # every agent: the name closed the literal, OR 1=1 did the rest
    assert [row[0] for row in store.query(after).result_rows] == [name]


def _dashboard_sql() -> list[str]:
    board = json.loads((GRAFANA / "dashboards" / "vigil.json").read_text())
    sql = [t["rawSql"] for p in board["panels"] for t in p["targets"]]
    sql += [a["target"]["rawSql"] for a in board["annotations"]["list"]]
    sql += [v["query"] for v in board["templating"]["list"]]
    rules = yaml.safe_load((GRAFANA / "provisioning" / "alerting" / "vigil-alerts.yaml").read_text())
    sql += [d["model"]["rawSql"] for g in rules["groups"] for r in g["rules"] for d in r["data"] if "rawSql" in d["model"]]
    return sql


def test_every_variable_in_the_provisioned_sql_is_percent_encoded():
    formats = set()
    for sql in _dashboard_sql():
        assert "singlequote" not in sql and "sqlstring" not in sql
        formats |= {m.group(2) for m in re.finditer(r"\$\{(\w+)(?::(\w+))?\}", sql)}
        # a bare $var only as $__conditionalAll's second argument, which the plugin reads and drops
        rest = re.sub(r",\s*\$\w+\)", ")", re.sub(r"\$\{\w+:percentencode\}", "", sql))
        assert not re.findall(r"\$(?!__)\w+", rest), sql
    assert formats == {"percentencode"}


@pytest.mark.parametrize("name", ["project", "agent", "monitor"])
def test_each_variable_offers_the_url_encoded_name_as_value_and_the_name_as_text(store, name):
    rows = store.query(VARIABLES[name].sql).result_rows

    assert {text for _, text in rows} == set(HOSTILE) | {PLAIN}
    assert all(value == option_value(text) for value, text in rows)
    assert all(re.fullmatch(r"[A-Za-z0-9._~%-]+", value) for value, _ in rows)
