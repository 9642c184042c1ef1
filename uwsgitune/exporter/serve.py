"""`watch --metrics-listen`: serve the collector over the states of live drivers.

The drivers poll in their own threads (`watch --plain`'s, the TUI's); the server only reads
the state each one published last, on its own thread (one reference each). After each
poll, in the poll's thread, the exposition is rendered ahead when a scrape is due before
the next poll ends (`prepare`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from uwsgitune.exporter.collector import polled_registry, registry_for
from uwsgitune.exporter.exposition import PollExposition
from uwsgitune.exporter.http import ThreadedMetricsServer
from uwsgitune.exporter.scrapeclock import AHEAD
from uwsgitune.pipeline import InstanceDriver, InstanceState


def prepare(exposition: PollExposition, interval: float) -> None:
    """After a poll, in its thread: render if a scrape is due before the next poll ends.
    Never fails the poll: a scrape renders again, and answers a failure itself (500)."""
    with contextlib.suppress(Exception):
        exposition.prepare(AHEAD * interval)


def render_ahead(exposition: PollExposition, driver: InstanceDriver) -> None:
    """Subscribe `prepare` to `driver`'s published states."""
    driver.subscribe(lambda _state: prepare(exposition, driver.interval))


def serve_drivers(drivers: Sequence[InstanceDriver], listen: str) -> ThreadedMetricsServer:
    """Bind `listen` now (OSError/ValueError raised here) and serve in a daemon thread."""
    frozen = tuple(drivers)

    def states() -> list[InstanceState]:
        return [d.state for d in frozen]

    exposition = PollExposition(states, polled_registry())  # rendered once per poll
    for d in frozen:
        render_ahead(exposition, d)
    server = ThreadedMetricsServer(registry_for(states), lambda: exposition.encoded(False))
    server.start(listen)
    return server
