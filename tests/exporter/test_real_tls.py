"""The real daemon over TLS with basic auth, on real uWSGI instances: the right credentials
get the metrics; a wrong password, a missing client certificate, plain HTTP and a /probe
target off the allow-list each get refused, and none of them disturbs the instances."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import parse, value, wait_for
from tests.exporter.conftest import Certs
from tests.exporter.real import https_get, tls_daemon
from uwsgitune.launch import UwsgiProcess, free_port

pytestmark = pytest.mark.uwsgi


def up(d: DaemonProc, certs: Certs, stats_uri: str) -> float | None:
    status, body = https_get(d.port, "/metrics", certs)
    assert status == 200, body
    return value(parse(body), "uwsgi_up", stats_uri=stats_uri)


def test_tls_basic_auth_and_the_allow_list(
    uwsgi: Callable[..., UwsgiProcess],
    start_daemon: Callable[..., DaemonProc],
    certs: Certs,
    tmp_path: Path,
) -> None:
    a = uwsgi(processes=2)
    b_stats = f"127.0.0.1:{free_port()}"
    b = uwsgi(processes=3, stats=b_stats)
    assert b.stats == b_stats
    d = tls_daemon(start_daemon, certs, tmp_path, a.stats, probe=(f"tcp://{b_stats}",))
    a_uri = f"unix://{a.stats}"
    wait_for(lambda: up(d, certs, a_uri) == 1, timeout=60)
    assert https_get(d.port, "/-/ready", certs, password=None)[0] == 200

    # A wrong password, or none: 401. The instance is still served to the right one.
    assert https_get(d.port, "/metrics", certs, password="wrong")[0] == 401
    assert https_get(d.port, "/metrics", certs, password=None)[0] == 401
    assert up(d, certs, a_uri) == 1

    # No client certificate: the handshake is refused (TLS 1.3 reports it on first read).
    with pytest.raises((ssl.SSLError, ConnectionError)):
        https_get(d.port, "/metrics", certs, client_cert=False)
    # Plain HTTP to the TLS port gets no metrics.
    with pytest.raises((ConnectionError, OSError)):
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
        conn.request("GET", "/metrics")
        assert conn.getresponse().status != 200
    assert up(d, certs, a_uri) == 1

    # /probe: the listed target is read; another one (even a real instance) is refused.
    status, body = https_get(d.port, f"/probe?target=tcp://{b_stats}", certs)
    samples = parse(body)
    assert status == 200 and value(samples, "uwsgi_up", stats_uri=f"tcp://{b_stats}") == 1
    assert value(samples, "uwsgi_workers") == 3
    status, body = https_get(d.port, f"/probe?target=unix://{a.stats}", certs)
    assert status == 403 and "allow-list" in body
    assert https_get(d.port, f"/probe?target=tcp://{b_stats}", certs, password="x")[0] == 401
    after = parse(https_get(d.port, "/metrics", certs)[1])
    assert value(after, "uwsgi_up", stats_uri=a_uri) == 1
    assert value(after, "uwsgi_workers", stats_uri=a_uri) == 2
    assert value(after, "uwsgi_up", stats_uri=f"tcp://{b_stats}") is None  # probes leave no trace
    codes = {s.labels["code"]: s.value for s in after["promhttp_metric_handler_requests_total"]}
    assert codes["200"] >= 3

    assert d.stop() == 0
    log = d.log.read_text()
    assert "Traceback" not in log and "tls=True" in log, log
