"""uwsgi_exporter's families beyond the 31 always-on ones: per-core (`--collect.cores`) and
caches, same names and labels as the exporter.

Per-core series are off by default, as in the exporter: an async pool of 64 workers x 1,000
cores would be 448,000 series. Cache `hits`, `misses` and `full` are counters in the
exporter but named without `_total`, which `promtool check metrics` rejects; they keep their
names and are typed gauges here (PromQL's `rate()` reads them the same).
"""

from __future__ import annotations

from collections.abc import Callable

from uwsgitune.core.model import Cache, Core, StatsDoc
from uwsgitune.exporter.families import Families

CORE_COUNTERS: tuple[tuple[str, str, Callable[[Core], int]], ...] = (
    ("requests_total", "Total number of requests.", lambda c: c.requests),
    ("static_requests_total", "Total number of static requests.", lambda c: c.static_requests),
    ("routed_requests_total", "Total number of routed requests.", lambda c: c.routed_requests),
    ("offloaded_requests_total", "Total number of offloaded requests.",
     lambda c: c.offloaded_requests),
    ("write_errors_total", "Total number of write errors.", lambda c: c.write_errors),
    ("read_errors_total", "Total number of read errors.", lambda c: c.read_errors),
)  # fmt: skip
CACHE_GAUGES: tuple[tuple[str, str, Callable[[Cache], int]], ...] = (
    ("hits", "Total number of hits (a counter).", lambda c: c.hits),
    ("misses", "Total number of misses (a counter).", lambda c: c.miss),
    ("full", "Total number of times cache full was hit (a counter).", lambda c: c.full),
    ("items", "Items in cache.", lambda c: c.items),
    ("max_items", "Max items for this cache.", lambda c: c.max_items),
)


def add_cores(out: Families, uri: str, doc: StatsDoc) -> None:
    for w in doc.workers:
        if not w.id:
            continue  # never-spawned slots, as for the worker families
        wid = str(w.id)
        for core in w.cores:
            lb = {"worker_id": wid, "core_id": str(core.id)}
            out.gauge("uwsgi_worker_core_busy", "Is core busy", uri, core.in_request, **lb)
            for name, help_, fn in CORE_COUNTERS:
                out.counter(f"uwsgi_worker_core_{name}", help_, uri, fn(core), **lb)


def add_caches(out: Families, uri: str, doc: StatsDoc) -> None:
    for cache in doc.caches:
        for name, help_, fn in CACHE_GAUGES:
            out.gauge(f"uwsgi_cache_{name}", help_, uri, fn(cache), name=cache.name)
