"""`watch --metrics-listen`: serve the collector over the states of live pipelines.

The pipelines are stepped by `watch --plain` or the TUI's poll threads; the server only
reads the state each one published last, on its own thread (one reference each).
"""

from __future__ import annotations

from collections.abc import Sequence

from uwsgitune.exporter.exposition import PollExposition
from uwsgitune.exporter.metrics import polled_registry, registry_for
from uwsgitune.exporter.server import ThreadedMetricsServer
from uwsgitune.pipeline import InstancePipeline, InstanceState


def serve_pipelines(pipelines: Sequence[InstancePipeline], listen: str) -> ThreadedMetricsServer:
    """Bind `listen` now (OSError/ValueError raised here) and serve in a daemon thread."""
    frozen = tuple(pipelines)

    def states() -> list[InstanceState]:
        return [p.state for p in frozen]

    exposition = PollExposition(states, polled_registry())  # rendered once per poll
    server = ThreadedMetricsServer(registry_for(states), lambda: exposition.encoded(False))
    server.start(listen)
    return server
