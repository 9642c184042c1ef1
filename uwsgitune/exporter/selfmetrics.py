"""The exporter's own metrics under uwsgi_exporter's names, and uwsgitune's build info.

uwsgi_exporter reads the stats once per scrape; uwsgitune reads them once per poll, so its
"scrapes" are polls: `uwsgi_exporter_scrapes_total` counts polls of the instance,
`..._scrape_errors_total` the failed ones, `..._scrape_duration_seconds` their wall time and
`uwsgi_exporter_last_scrape_error` whether the latest failed. Each carries `stats_uri`
(the exporter's have no label: with one instance per process it needed none, and its
/probe shared one set across every target: `handleProbe` gets one `NewMetrics()`).

The Go exporter's process also exports `promhttp_metric_handler_requests_total{code}`,
`promhttp_metric_handler_requests_in_flight` and `process_virtual_memory_max_bytes`
(beside the `process_*` that prometheus_client gives); `handler_text` adds them, so a
dashboard panel on any of them keeps its data. Go's runtime `go_*` have no equivalent.
"""

from __future__ import annotations

import platform
import resource
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

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


_HANDLER_HEAD = (
    "# HELP promhttp_metric_handler_requests_total Total number of scrapes by HTTP status code.\n"
    "# TYPE promhttp_metric_handler_requests_total counter\n"
)
_IN_FLIGHT_HEAD = (
    "# HELP promhttp_metric_handler_requests_in_flight Current number of scrapes being served.\n"
    "# TYPE promhttp_metric_handler_requests_in_flight gauge\n"
)
_VM_MAX_HEAD = (
    "# HELP process_virtual_memory_max_bytes Maximum amount of virtual memory available in bytes.\n"
    "# TYPE process_virtual_memory_max_bytes gauge\n"
)


def handler_text(stats: HandlerStats) -> bytes:
    """The scrape's own part, rendered at each scrape (the rest is rendered once per poll):
    `promhttp_metric_handler_requests_total{code}` (200, 500 and 503 always, as promhttp
    pre-creates them), `..._in_flight` and `process_virtual_memory_max_bytes`, in the text
    format, as rendering them through prometheus_client gives (tested against it). By
    hand: it is most of what a scrape renders, and the scrape's latency is the point."""
    codes = stats.codes
    lines = [_HANDLER_HEAD]
    for code in (200, 500, 503, *sorted(set(codes) - {200, 500, 503})):
        value = floatToGoString(float(codes.get(code, 0)))  # type: ignore[no-untyped-call]
        lines.append(f'promhttp_metric_handler_requests_total{{code="{code}"}} {value}\n')
    in_flight = floatToGoString(float(stats.in_flight))  # type: ignore[no-untyped-call]
    lines.append(f"{_IN_FLIGHT_HEAD}promhttp_metric_handler_requests_in_flight {in_flight}\n")
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    vm_max = floatToGoString(float(2**64 - 1 if limit == resource.RLIM_INFINITY else limit))  # type: ignore[no-untyped-call]
    lines.append(f"{_VM_MAX_HEAD}process_virtual_memory_max_bytes {vm_max}\n")
    return "".join(lines).encode()
