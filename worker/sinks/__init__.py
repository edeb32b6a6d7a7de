"""Where scores go: the write queue and its batching ClickHouse writer, and OpenTelemetry."""
