-- vigil 0002: score rollups per minute and per hour, kept by materialized views on `scores`.
--
-- One row per (bucket, project, agent, monitor, scorer, scorer_version) after merges; read with the -Merge
-- combinators and GROUP BY (never assume one row per key: AggregatingMergeTree merges in the background).
--
-- Trade-off: a materialized view sees inserts, not the deduplicated table. `scores` is a ReplacingMergeTree on a
-- deterministic score_id, so a redelivered score (a worker killed between insert and ack) replaces its row in
-- `scores FINAL` but is counted twice here. Redelivery is rare (crashes only), so the rollups stay cheap
-- (constant-size states) and may overcount by the few rows a crash redelivers. Exact per-turn numbers (the
-- per-monitor summary, worst turns, failure rate) read `scores FINAL`; long-range curves and the detector read the
-- rollups.
-- No TTL here (backfilled history would vanish on insert); set retention per deployment (deploy/README.md).
-- Scores are kept on their own scale; `mean` and `quantiles` are of score / scale (0..1), so monitors compare.
--
-- Each statement naming {rollup} is one definition, run once per rollup (scores_1m by toStartOfMinute,
-- scores_1h by toStartOfHour: worker.store.migrations.ROLLUPS). The materialized views that fill them are defined
-- in 0004 (which replaced the views this migration first created, one copy per rollup).

CREATE TABLE IF NOT EXISTS scores_{rollup}
(
    bucket            DateTime('UTC'),
    project           LowCardinality(String),
    agent             LowCardinality(String),
    monitor           LowCardinality(String),
    scorer            LowCardinality(String),
    scorer_version    LowCardinality(String),
    rows              AggregateFunction(count),
    scored            AggregateFunction(countIf, UInt8),
    unscored          AggregateFunction(countIf, UInt8),
    failed            AggregateFunction(countIf, UInt8),
    mean              AggregateFunction(avgIf, Float64, UInt8),
    variance          AggregateFunction(varSampIf, Float64, UInt8),
    quantiles         AggregateFunction(quantilesTDigestIf(0.1, 0.5, 0.9), Float64, UInt8),
    judge_calls       AggregateFunction(sum, UInt64),
    prompt_tokens     AggregateFunction(sum, UInt64),
    completion_tokens AggregateFunction(sum, UInt64),
    cost_usd          AggregateFunction(sum, Float64),
    lag_seconds       AggregateFunction(quantilesTDigest(0.5, 0.95), Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (project, monitor, agent, scorer, scorer_version, bucket);

-- judge_paused alerts name the judge; the other kinds leave it empty.
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS judge LowCardinality(String) DEFAULT '' AFTER monitor
