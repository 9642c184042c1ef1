"""`watch --metrics-listen`: serve the collector over the states of live drivers.

The drivers poll in their own threads (`watch --plain`'s, the TUI's); the server only reads
the state each one published last, on its own thread (one reference each). The exposition
is rendered once per poll, at the first scrape after it, and shared by that poll's scrapes.
"""

from __future__ import annotations

from collections.abc import Sequence

from uwsgitune.exporter.exposition import PollExposition
from uwsgitune.exporter.metrics import ExportOptions, polled_registry, registry_for
from uwsgitune.exporter.server import ThreadedMetricsServer
from uwsgitune.pipeline import InstanceDriver, InstanceState


def serve_drivers(
    drivers: Sequence[InstanceDriver], listen: str, options: ExportOptions | None = None
) -> ThreadedMetricsServer:
    """Bind `listen` now (OSError/ValueError raised here) and serve in a daemon thread."""
    frozen = tuple(drivers)

    def states() -> list[InstanceState]:
        return [d.state for d in frozen]

    exposition = PollExposition(states, polled_registry(), options)  # rendered once per poll
    server = ThreadedMetricsServer(registry_for(states, options), lambda: exposition.encoded(False))
    server.start(listen)
    return server
