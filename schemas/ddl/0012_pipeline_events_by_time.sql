-- vigil 0012: pipeline_events sorted by time first. The detector reads its last hour every minute and the funnel a
-- dashboard range, but the table was sorted by (project, monitor, stage, trace_id, span_id): every read scanned the
-- whole month's partition. ClickHouse cannot change the start of a sorting key in place, so a new table takes the
-- name (EXCHANGE TABLES, atomic: writers go on into the new table) and the old rows are copied into it; then the old
-- table goes. Each step that is not idempotent runs only in the state that needs it (`-- when:`), so a run
-- interrupted anywhere finishes on the next `vigil migrate`; a copy repeated after an interruption only adds
-- duplicates, which the engine collapses and every reader ignores (they count distinct turns).
-- A (turn, monitor, stage) written twice in the same hour still collapses into one row.

CREATE TABLE IF NOT EXISTS pipeline_events_0012
(
    event_time  DateTime64(3, 'UTC'),
    project     LowCardinality(String),
    agent       LowCardinality(String),
    monitor     LowCardinality(String),
    stage       LowCardinality(String),
    trace_id    String,
    span_id     String
)
ENGINE = ReplacingMergeTree(event_time)
PARTITION BY toYYYYMM(event_time)
ORDER BY (toStartOfHour(event_time), project, monitor, stage, trace_id, span_id);

-- when: SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'pipeline_events' AND NOT startsWith(sorting_key, 'toStartOfHour(event_time)')
EXCHANGE TABLES pipeline_events AND pipeline_events_0012;

-- when: SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'pipeline_events_0012' AND NOT startsWith(sorting_key, 'toStartOfHour(event_time)')
INSERT INTO pipeline_events (event_time, project, agent, monitor, stage, trace_id, span_id)
SELECT event_time, project, agent, monitor, stage, trace_id, span_id FROM pipeline_events_0012;

DROP TABLE IF EXISTS pipeline_events_0012;
