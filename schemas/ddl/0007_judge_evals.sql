-- vigil 0007: kept `vigil eval` runs, one row per run, so a team sees how agreement with people moved when the judge,
-- its model or the scorer changed. The figures are 95% intervals' centres and bounds (NULL when not defined for
-- the data: pearson needs more than two human levels, cohen_kappa exactly two); report_json holds the whole report
-- (agreement, cost, reference) without the per-item list.
CREATE TABLE IF NOT EXISTS judge_evals
(
    run_id String,
    dataset String,
    dataset_format LowCardinality(String),
    dataset_sha256 String,
    scorer LowCardinality(String),
    scorer_version String,
    params_json String,
    judge String,
    judge_model String,
    n UInt32,
    scored UInt32,
    unscored UInt32,
    failed UInt32,
    abstained UInt32,
    pairs UInt32,
    ties UInt32,
    pairwise_accuracy Nullable(Float64),
    pairwise_accuracy_low Nullable(Float64),
    pairwise_accuracy_high Nullable(Float64),
    spearman Nullable(Float64),
    kendall_tau_b Nullable(Float64),
    pearson Nullable(Float64),
    cohen_kappa Nullable(Float64),
    reference_pairwise_accuracy Nullable(Float64),
    reference_spearman Nullable(Float64),
    judge_calls UInt32,
    prompt_tokens UInt64,
    completion_tokens UInt64,
    cost_usd Float64,
    p50_latency_ms Nullable(Float64),
    p95_latency_ms Nullable(Float64),
    report_json String,
    started_at DateTime64(3, 'UTC'),
    ended_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(ended_at)
ORDER BY run_id;
