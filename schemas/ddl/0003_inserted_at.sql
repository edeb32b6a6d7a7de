-- vigil 0003: when a row became readable. The writer never sends this column, so ClickHouse fills it at insert;
-- inserted_at - trace_time is the freshness of a score (capture to readable), the pipeline's end-to-end lag.
ALTER TABLE scores ADD COLUMN IF NOT EXISTS inserted_at DateTime64(3, 'UTC') DEFAULT now64(3);
