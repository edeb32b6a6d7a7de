"""Where scores go: the write queue, its batching ClickHouse writer (one per process at most), and OpenTelemetry out."""
