-- The ClickHouse user Grafana's datasource connects as (grafana/provisioning/datasources/clickhouse.yaml): it can
-- read vigil's tables and do nothing else. readonly = 1 refuses INSERT, ALTER, every DDL and SET; the grant is
-- SELECT on vigil's database only. The plugin sends max_execution_time with every query (its queryTimeout), which
-- readonly = 1 would refuse too: the profile lets that one setting change.
-- The password is a query parameter (there is no default); run as a user with access management, e.g.
--   clickhouse-client --user vigil --password … --param_password="$GRAFANA_CLICKHOUSE_PASSWORD" \
--     --queries-file deploy/clickhouse/grafana-readonly.sql
-- Re-running it rotates the password. vigil's database here is `default`, as in docker-compose.yml.

CREATE SETTINGS PROFILE OR REPLACE vigil_grafana_readonly
SETTINGS readonly = 1, max_execution_time = 60 CHANGEABLE_IN_READONLY;

CREATE USER OR REPLACE vigil_grafana
IDENTIFIED WITH sha256_password BY {password:String}
DEFAULT DATABASE default
SETTINGS PROFILE 'vigil_grafana_readonly';

GRANT SELECT ON default.* TO vigil_grafana;
