"""The intake room: ``vigil intake``, an OTLP/HTTP receiver that authenticates, decodes and publishes spans and turns
to Redis, and nothing else. What becomes of the spans (kept by trace, settled, assembled into turns) is the worker's
business: ``vigil.worker.assembly``."""
