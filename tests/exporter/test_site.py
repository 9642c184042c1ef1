"""The endpoint's routes without a socket: landing, health, readiness, gzip, the scrape
timeout header, basic auth and /probe's allow-list."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import os
import pwd
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.exporter.conftest import HASH, PASSWORD
from tests.support.instances import document, fake_server, worker
from uwsgitune.exporter.auth import BasicAuth
from uwsgitune.exporter.probe import PROBES_AT_ONCE
from uwsgitune.exporter.server import MAX_HEAD, Request, RequestParser
from uwsgitune.exporter.site import Site, SiteConfig, deadline, each_time

BODY = b"# TYPE uwsgi_up gauge\nuwsgi_up 1.0\n"


def get(path: str, **headers: str) -> Request:
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\n" + "".join(
        f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items()
    )
    request = RequestParser(MAX_HEAD, (head + "\r\n").encode()).next()
    assert isinstance(request, Request)
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


def _no_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    def lookup(*args: object) -> None:
        raise AssertionError(f"a user lookup for a client's target: {args!r}")

    monkeypatch.setattr(os.path, "expanduser", lookup)
    monkeypatch.setattr(pwd, "getpwnam", lookup)


async def test_a_probe_target_is_matched_as_written_and_never_expanded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: `~nosuchuser/x` went through expanduser, an NSS lookup on the event loop."""
    home = os.path.expanduser("~")
    site = Site(each_time(lambda: BODY), config=SiteConfig(probe_targets=("~/s.sock",)))
    _no_lookups(monkeypatch)  # the listed targets were expanded at load; a client's never is
    for target in ("~nosuchuser/x", "unix://~nosuchuser/x", "~root/s.sock", "~nosuchuser"):
        answer = await site(get(f"/probe?target={target}"))
        assert answer.status == 403 and b"allow-list" in answer.body, target
    # A listed `~/s.sock` is found as written and by the path it names (no socket: up 0).
    for target in ("~/s.sock", "unix://~/s.sock", f"{home}/s.sock", f"unix://{home}/s.sock"):
        answer = await site(get(f"/probe?target={target}"))
        assert answer.status == 200 and b"uwsgi_up{" in answer.body, target


@contextlib.contextmanager
def held_stats() -> Iterator[tuple[str, list[int], threading.Event]]:
    """A stats server that counts its connections and answers each once `gate` is set."""
    reads: list[int] = []
    gate = threading.Event()

    def answer(conn: socket.socket) -> None:
        reads.append(1)
        gate.wait(30)
        conn.sendall(document(workers=[worker(1, 101)]))

    with fake_server(answer) as address:
        yield f"tcp://{address}", reads, gate


async def test_concurrent_probes_of_one_target_share_one_read() -> None:
    """Before: each probe read the stats itself (8 reads for 8 probes)."""
    with held_stats() as (target, reads, gate):
        site = Site(each_time(lambda: BODY), config=SiteConfig(probe_targets=(target,)))
        probes = [asyncio.ensure_future(site(get(f"/probe?target={target}"))) for _ in range(8)]
        zipped = get(f"/probe?target={target}", Accept_Encoding="gzip")
        probes.append(asyncio.ensure_future(site(zipped)))
        await asyncio.sleep(0.3)  # every probe is waiting (the read is held)
        gate.set()
        answers = await asyncio.wait_for(asyncio.gather(*probes), 30)
    assert [a.status for a in answers] == [200] * 9
    assert len(reads) == 1
    assert b'uwsgi_up{stats_uri="' in answers[0].body
    assert gzip.decompress(answers[-1].body) == answers[0].body


async def test_probes_past_the_cap_get_a_503_with_retry_after() -> None:
    """Before: no cap; each probe took a thread of the pool the scrapes render in."""
    with contextlib.ExitStack() as stack:
        held = [stack.enter_context(held_stats()) for _ in range(PROBES_AT_ONCE + 1)]
        targets = tuple(t for t, _, _ in held)
        site = Site(each_time(lambda: BODY), config=SiteConfig(probe_targets=targets))
        running = [asyncio.ensure_future(site(get(f"/probe?target={t}"))) for t in targets[:-1]]
        await asyncio.sleep(0.3)
        over = await site(get(f"/probe?target={targets[-1]}"))
        assert over.status == 503 and ("Retry-After", "5") in over.headers
        assert not held[-1][1]  # never read
        running.append(asyncio.ensure_future(site(get(f"/probe?target={targets[0]}"))))
        await asyncio.sleep(0.1)  # a probe of a target being read joins that read
        for _, _, gate in held:
            gate.set()
        answers = await asyncio.wait_for(asyncio.gather(*running), 30)
        assert [a.status for a in answers] == [200] * (PROBES_AT_ONCE + 1)
        assert [len(reads) for _, reads, _ in held] == [1] * PROBES_AT_ONCE + [0]
        assert (await site(get(f"/probe?target={targets[-1]}"))).status == 200
