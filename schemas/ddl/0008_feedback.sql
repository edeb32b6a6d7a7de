-- vigil 0008: human feedback on turns (schemas.feedback.Feedback), from the SDK's Monitor.feedback and
-- `vigil feedback import`. The id is deterministic (trace, name, source, author): sending the same feedback again
-- replaces it, and the newest created_at wins. Not partitioned by time: a resend may carry a newer created_at, and
-- ReplacingMergeTree only replaces within a partition.

CREATE TABLE IF NOT EXISTS feedback
(
    feedback_id String,
    trace_id    String,
    name        LowCardinality(String),
    value       Float64,
    scale       Float64,
    comment     String,
    source      LowCardinality(String),
    author      String,
    created_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(created_at)
ORDER BY (trace_id, feedback_id);
