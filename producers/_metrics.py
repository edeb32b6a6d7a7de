"""The monitor's counters as OpenTelemetry metrics, read when the application's MeterProvider collects.

Observable instruments cost the agent nothing: their callbacks run at collection time. With no MeterProvider
configured they are no-ops; a global one set later is picked up (the API's global proxy).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

if TYPE_CHECKING:
    from .monitor import Monitor, MonitorCounters

__all__ = ["observe"]


def observe(monitor: Monitor, provider: metrics.MeterProvider | None = None) -> None:
    """Register the monitor's turn counters, queue depth and spool size (default: with the global provider)."""
    meter = metrics.get_meter("vigil.producers", meter_provider=provider)
    ref = weakref.ref(monitor)
    labels = {"vigil.agent": monitor.settings.agent, "vigil.project": monitor.settings.project}

    def reading(read: Callable[[MonitorCounters], Iterable[tuple[int, dict[str, str]]]]):
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            live = ref()
            if live is None:
                return []
            return [Observation(value, {**labels, **extra}) for value, extra in read(live.counters())]

        return callback

    meter.create_observable_counter(
        "vigil.sdk.turns",
        callbacks=[reading(lambda c: [(c.captured, {"outcome": "captured"}), (c.shipped, {"outcome": "shipped"}),
                                      (c.spooled, {"outcome": "spooled"})])],
        unit="{turn}",
        description="Turns captured, shipped to the broker, and written to the outage spool",
    )
    meter.create_observable_counter(
        "vigil.sdk.turns.dropped",
        callbacks=[reading(lambda c: [(n, {"reason": str(reason)}) for reason, n in c.dropped.items()])],
        unit="{turn}",
        description="Turns dropped, by reason",
    )
    meter.create_observable_gauge(
        "vigil.sdk.queue.depth",
        callbacks=[reading(lambda c: [(c.queued, {})])],
        unit="{turn}",
        description="Turns waiting in memory for the shipper",
    )
    meter.create_observable_gauge(
        "vigil.sdk.queue.bytes",
        callbacks=[reading(lambda c: [(c.queued_bytes, {})])],
        unit="By",
        description="Estimated bytes of the turns waiting in memory (bounded by max_queue_bytes)",
    )
    meter.create_observable_gauge(
        "vigil.sdk.spool.pending",
        callbacks=[reading(lambda c: [(c.spool_pending, {})])],
        unit="{turn}",
        description="Turns in the outage spool, waiting for the broker",
    )
