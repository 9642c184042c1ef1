"""The real daemon over TLS with basic auth, on real uWSGI instances: the right credentials
get the metrics; a wrong password, a missing client certificate, plain HTTP and a /probe
target off the allow-list each get refused, and none of them disturbs the instances."""

from __future__ import annotations

import signal
import ssl
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import parse, value, wait_for
from tests.exporter.conftest import HASH, Certs
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


def test_sighup_reloads_users_and_a_bad_web_config_keeps_the_old(
    uwsgi: Callable[..., UwsgiProcess],
    start_daemon: Callable[..., DaemonProc],
    certs: Certs,
    tmp_path: Path,
) -> None:
    a = uwsgi(processes=1)
    d = tls_daemon(start_daemon, certs, tmp_path, a.stats)
    a_uri = f"unix://{a.stats}"
    wait_for(lambda: up(d, certs, a_uri) == 1, timeout=60)
    web = tmp_path / "web.yml"
    good = web.read_text()

    # A broken file: the reload is refused with one line per problem; the old users still work.
    web.write_text(good + "rate_limit: {interval: 1s}\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: d.events("reload_failed"), timeout=30)
    assert "rate_limit: not supported" in d.events("reload_failed")[0]
    assert up(d, certs, a_uri) == 1

    # A new password: it applies at SIGHUP, and the old one stops working.
    new_hash = bcrypt.hashpw(b"rotated", bcrypt.gensalt(4)).decode()
    web.write_text(good.replace(HASH, new_hash))
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: d.events("reloaded"), timeout=30)
    assert https_get(d.port, "/metrics", certs)[0] == 401
    status, body = https_get(d.port, "/metrics", certs, password="rotated")
    assert status == 200 and value(parse(body), "uwsgi_up", stats_uri=a_uri) == 1
    assert d.stop() == 0 and "Traceback" not in d.log.read_text()
