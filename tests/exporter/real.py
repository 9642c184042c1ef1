"""Helpers for the exporter tests on a real daemon: an HTTPS client with or without a client
certificate and credentials, and the daemon's TLS config."""

from __future__ import annotations

import base64
import gzip
import http.client
import ssl
from collections.abc import Callable
from pathlib import Path

from tests.daemon.conftest import DaemonProc
from tests.exporter.conftest import PASSWORD, Certs, web_config

CONFIG = """
[daemon]
metrics_listen = "127.0.0.1:@PORT@"
web_config_file = "{web}"
probe_targets = [{probe}]
{extra}

[[instance]]
name = "a"
stats = "{stats}"
interval = 0.5
"""


def tls_daemon(
    start_daemon: Callable[..., DaemonProc],
    certs: Certs,
    workdir: Path,
    stats: str,
    probe: tuple[str, ...] = (),
    extra: str = "",
) -> DaemonProc:
    web = workdir / "web.yml"
    web.write_text(web_config(certs))
    targets = ", ".join(f'"{t}"' for t in probe)
    return start_daemon(config=CONFIG.format(web=web, probe=targets, stats=stats, extra=extra))


def client_context(certs: Certs, client_cert: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if client_cert:
        ctx.load_cert_chain(str(certs.client_crt), str(certs.client_key))
    return ctx


def https_get(
    port: int,
    path: str,
    certs: Certs,
    *,
    password: str | None = PASSWORD,
    client_cert: bool = True,
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    ctx = client_context(certs, client_cert)
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=ctx)
    sent = dict(headers or {})
    if password is not None:
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        sent["Authorization"] = f"Basic {token}"
    try:
        conn.request("GET", path, headers=sent)
        resp = conn.getresponse()
        body = resp.read()
        if resp.getheader("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return resp.status, body.decode()
    finally:
        conn.close()
