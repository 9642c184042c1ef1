"""`watch --metrics-listen`: serve the collector over the states of live pipelines.

The pipelines are stepped by `watch --plain` or the TUI's poll threads; the server only
reads the state each one published last, on its own thread (one reference each).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from functools import partial

from uwsgitune.exporter.exposition import AHEAD, PollExposition
from uwsgitune.exporter.metrics import polled_registry, registry_for
from uwsgitune.exporter.server import ThreadedMetricsServer
from uwsgitune.pipeline import InstancePipeline, InstanceState
from uwsgitune.pipeline.runner import Watch


def prepare(exposition: PollExposition, watch: Watch) -> None:
    """After a poll, in its thread: render if a scrape is due before the next poll ends.
    Never fails the poll: a scrape renders again, and answers a failure itself (500)."""
    with contextlib.suppress(Exception):
        exposition.prepare(AHEAD * watch.interval)


def serve_pipelines(pipelines: Sequence[InstancePipeline], listen: str) -> ThreadedMetricsServer:
    """Bind `listen` now (OSError/ValueError raised here) and serve in a daemon thread."""
    frozen = tuple(pipelines)

    def states() -> list[InstanceState]:
        return [p.state for p in frozen]

    exposition = PollExposition(states, polled_registry())  # rendered once per poll
    for p in frozen:  # ahead of a scrape that is due, in the poll's thread
        p.after_step = partial(prepare, exposition, p.watch)
    server = ThreadedMetricsServer(registry_for(states), lambda: exposition.encoded(False))
    server.start(listen)
    return server
