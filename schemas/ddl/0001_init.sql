-- vigil 0001: the core tables. Every statement is idempotent (IF NOT EXISTS); the runner records the version.

CREATE TABLE IF NOT EXISTS traces
(
    trace_id      String,
    span_id       String,
    session_id    String,
    project       LowCardinality(String),
    agent         LowCardinality(String),
    environment   LowCardinality(String),
    started_at    DateTime64(3, 'UTC'),
    ended_at      Nullable(DateTime64(3, 'UTC')),
    system        String,
    input_json    String,
    question      String,
    output        String,
    contexts_json String,
    reference     String,
    tool_calls_json String,
    model         LowCardinality(String),
    prompt_tokens UInt32,
    completion_tokens UInt32,
    tags          Array(LowCardinality(String)),
    metadata      Map(String, String),
    truncated     Array(String),
    received_at   DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(started_at)
ORDER BY (project, agent, toStartOfHour(started_at), trace_id, span_id);

CREATE TABLE IF NOT EXISTS scores
(
    score_id          String,
    trace_id          String,
    span_id           String,
    session_id        String,
    project           LowCardinality(String),
    agent             LowCardinality(String),
    environment       LowCardinality(String),
    monitor           LowCardinality(String),
    scorer            LowCardinality(String),
    scorer_version    LowCardinality(String),
    status            LowCardinality(String),
    score             Nullable(Float64),
    scale             Float64,
    label             String,
    reason            String,
    steps_json        String,
    details_json      String,
    error_type        LowCardinality(String),
    judge             LowCardinality(String),
    judge_model       LowCardinality(String),
    judge_calls       UInt32,
    prompt_tokens     UInt32,
    completion_tokens UInt32,
    cost_usd          Float64,
    latency_ms        Float64,
    trace_time        DateTime64(3, 'UTC'),
    scored_at         DateTime64(3, 'UTC'),
    -- Which row of a score id survives: a scored one over an unscored one over a failed one, then the newest.
    -- So a redelivered run that fails (the judge down) never replaces a good score.
    row_rank          UInt64 MATERIALIZED
                      multiIf(status = 'scored', 2, status = 'unscored', 1, 0) * 10000000000000
                      + toUInt64(toUnixTimestamp64Milli(scored_at))
)
ENGINE = ReplacingMergeTree(row_rank)
PARTITION BY toYYYYMM(trace_time)
ORDER BY (project, monitor, scorer, toStartOfHour(trace_time), score_id);

CREATE TABLE IF NOT EXISTS judge_calls
(
    call_id           String,
    score_id          String,
    trace_id          String,
    project           LowCardinality(String),
    monitor           LowCardinality(String),
    scorer            LowCardinality(String),
    judge             LowCardinality(String),
    model             LowCardinality(String),
    step              LowCardinality(String),
    prompt_tokens     UInt32,
    completion_tokens UInt32,
    cost_usd          Float64,
    latency_ms        Float64,
    status            LowCardinality(String),
    attempt           UInt16,
    cached            Bool,
    called_at         DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(called_at)
PARTITION BY toYYYYMM(called_at)
ORDER BY (judge, toStartOfHour(called_at), call_id);

-- One row per (turn, monitor, stage): counting distinct turns is exact under at-least-once redelivery.
-- A turn is (trace_id, span_id): one trace may hold several evaluated spans.
-- stage: received (monitor ''), filtered, sampled, skipped, scored, unscored, failed.
CREATE TABLE IF NOT EXISTS pipeline_events
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
ORDER BY (project, monitor, stage, trace_id, span_id);

CREATE VIEW IF NOT EXISTS pipeline_counters AS
SELECT
    toStartOfMinute(event_time) AS minute,
    project, agent, monitor, stage,
    uniqExact(trace_id, span_id) AS count
FROM pipeline_events
GROUP BY minute, project, agent, monitor, stage;

CREATE TABLE IF NOT EXISTS dead_letters
(
    dead_id     String,
    received_at DateTime64(3, 'UTC'),
    queue       LowCardinality(String),
    reason      String,
    error_type  LowCardinality(String),
    payload     String
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(received_at)
ORDER BY (queue, dead_id);

CREATE TABLE IF NOT EXISTS alerts
(
    alert_id     String,
    rule         LowCardinality(String),
    kind         LowCardinality(String),
    project      LowCardinality(String),
    agent        LowCardinality(String),
    monitor      LowCardinality(String),
    state        LowCardinality(String),
    fired_at     DateTime64(3, 'UTC'),
    updated_at   DateTime64(3, 'UTC'),
    recent_mean  Nullable(Float64),
    baseline_mean Nullable(Float64),
    recent_n     UInt32,
    baseline_n   UInt32,
    p_value      Nullable(Float64),
    effect_size  Nullable(Float64),
    message      String
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (rule, project, agent, monitor, alert_id);
