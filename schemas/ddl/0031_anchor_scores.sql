-- vigil 0031: anchor runs. A monitor's anchor set (labelled turns that never change) re-scored by its current judge
-- on a schedule, one row per item per run, so an alert can say whether the judge's verdicts on the same turns moved
-- (judge drift) or held (the agent changed): vigil.worker.alerts.anchors.
CREATE TABLE IF NOT EXISTS anchor_scores
(
    run_id         String,
    monitor        LowCardinality(String),
    scorer_version String,
    judge          LowCardinality(String),
    judge_model    LowCardinality(String),
    item_id        String,
    human          Float64,
    status         LowCardinality(String),
    score          Nullable(Float64),
    scale          Float64,
    reason         String,
    cost_usd       Float64,
    tokens         UInt32,
    run_at         DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(run_at)
ORDER BY (monitor, run_at, run_id, item_id);
