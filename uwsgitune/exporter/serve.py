"""`watch --metrics-listen`: serve the collector over live InstanceWatch objects.

The watches are stepped by `watch --plain` or the TUI; the server only reads them, on its
own thread, building a snapshot per instance at each scrape (`snapshot.from_watch`).
"""

from __future__ import annotations

from collections.abc import Sequence

from uwsgitune.exporter.collector import registry_for
from uwsgitune.exporter.http import ThreadedMetricsServer
from uwsgitune.exporter.snapshot import Snapshot, from_watch
from uwsgitune.sources.watcher import InstanceWatch


def serve_watches(watches: Sequence[InstanceWatch], listen: str) -> ThreadedMetricsServer:
    """Bind `listen` now (OSError/ValueError raised here) and serve in a daemon thread."""
    frozen = tuple(watches)

    def snapshots() -> list[Snapshot]:
        return [from_watch(w) for w in frozen]

    server = ThreadedMetricsServer(registry_for(snapshots))
    server.start(listen)
    return server
