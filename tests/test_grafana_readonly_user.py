"""Grafana reads ClickHouse as a read-only user of its own (deploy/clickhouse/grafana-readonly.sql), never as the
writer: the provisioning names it, compose gives Grafana its password only, the SQL parses (chDB's parser; chDB has
no access control to run it), and under the profile's setting an INSERT is refused while the dashboard still runs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from clickhouse_connect.driver.exceptions import DatabaseError
from vigil.worker.store import connect, migrate
from vigil.worker.store.migrations import _statements
from vigil.worker.store.queries import PANELS, render

from tests.quality_seed import seed_everything

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
USER_SQL = DEPLOY / "clickhouse" / "grafana-readonly.sql"
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    client = connect(f"chdb://{tmp_path_factory.mktemp('readonly') / 'chdb'}")
    migrate(client)
    seed_everything(client, now=NOW)
    yield client
    client.close()


def _formatted(store) -> list[str]:
    """Each statement of the user SQL as ClickHouse's own parser reads it (formatQuery fails on a syntax error)."""
    return [store.query("SELECT formatQuery(%(s)s)", parameters={"s": statement}).result_rows[0][0]
            for _, statement in _statements(USER_SQL.read_text())]


def _profile_settings(store) -> str:
    [profile] = [s for s in _formatted(store) if s.startswith("CREATE SETTINGS PROFILE")]
    return profile.split(" SETTINGS ", 1)[1]


def test_the_read_only_user_sql_parses_and_grants_only_select_on_vigils_database(store):
    profile, user, grant = _formatted(store)

    assert profile.startswith("CREATE SETTINGS PROFILE OR REPLACE `vigil_grafana_readonly`")
    assert re.search(r"\breadonly = 1\b", _profile_settings(store))
    assert user.startswith("CREATE USER OR REPLACE vigil_grafana IDENTIFIED WITH sha256_password BY {password:String}")
    assert "SETTINGS PROFILE `vigil_grafana_readonly`" in user
    assert grant == "GRANT SELECT ON default.* TO vigil_grafana"


def test_grafanas_datasource_connects_as_the_read_only_user_and_asks_for_readonly_on_every_query():
    [source] = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "clickhouse.yaml").read_text())[
        "datasources"]

    assert source["jsonData"]["username"] == "vigil_grafana"
    assert {"setting": "readonly", "value": "1"} in source["jsonData"]["customSettings"]
    assert source["secureJsonData"]["password"] == "${GRAFANA_CLICKHOUSE_PASSWORD}"


def test_compose_gives_grafana_the_read_only_password_only_and_creates_the_user_first():
    services = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    grafana, creator = services["grafana"], services["clickhouse-grafana-user"]

    assert "CLICKHOUSE_PASSWORD" not in grafana["environment"]  # the writer's password stays with vigil
    assert grafana["environment"]["GRAFANA_CLICKHOUSE_PASSWORD"].startswith("${GRAFANA_CLICKHOUSE_PASSWORD:?")
    assert grafana["depends_on"]["clickhouse-grafana-user"] == {"condition": "service_completed_successfully"}
    assert "./clickhouse/grafana-readonly.sql:/etc/vigil/grafana-readonly.sql:ro" in creator["volumes"]
    assert "--queries-file /etc/vigil/grafana-readonly.sql" in " ".join(creator["entrypoint"])


def test_under_the_profiles_readonly_setting_an_insert_and_a_drop_are_refused(store):
    readonly = int(re.search(r"\breadonly = (\d)", _profile_settings(store)).group(1))
    before = store.query("SELECT count() FROM scores").result_rows[0][0]

    for statement in ("INSERT INTO alerts (alert_id) VALUES ('x')", "DROP TABLE scores", "ALTER TABLE scores DELETE "
                      "WHERE 1", "CREATE TABLE x (a UInt8) ENGINE = Memory"):
        with pytest.raises(DatabaseError, match="READONLY|readonly"):
            store.command(statement, settings={"readonly": readonly})

    assert store.query("SELECT count() FROM scores").result_rows[0][0] == before


@pytest.mark.parametrize("name", sorted(PANELS))
def test_every_panel_runs_under_the_profiles_readonly_setting(store, name):
    sql = render(PANELS[name].sql, start=NOW - timedelta(hours=24), end=NOW, interval_s=900)

    assert store.query(sql, settings={"readonly": 1}).column_names == PANELS[name].columns


def test_the_plugins_query_timeout_is_refused_under_readonly_so_the_profile_lets_it_change(store):
    with pytest.raises(DatabaseError, match="max_execution_time"):
        store.query("SELECT 1 SETTINGS max_execution_time = 60", settings={"readonly": 1})

    assert re.search(r"\bmax_execution_time = \d+ CHANGEABLE_IN_READONLY\b", _profile_settings(store))
