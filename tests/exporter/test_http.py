"""The metrics endpoint: /metrics only, bounded, and a slow client holds nothing."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry, Gauge

from tests.daemon.helpers import http_get, parse
from uwsgitune.core.address import split_listen
from uwsgitune.exporter.server import MetricsServer, ThreadedMetricsServer


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Gauge("uwsgi_up", "up", ["stats_uri"], registry=reg).labels("unix:///x").set(1)
    return reg


@pytest.fixture
async def server() -> AsyncIterator[MetricsServer]:
    srv = MetricsServer(registry(), read_timeout=0.5)
    await srv.start("127.0.0.1:0")
    yield srv
    await srv.close()


async def raw(port: int, data: bytes, wait: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), wait)
    finally:
        writer.close()


async def test_routes_and_methods(server: MetricsServer) -> None:
    port = server.address[1]
    status, body, ctype = await asyncio.to_thread(http_get, port)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    assert parse(body.decode())["uwsgi_up"][0].value == 1
    assert (await asyncio.to_thread(http_get, port, "/metrics?x=1"))[0] == 200
    head = await asyncio.to_thread(http_get, port, "/metrics", "HEAD")
    assert head[0] == 200 and head[1] == b""
    for path in ("/", "/metrics/", "/favicon.ico", "/metricsx"):
        assert (await asyncio.to_thread(http_get, port, path))[0] == 404, path
    for method in ("POST", "PUT", "DELETE"):
        assert (await asyncio.to_thread(http_get, port, "/metrics", method))[0] == 405
    assert (await raw(port, b"garbage\r\n\r\n")).startswith(b"HTTP/1.1 400")
    big = b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"
    assert (await raw(port, big)).startswith(b"HTTP/1.1 431")


async def test_a_silent_client_is_dropped_and_does_not_block_others(server: MetricsServer) -> None:
    port = server.address[1]
    silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
    t0 = time.monotonic()
    status, _, _ = await asyncio.to_thread(http_get, port)
    assert status == 200 and time.monotonic() - t0 < 0.4  # answered while three clients stall
    for reader, writer in silent:  # each is dropped (reset) at the read timeout, no answer
        with contextlib.suppress(ConnectionResetError):
            assert await asyncio.wait_for(reader.read(), 2) == b""
        writer.close()


async def test_a_failing_collector_is_a_500_not_a_dead_endpoint() -> None:
    def boom() -> tuple[bytes, bytes]:
        raise RuntimeError("bug: \x1b]0;owned\x07 value from a peer")

    srv = MetricsServer(registry(), render=boom)
    await srv.start("127.0.0.1:0")
    try:
        assert (await asyncio.to_thread(http_get, srv.address[1]))[0] == 500
        status, body, _ = await asyncio.to_thread(http_get, srv.address[1])
        assert status == 500 and b"peer" not in body and b"\x1b" not in body  # never echoed
    finally:
        await srv.close()


def test_threaded_server_for_watch() -> None:
    srv = ThreadedMetricsServer(registry())
    host, port = srv.start("127.0.0.1:0")
    try:
        assert host == "127.0.0.1"
        assert http_get(port)[0] == 200
    finally:
        srv.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)


def test_threaded_server_reports_a_taken_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            ThreadedMetricsServer(registry()).start(f"127.0.0.1:{taken.getsockname()[1]}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9117", ("127.0.0.1", 9117)),
        ("[::1]:9117", ("::1", 9117)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
    ],
)
def test_split_listen(text: str, expected: tuple[str, int]) -> None:
    assert split_listen(text) == expected


@pytest.mark.parametrize("text", [":9117", "9117", "host:", "host:99999", "[::1:9117"])
def test_split_listen_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        split_listen(text)
