"""The real Prometheus (Debian's package) scrapes the real daemon over TLS, with a client
certificate and basic auth, and answers `uwsgi_up` and a request rate through its HTTP API.
`promtool check metrics` is clean on the daemon's output, with and without per-core series."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import http_get, parse, value, wait_for
from tests.exporter.conftest import PASSWORD, Certs
from tests.exporter.real import https_get, tls_daemon
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, run_open

pytestmark = [pytest.mark.uwsgi, pytest.mark.slow]
RATE = 40.0  # requests/s, open loop

SCRAPE = """
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: uwsgi
    scheme: https
    tls_config:
      ca_file: {ca}
      cert_file: {crt}
      key_file: {key}
      server_name: localhost
    basic_auth:
      username: prometheus
      password: {password}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return resp.read().decode().strip().split()[-1].lower().rstrip(".")


def query(port: int, promql: str, at: float | None = None) -> list[dict[str, object]]:
    params = {"query": promql} if at is None else {"query": promql, "time": f"{at:.3f}"}
    q = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{q}", timeout=5) as r:
        data = json.loads(r.read())
    assert data["status"] == "success", data
    result: list[dict[str, object]] = data["data"]["result"]
    return result


def scalar(port: int, promql: str, at: float | None = None) -> float | None:
    result = query(port, promql, at)
    return float(result[0]["value"][1]) if result else None  # type: ignore[index]


def test_prometheus_scrapes_over_tls_with_basic_auth(
    uwsgi: Callable[..., UwsgiProcess],
    start_daemon: Callable[..., DaemonProc],
    certs: Certs,
    prometheus: Callable[[str], int],
    tmp_path: Path,
) -> None:
    a = uwsgi(processes=2)
    d = tls_daemon(start_daemon, certs, tmp_path, a.stats)
    wait_for(lambda: https_get(d.port, "/-/ready", certs, password=None)[0] == 200, timeout=60)
    cfg = SCRAPE.format(
        ca=certs.ca, crt=certs.client_crt, key=certs.client_key, password=PASSWORD, port=d.port
    )
    prom = prometheus(cfg)
    uri = f"unix://{a.stats}"
    wait_for(lambda: scalar(prom, f'uwsgi_up{{job="uwsgi",stats_uri="{uri}"}}') == 1, timeout=60)
    assert scalar(prom, 'up{job="uwsgi"}') == 1

    # A steady open-loop load; the rate Prometheus computes over it is the rate the client saw.
    done: list[LoadResult] = []
    load = threading.Thread(target=lambda: done.append(run_open(url(a, "/"), RATE, 8.0, 400)))
    load.start()
    time.sleep(7.5)
    at = time.time()
    load.join()
    scraped_after = f'max(timestamp(uwsgi_up{{job="uwsgi"}})) > {at:.3f}'
    wait_for(lambda: query(prom, scraped_after), timeout=30, step=0.5)
    seen = done[0].ok / done[0].elapsed
    promql = f'sum(rate(uwsgi_worker_requests_total{{job="uwsgi",stats_uri="{uri}"}}[8s]))'
    rate = scalar(prom, promql, at)
    print(f"Prometheus rate() {rate}/s; the client saw {seen:.2f}/s")
    assert seen > 0.5 * RATE, seen
    assert rate is not None and abs(rate - seen) <= 0.25 * seen, (rate, seen)
    assert (scalar(prom, 'scrape_samples_scraped{job="uwsgi"}') or 0) > 50
    assert d.stop() == 0


@pytest.mark.parametrize("cores", [False, True])
def test_promtool_check_metrics_is_clean(
    uwsgi: Callable[..., UwsgiProcess],
    start_daemon: Callable[..., DaemonProc],
    cores: bool,
) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install -y prometheus)")
    app_metric = "name=app.jobs,type=gauge,initial_value=7"  # an app-defined --metric
    a = uwsgi(processes=4, threads=2, **{"enable-metrics": True, "metric": app_metric})
    run_open(url(a, "/"), 50.0, 0.5, 25)
    d = start_daemon("--stats", a.stats, *(["--collect.cores"] if cores else []))
    uri = f"unix://{a.stats}"

    def polled() -> str | None:
        _, body, _ = http_get(d.port)
        samples = parse(body.decode())
        return body.decode() if value(samples, "uwsgi_up", stats_uri=uri) == 1 else None

    text = wait_for(polled, timeout=60)
    assert ("uwsgi_worker_core_busy" in text) is cores
    samples = parse(text)
    assert value(samples, "uwsgi_metric", name="app.jobs", stats_uri=uri) == 7
    assert value(samples, "uwsgi_metric_total", name="worker.1.requests", stats_uri=uri) is not None
    out = subprocess.run(
        [promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out
