-- vigil 0011: delivery accounting. Every batch an SDK producer (one process) ships carries its producer id, its
-- sequence number and the producer's running count of turns shipped; the worker records one row per batch it
-- receives. Turns shipped but never received (a broker restarted without persistence, a list trimmed by hand) show
-- as shipped - received per producer. A redelivered batch replaces its row (same producer and batch).

CREATE TABLE IF NOT EXISTS producer_batches
(
    producer    String,
    batch       UInt64,
    turns       UInt32,
    shipped     UInt64,
    project     LowCardinality(String),
    agent       LowCardinality(String),
    received_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(received_at)
ORDER BY (producer, batch);
