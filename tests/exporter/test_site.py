"""The endpoint's routes without a socket: landing, health, readiness, gzip, the scrape
timeout header, basic auth and /probe's allow-list."""

from __future__ import annotations

import asyncio
import base64
import gzip
import time

from tests.exporter.conftest import HASH, PASSWORD
from uwsgitune.exporter.auth import BasicAuth
from uwsgitune.exporter.request import Request, parse_head
from uwsgitune.exporter.site import Site, SiteConfig, deadline, each_time

BODY = b"# TYPE uwsgi_up gauge\nuwsgi_up 1.0\n"


def get(path: str, **headers: str) -> Request:
    head = f"GET {path} HTTP/1.1\r\n" + "".join(
        f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items()
    )
    request = parse_head((head + "\r\n").encode())
    assert request is not None
    return request


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_landing_health_and_metrics() -> None:
    site = Site(each_time(lambda: BODY), config=SiteConfig(telemetry_path="/m"))
    landing = await site(get("/"))
    assert landing.status == 200 and b'href="/m"' in landing.body
    assert (await site(get("/m"))).body == BODY
    assert (await site(get("/metrics"))).status == 404
    assert (await site(get("/-/healthy"))).status == 200
    post = await site(Request("POST", "/m"))
    assert post.status == 405 and ("Allow", "GET, HEAD") in post.headers


async def test_ready_only_once_every_instance_was_polled() -> None:
    polled = {"a": True, "b": False}
    site = Site(each_time(lambda: BODY), ready=lambda: all(polled.values()))
    assert (await site(get("/-/ready"))).status == 503
    polled["b"] = True
    assert (await site(get("/-/ready"))).status == 200


async def test_gzip_when_asked() -> None:
    site = Site(each_time(lambda: BODY * 100))
    plain = await site(get("/metrics"))
    zipped = await site(get("/metrics", Accept_Encoding="deflate, gzip;q=1.0"))
    assert ("Content-Encoding", "gzip") in zipped.headers and not plain.headers
    assert gzip.decompress(zipped.content) == plain.content and len(zipped.content) < len(
        plain.content
    )


def test_the_scrape_timeout_header_minus_the_offset() -> None:
    assert deadline(get("/metrics", X_Prometheus_Scrape_Timeout_Seconds="10"), 0.25) == 9.75
    assert deadline(get("/metrics", X_Prometheus_Scrape_Timeout_Seconds="0.2"), 0.25) == 0.2
    assert deadline(get("/metrics"), 0.25) == 119.75


async def test_a_scrape_past_its_deadline_is_a_503_and_a_bad_header_a_400() -> None:
    site = Site(each_time(lambda: time.sleep(0.5) or BODY), config=SiteConfig(timeout_offset=0.1))  # type: ignore[func-returns-value]
    t0 = time.monotonic()
    slow = await site(get("/metrics", X_Prometheus_Scrape_Timeout_Seconds="0.3"))
    assert slow.status == 503 and time.monotonic() - t0 < 0.45
    bad = await site(get("/metrics", X_Prometheus_Scrape_Timeout_Seconds="soon"))
    assert bad.status == 400 and b"X-Prometheus-Scrape-Timeout-Seconds" in bad.body
    assert site.stats.codes == {503: 1, 400: 1}
    await asyncio.sleep(0.3)  # let the abandoned render thread finish


async def test_basic_auth_guards_all_but_health() -> None:
    site = Site(
        each_time(lambda: BODY),
        config=SiteConfig(fail_delay=0),  # a refused login's delay: tests/exporter/test_auth_abuse
        auth=BasicAuth({"prometheus": HASH.encode()}),
    )
    denied = await site(get("/metrics"))
    assert denied.status == 401 and any(k == "WWW-Authenticate" for k, _ in denied.headers)
    assert (await site(get("/metrics", Authorization=basic("prometheus", "no")))).status == 401
    assert (await site(get("/", Authorization=basic("other", PASSWORD)))).status == 401
    assert (await site(get("/metrics", Authorization=basic("prometheus", PASSWORD)))).status == 200
    assert (await site(get("/-/healthy"))).status == 200
    assert (await site(get("/-/ready"))).status == 200


async def test_probe_is_off_by_default_and_never_an_open_proxy() -> None:
    assert (
        await Site(each_time(lambda: BODY))(get("/probe?target=tcp://127.0.0.1:1"))
    ).status == 404
    site = Site(each_time(lambda: BODY), config=SiteConfig(probe_targets=("tcp://127.0.0.1:1",)))
    assert (await site(get("/probe"))).status == 400
    for target in ("tcp://127.0.0.1:2", "unix:///etc/passwd", "http://169.254.169.254/", "::"):
        answer = await site(get(f"/probe?target={target}"))
        assert answer.status == 403 and b"allow-list" in answer.body, target
    # listed (in another spelling): read, and a refused read is `uwsgi_up 0`, as the exporter
    answer = await site(get("/probe?target=127.0.0.1:1"))
    assert answer.status == 200 and b'uwsgi_up{stats_uri="tcp://127.0.0.1:1"} 0.0' in answer.body
    assert b"uwsgi_exporter_scrape_errors_total" in answer.body


async def test_web_config_headers_are_added() -> None:
    site = Site(each_time(lambda: BODY), config=SiteConfig(headers={"X-Frame-Options": "deny"}))
    assert ("X-Frame-Options", "deny") in (await site(get("/metrics"))).headers
