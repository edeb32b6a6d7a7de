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

CREATE TABLE IF NOT EXISTS scores_1m
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

CREATE MATERIALIZED VIEW IF NOT EXISTS scores_1m_mv TO scores_1m AS
SELECT
    toStartOfMinute(trace_time) AS bucket,
    project, agent, monitor, scorer, scorer_version,
    countState() AS rows,
    countIfState(status = 'scored') AS scored,
    countIfState(status = 'unscored') AS unscored,
    countIfState(status = 'failed') AS failed,
    avgIfState(ifNull(score, 0) / if(scale > 0, scale, 1), status = 'scored' AND score IS NOT NULL) AS mean,
    varSampIfState(ifNull(score, 0) / if(scale > 0, scale, 1), status = 'scored' AND score IS NOT NULL) AS variance,
    quantilesTDigestIfState(0.1, 0.5, 0.9)(ifNull(score, 0) / if(scale > 0, scale, 1),
                                            status = 'scored' AND score IS NOT NULL) AS quantiles,
    sumState(toUInt64(judge_calls)) AS judge_calls,
    sumState(toUInt64(prompt_tokens)) AS prompt_tokens,
    sumState(toUInt64(completion_tokens)) AS completion_tokens,
    sumState(cost_usd) AS cost_usd,
    quantilesTDigestState(0.5, 0.95)(toFloat64(greatest(dateDiff('millisecond', trace_time, scored_at), 0)) / 1000)
        AS lag_seconds
FROM scores
GROUP BY bucket, project, agent, monitor, scorer, scorer_version;

CREATE TABLE IF NOT EXISTS scores_1h AS scores_1m
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (project, monitor, agent, scorer, scorer_version, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS scores_1h_mv TO scores_1h AS
SELECT
    toStartOfHour(trace_time) AS bucket,
    project, agent, monitor, scorer, scorer_version,
    countState() AS rows,
    countIfState(status = 'scored') AS scored,
    countIfState(status = 'unscored') AS unscored,
    countIfState(status = 'failed') AS failed,
    avgIfState(ifNull(score, 0) / if(scale > 0, scale, 1), status = 'scored' AND score IS NOT NULL) AS mean,
    varSampIfState(ifNull(score, 0) / if(scale > 0, scale, 1), status = 'scored' AND score IS NOT NULL) AS variance,
    quantilesTDigestIfState(0.1, 0.5, 0.9)(ifNull(score, 0) / if(scale > 0, scale, 1),
                                            status = 'scored' AND score IS NOT NULL) AS quantiles,
    sumState(toUInt64(judge_calls)) AS judge_calls,
    sumState(toUInt64(prompt_tokens)) AS prompt_tokens,
    sumState(toUInt64(completion_tokens)) AS completion_tokens,
    sumState(cost_usd) AS cost_usd,
    quantilesTDigestState(0.5, 0.95)(toFloat64(greatest(dateDiff('millisecond', trace_time, scored_at), 0)) / 1000)
        AS lag_seconds
FROM scores
GROUP BY bucket, project, agent, monitor, scorer, scorer_version;

-- judge_paused alerts name the judge; the other kinds leave it empty.
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS judge LowCardinality(String) DEFAULT '' AFTER monitor
