"""The exporter's own metrics under uwsgi_exporter's names, and uwsgitune's build info.

uwsgi_exporter reads the stats once per scrape; uwsgitune reads them once per poll, so its
"scrapes" are polls: `uwsgi_exporter_scrapes_total` counts polls of the instance,
`..._scrape_errors_total` the failed ones, `..._scrape_duration_seconds` their wall time and
`uwsgi_exporter_last_scrape_error` whether the latest failed. Each carries `stats_uri`
(the exporter's have no label: with one instance per process it needed none, and its
/probe shared one set across every target: `handleProbe` gets one `NewMetrics()`).

The Go exporter's process also exports `promhttp_metric_handler_requests_total{code}`,
`promhttp_metric_handler_requests_in_flight` and `process_virtual_memory_max_bytes`
(beside the `process_*` that prometheus_client gives); `HandlerCollector` adds them, so a
dashboard panel on any of them keeps its data. Go's runtime `go_*` have no equivalent.
"""

from __future__ import annotations

import platform
import resource
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from uwsgitune import __version__
from uwsgitune.exporter.families import Families
from uwsgitune.pipeline.state import InstanceState


def add_self(out: Families, snap: InstanceState) -> None:
    uri, counts = snap.stats_uri, snap.counts
    if counts is None:
        return
    help_ = "Total number of times uWSGI was scraped for metrics (uwsgitune: polled)."
    out.counter("uwsgi_exporter_scrapes_total", help_, uri, counts.polls)
    help_ = "Total number of times an error occurred scraping a uWSGI."
    out.counter("uwsgi_exporter_scrape_errors_total", help_, uri, counts.errors)
    help_ = "Duration of uWSGI scrape job."
    out.summary("uwsgi_exporter_scrape_duration_seconds", help_, uri, counts.polls, counts.seconds)
    if snap.frame is not None:
        help_ = "Whether the last scrape of metrics from uWSGI resulted in an error (1 for error)."
        out.gauge("uwsgi_exporter_last_scrape_error", help_, uri, 0.0 if snap.up else 1.0)


class BuildInfo(Collector):
    """`uwsgitune_build_info{version,pythonversion}` 1, as `uwsgi_exporter_build_info`."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "uwsgitune_build_info",
            "A metric with a constant '1' value labeled by version and pythonversion.",
            labels=["version", "pythonversion"],
        )
        family.add_metric([__version__, platform.python_version()], 1.0)
        yield family


class HandlerStats:
    """Requests to the telemetry path, by status code; touched on the event loop only."""

    def __init__(self) -> None:
        self.codes: dict[int, int] = {}
        self.in_flight = 0


class HandlerCollector(Collector):
    def __init__(self, stats: HandlerStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        total = CounterMetricFamily(
            "promhttp_metric_handler_requests",
            "Total number of scrapes by HTTP status code.",
            labels=["code"],
        )
        for code in (200, 500, 503, *sorted(set(self.stats.codes) - {200, 500, 503})):
            total.add_metric([str(code)], float(self.stats.codes.get(code, 0)))
        yield total
        yield GaugeMetricFamily(
            "promhttp_metric_handler_requests_in_flight",
            "Current number of scrapes being served.",
            value=float(self.stats.in_flight),
        )
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        yield GaugeMetricFamily(
            "process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
            value=float(2**64 - 1 if limit == resource.RLIM_INFINITY else limit),
        )
