"""The exporter's own metrics under uwsgi_exporter's names, and uwsgitune's build info.

uwsgi_exporter reads the stats once per scrape; uwsgitune reads them once per poll, so its
"scrapes" are polls: `uwsgi_exporter_scrapes_total` counts polls of the instance,
`..._scrape_errors_total` the failed ones, `..._scrape_duration_seconds` their wall time and
`uwsgi_exporter_last_scrape_error` whether the latest failed. Each carries `stats_uri`
(the exporter's have no label: with one instance per process it needed none, and its
/probe shared one set across every target, a known bug).
"""

from __future__ import annotations

import platform
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from uwsgitune import __version__
from uwsgitune.exporter.families import Families
from uwsgitune.exporter.snapshot import Snapshot


def add_self(out: Families, snap: Snapshot) -> None:
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
