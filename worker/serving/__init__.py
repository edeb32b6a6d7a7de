"""What every HTTP surface vigil serves checks before it spends anything on a request.

- ``guard``: the Host header of a page (a loopback page answers only to loopback names, against DNS rebinding)
  and credentials compared in constant time, both from the headers, before a body is read.
- ``body``: a request body read within a byte budget: the declared length checked first, the stream counted as it
  arrives, gzip/deflate inflated piecewise under the same budget.
- ``threaded``: ``GuardedServer`` / ``GuardedHandler`` for the ``http.server`` pages (the read endpoint,
  ``report --serve``): a connection cap, the Host check on every request, a socket timeout, ``read_body``.
- ``aio``: ``run`` for the aiohttp intake: a connection cap, no decompression or lingering read behind the
  handler's back (the handler reads through ``body`` after authenticating).
"""

from vigil.worker.serving.body import (
    BodyTooLarge,
    Inflater,
    UnreadableBody,
    UnsupportedEncoding,
    check_declared,
)
from vigil.worker.serving.guard import allowed_hosts, credential_ok, host_allowed
from vigil.worker.serving.threaded import GuardedHandler, GuardedServer

__all__ = ["BodyTooLarge", "GuardedHandler", "GuardedServer", "Inflater", "UnreadableBody", "UnsupportedEncoding",
           "allowed_hosts", "check_declared", "credential_ok", "host_allowed"]
