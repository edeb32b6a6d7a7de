"""The intake room: ``vigil intake`` (an OTLP/HTTP receiver that writes spans and turns to Redis, nothing else) and
the worker side that keeps spans by trace and assembles settled traces into turns (``vigil.schemas.spans``)."""
