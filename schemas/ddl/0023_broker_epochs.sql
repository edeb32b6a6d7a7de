-- vigil 0023: broker epochs, so a loss vigil knows of is counted and named. A writer that finds Redis without vigil's
-- epoch key (vigil.broker.epoch) starts a new epoch and records it here with the epoch it replaces. An epoch with a
-- previous one means the broker came back empty (restarted without persistence, flushed): every queued task was
-- lost at reset_at, and a turn sampled before then that never got an outcome is counted lost in the coverage
-- funnel. The first epoch (previous = '') is a new broker, or vigil before this migration: nothing is counted.

CREATE TABLE IF NOT EXISTS broker_epochs
(
    epoch      String,
    previous   String,
    run_id     String,
    reset_at   DateTime64(3, 'UTC'),
    started_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(started_at)
ORDER BY epoch;
