-- vigil 0033: the spans a turn was made of, as a skeleton (id, parent, name, kind, start offset, duration, error;
-- schemas.trace.SpanSummary), so a turn's page can draw its span tree. Empty for turns that came through the SDK.
ALTER TABLE traces ADD COLUMN IF NOT EXISTS spans_json String DEFAULT '[]' CODEC(ZSTD(3));
