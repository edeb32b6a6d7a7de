"""The broker's bounds, apart from the transport (``vigil.schemas.broker``) that applies them: a process's settings
read them as defaults and limits without importing kombu and redis-py (~0.3 CPU-s at each start of a command such as
``vigil migrate`` that never reaches the broker)."""

__all__ = ["DEFAULT_MESSAGE_BYTES", "MIN_MESSAGE_BYTES", "POOL_CONNECTIONS", "POOL_WAIT_S"]

# The smallest sensible message budget: one turn of the largest valid size (schemas.trace.MAX_PAYLOAD_BYTES of UTF-8)
# may take twice that once JSON escapes it as ASCII, and 4/3 of that again in base64.
MIN_MESSAGE_BYTES = 6 * 2**20
DEFAULT_MESSAGE_BYTES = 8 * 2**20
# A redis-py client's connections at once (a worker sizes its own to its --concurrency, VIGIL_REDIS_CONNECTIONS), and
# how long one more caller waits for a free one before the pool raises (a transient failure: the task is retried).
# The same through Sentinel: its pool (which asks the Sentinels where the master is) waits like the plain one.
POOL_CONNECTIONS = 100
POOL_WAIT_S = 30.0
