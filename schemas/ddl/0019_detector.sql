-- vigil 0019: the sequential regression detector's record of every check, and where and since when an alert's
-- drop happened.
--
-- detector_checks: one row per (rule, monitor) per check: the statistic against its threshold (1.0 fires), the
-- decision (`firing`), the change-point estimate and drop, why (`reason`), and the detector's whole state as JSON.
-- The next check reads its state back from the latest row, so a restarted beat or writer resumes where it stopped;
-- Grafana's provisioned rule fires on `firing`, so it and vigil's notifier cannot disagree.
-- No TTL (a test or a backtest of old data would vanish on insert): set retention per deployment; the detector
-- needs only the last week (older state is rebuilt from the scores).
CREATE TABLE IF NOT EXISTS detector_checks
(
    checked_at     DateTime64(3, 'UTC'),
    rule           LowCardinality(String),
    monitor        LowCardinality(String),
    scorer_version LowCardinality(String),
    mode           LowCardinality(String),
    firing         UInt8,
    statistic      Float64,
    threshold      Float64,
    scores         UInt32,
    baseline_mean  Nullable(Float64),
    recent_mean    Nullable(Float64),
    since          Nullable(DateTime64(3, 'UTC')),
    drop           Nullable(Float64),
    drop_low       Nullable(Float64),
    drop_high      Nullable(Float64),
    reason         String,
    cursor         DateTime64(3, 'UTC'),
    state          String CODEC(ZSTD(3))
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(checked_at)
ORDER BY (rule, monitor, checked_at);

ALTER TABLE alerts ADD COLUMN IF NOT EXISTS since Nullable(DateTime64(3, 'UTC'));
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS drop Nullable(Float64);
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS drop_low Nullable(Float64);
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS drop_high Nullable(Float64);
-- The ranked segments that explain the drop, as JSON: [{"key", "value", "n", "recent_mean", "baseline_mean",
-- "share"}, ...].
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS segments String DEFAULT '[]'
