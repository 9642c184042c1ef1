"""End to end: a real uWSGI sends its request log to a `LatencyStage`, a live driver polls it,
the exporter serves it over HTTP, and the histograms count exactly the requests made. Where
Prometheus is installed, it scrapes them too and `histogram_quantile` agrees with the
recorder's p99."""

from __future__ import annotations

import shutil
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.samples import Sample

from tests.daemon.helpers import scrape_until, value, wait_for
from tests.exporter.test_prometheus import scalar
from tests.uwsgi_harness import url
from uwsgitune.core.address import parse_address
from uwsgitune.core.logline import log_format
from uwsgitune.exporter.metrics import ExportOptions
from uwsgitune.exporter.serve import serve_drivers
from uwsgitune.launch import UwsgiProcess, free_port
from uwsgitune.pipeline import LatencyStage, live_driver

pytestmark = [pytest.mark.uwsgi, pytest.mark.slow]
FAST, SLOW = 30, 10  # requests to /io/20 and to /io/150, plus one to /error
MADE = FAST + SLOW + 1
SCRAPE = """
global: {{scrape_interval: 1s, scrape_timeout: 1s}}
scrape_configs:
  - job_name: uwsgi
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
"""


def get(proc: UwsgiProcess, path: str) -> None:
    """One request, stamped as nginx's `t=${msec}` stamps it."""
    stamp = {"X-Request-Start": f"t={time.time():.3f}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url(proc, path), headers=stamp)) as r:
            r.read()
    except OSError:  # /error: a 500
        pass


def total(samples: dict[str, list[Sample]], name: str) -> float:
    return sum(s.value for s in samples.get(name, []))


def test_a_real_request_log_is_served_as_histograms_counting_every_request(
    uwsgi: Callable[..., UwsgiProcess], request: pytest.FixtureRequest
) -> None:
    stage = LatencyStage("127.0.0.1:0")
    host, port = stage.receiver.address
    proc = uwsgi(
        processes=2,
        disable_logging=None,
        req_logger=f"socket:{host}:{port}",
        log_format=log_format(None),
    )
    driver = live_driver(parse_address(proc.stats), interval=0.3, latency=stage)
    driver.start()
    listen = free_port()
    server = serve_drivers([driver], f"127.0.0.1:{listen}", ExportOptions(latency_routes=True))
    try:
        # From the second poll on, the requests the stats count have a rate (coverage).
        wait_for(lambda: driver.state.frame is not None and driver.state.frame.has_rates, 15)
        paths = ["/io/20"] * FAST + ["/io/150"] * SLOW + ["/error"]
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda p: get(proc, p), paths))

        def counted(s: dict[str, list[Sample]]) -> bool:
            return value(s, "uwsgi_request_duration_seconds_count") == MADE

        samples = scrape_until(listen, counted, timeout=15)
        uri = f"unix://{proc.stats}"
        assert value(samples, "uwsgi_request_duration_seconds_bucket", le="+Inf") == MADE
        assert value(samples, "uwsgi_request_duration_seconds_bucket", le="0.125") == FAST + 1
        sum_s = value(samples, "uwsgi_request_duration_seconds_sum", stats_uri=uri)
        assert sum_s is not None and FAST * 0.02 + SLOW * 0.15 <= sum_s < 2 * (FAST * 0.02 + 1.5)
        assert value(samples, "uwsgi_request_queue_seconds_count", stats_uri=uri) == MADE
        assert value(samples, "uwsgi_request_status_total", **{"class": "2xx"}) == FAST + SLOW
        assert value(samples, "uwsgi_request_status_total", **{"class": "5xx"}) == 1
        assert total(samples, "uwsgi_request_route_duration_seconds_count") == MADE
        assert value(samples, "uwsgitune_latency_lines_total") == MADE
        assert value(samples, "uwsgitune_latency_trusted") == 1  # the master's, proved
        assert total(samples, "uwsgitune_latency_faults_total") == 0
        covered = scrape_until(
            listen, lambda s: (value(s, "uwsgitune_latency_coverage_ratio") or 0) >= 0.9, 10
        )
        assert value(covered, "uwsgitune_latency_coverage_ratio") == 1.0

        if shutil.which("prometheus") is None:
            return  # the text checks above stand; the Prometheus part needs its binary
        prom: int = request.getfixturevalue("prometheus")(SCRAPE.format(port=listen))
        count = "uwsgi_request_duration_seconds_count"
        wait_for(lambda: scalar(prom, count) == MADE, timeout=30, step=0.5)
        p99 = scalar(prom, "histogram_quantile(0.99, uwsgi_request_duration_seconds_bucket)")
        shown = driver.state.latency
        assert shown is not None and shown.long.service is not None
        exact = shown.long.service.p99_ms / 1000  # the recorder's, within 0.5%
        print(f"histogram_quantile p99 {p99}; the recorder's {exact}")
        # Both within the same `le` bucket, whose bounds are at most x1.28 apart.
        assert p99 is not None and exact / 1.35 <= p99 <= exact * 1.35
    finally:
        server.stop()
        driver.stop()
        driver.join(5)
