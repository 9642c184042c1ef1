"""The real daemon over TLS with basic auth, on real uWSGI instances: the right credentials
get the metrics; a wrong password, a missing client certificate, plain HTTP and a /probe
target off the allow-list each get refused, and none of them disturbs the instances."""

from __future__ import annotations

import dataclasses
import http.client
import shutil
import signal
import ssl
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import parse, value, wait_for
from tests.exporter.conftest import HASH, Certs, _ca, _signed, web_config
from tests.exporter.real import client_context, https_get, tls_daemon
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
        try:
            conn.request("GET", "/metrics")
            assert conn.getresponse().status != 200
        finally:
            conn.close()
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


def healthy(port: int, ctx: ssl.SSLContext) -> tuple[int, bytes]:
    """`/-/healthy` over TLS with `ctx`: the status and the server's certificate (DER)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=ctx)
    try:
        conn.connect()
        assert isinstance(conn.sock, ssl.SSLSocket)
        served = conn.sock.getpeercert(binary_form=True)
        conn.request("GET", "/-/healthy")
        resp = conn.getresponse()
        resp.read()
        assert served is not None
        return resp.status, served
    finally:
        conn.close()


def der(cert: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert.read_text())


def tls12_only(certs: Certs) -> ssl.SSLContext:
    ctx = client_context(certs)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def test_sighup_applies_a_rotated_certificate_a_new_ca_and_a_raised_min_version(
    start_daemon: Callable[..., DaemonProc], certs: Certs, tmp_path: Path
) -> None:
    """Before: TLS stayed on, so the server kept its first context; every change below was
    ignored while `reloaded` was logged. uWSGI is not the point here: the instance's stats
    address is never answered."""
    gen = tmp_path / "gen"  # a new server cert from the same CA; a second CA and its client
    gen.mkdir()
    for name in ("ca.crt", "ca.key"):
        shutil.copy(certs.dir / name, gen / name)
    _signed(gen, "server2", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _ca(gen, "ca2")
    _signed(gen, "client2", "prometheus", "extendedKeyUsage=clientAuth\n", ca="ca2")
    live = dataclasses.replace(
        certs, server_crt=tmp_path / "tls.crt", server_key=tmp_path / "tls.key"
    )
    shutil.copy(certs.server_crt, live.server_crt)
    shutil.copy(certs.server_key, live.server_key)
    d = tls_daemon(start_daemon, live, tmp_path, str(tmp_path / "no-uwsgi.sock"))
    web = tmp_path / "web.yml"
    client2 = dataclasses.replace(
        certs, client_crt=gen / "client2.crt", client_key=gen / "client2.key"
    )

    def sighup(event: str = "reloaded") -> str:
        before = len(d.events(event))
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: len(d.events(event)) > before, timeout=30)
        return d.events(event)[-1]

    wait_for(lambda: healthy(d.port, client_context(certs))[0] == 200, timeout=30)
    assert healthy(d.port, client_context(certs))[1] == der(certs.server_crt)
    assert healthy(d.port, tls12_only(certs))[0] == 200

    # The certificate rotated in place (as cert-manager or certbot do): served after SIGHUP.
    shutil.copy(gen / "server2.crt", live.server_crt)
    shutil.copy(gen / "server2.key", live.server_key)
    sighup()
    assert healthy(d.port, client_context(certs))[1] == der(gen / "server2.crt")

    # A web config that does not build: one line saying why, the running context kept.
    web.write_text(web_config(live).replace(str(live.server_key), str(certs.client_key)))
    failed = sighup("reload_failed")
    assert "cert_file and key_file do not load" in failed and "\n" not in failed.strip()
    assert len(d.events("reloaded")) == 1
    assert healthy(d.port, client_context(certs))[1] == der(gen / "server2.crt")

    # A new client CA: a client certificate of the old CA is refused, one of the new accepted.
    web.write_text(web_config(live).replace(str(certs.ca), str(gen / "ca2.crt")))
    sighup()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        healthy(d.port, client_context(certs))
    assert healthy(d.port, client_context(client2))[0] == 200

    # min_version raised to TLS 1.3: a client that speaks TLS 1.2 at most is refused.
    web.write_text(
        web_config(live)
        .replace(str(certs.ca), str(gen / "ca2.crt"))
        .replace("min_version: TLS12", "min_version: TLS13")
    )
    sighup()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        healthy(d.port, tls12_only(client2))
    assert healthy(d.port, client_context(client2))[0] == 200
    assert d.stop() == 0
    assert "Traceback" not in d.log.read_text()
