"""The intake room: ``vigil intake`` (an OTLP/HTTP receiver that writes spans and turns to Redis, nothing else) and
the worker side that keeps spans by trace and assembles settled traces into turns (``vigil.schemas.spans``, which
reads each convention through ``vigil.schemas.conventions``: shared with the SDK's in-process span processor, so
they live with the contracts), waiting for a root that has not arrived and superseding what a late one replaces
(``late``)."""
