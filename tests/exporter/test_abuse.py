"""The scrape endpoint under abuse, on real sockets against the real server: idle sockets,
slowloris, a client that never reads, too many clients from one peer or in all, and the
memory a stalled client can hold. Other scrapes go on through all of it."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
import termios
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from tests.daemon.helpers import http_get
from tests.exporter.conftest import Certs, web_config
from tests.exporter.real import https_get
from uwsgitune.exporter.server import MetricsServer, Request, Response
from uwsgitune.exporter.webconfig import load_web_config

GET = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
BIG = b"# big\n" + b"x" * (2 * 1024 * 1024)
TCP_ESTABLISHED = 1


async def scrape(port: int, path: str = "/metrics") -> int:
    return (await asyncio.to_thread(http_get, port, path))[0]


OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


async def connect(port: int, source: str = "127.0.0.1", rcvbuf: int = 0) -> socket.socket:
    """A raw client socket, optionally from another loopback address, with a tiny window."""
    sock = socket.socket()
    OPEN.append(sock)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind((source, 0))
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return sock


def tcp_state(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


def unread(sock: socket.socket) -> int:
    return struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0\0\0\0"))[0]


async def until(check: Callable[[], bool], timeout: float = 20.0) -> float:
    """Seconds until `check()` holds (polled on this loop, which also runs the server)."""
    t0 = time.monotonic()
    while not check():
        assert time.monotonic() - t0 < timeout, "timed out"
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


async def answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    loop = asyncio.get_running_loop()
    out = b""
    while chunk := await asyncio.wait_for(loop.sock_recv(sock, 65536), timeout):
        out += chunk
    return out


@pytest.mark.parametrize(
    "sources", [["127.0.0.1"] * 16, [f"127.0.0.{i}" for i in range(2, 10)] * 8]
)
async def test_idle_connections_never_deny_a_scrape(
    serve: Callable[..., Awaitable[MetricsServer]], sources: list[str]
) -> None:
    """16 idle sockets from the scraper's own address; then 64 from 8 others (both caps)."""
    srv = await serve(read_timeout=60.0)
    for src in sources:
        await connect(srv.address[1], src)
    t0 = time.monotonic()
    assert await scrape(srv.address[1]) == 200
    assert time.monotonic() - t0 < 5  # not after the idle ones' 60 s read timeout
    assert len(srv.slots) <= srv.slots.total


async def test_slowloris_is_cut_at_the_head_deadline(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    srv = await serve(read_timeout=1.0, max_per_peer=64)
    port = srv.address[1]
    loop = asyncio.get_running_loop()
    slow = [await connect(port) for _ in range(64)]

    async def dribble(sock: socket.socket) -> float:
        t0 = time.monotonic()
        with contextlib.suppress(OSError):  # cut (reset): on a starved machine, even at once
            await loop.sock_sendall(sock, b"GET /metrics HTTP/1.1\r\n")
            for _ in range(200):  # a header byte every 0.1 s: never a whole head
                await loop.sock_sendall(sock, b"X")
                await asyncio.sleep(0.1)
        return time.monotonic() - t0

    dribbling = [asyncio.ensure_future(dribble(s)) for s in slow]
    assert await scrape(port) == 200  # meanwhile, scrapes go on
    cut = await asyncio.wait_for(asyncio.gather(*dribbling), 60)
    assert max(cut) < 1.0 + 10  # each cut at its deadline, not at 20 s of dribbling


async def test_a_client_that_never_reads_is_cut_at_the_write_deadline(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    srv = await serve(write_timeout=1.0, render=lambda: (BIG, b""))
    port = srv.address[1]
    stuck = await connect(port, rcvbuf=4096)
    await asyncio.get_running_loop().sock_sendall(stuck, GET)
    await until(lambda: unread(stuck) > 0)  # the answer started
    assert await scrape(port) == 200  # another scrape is not held up
    waited = await until(lambda: tcp_state(stuck) != TCP_ESTABLISHED)
    assert waited < 1.0 + 10 and srv.cut == 1
    await until(lambda: len(srv.slots) == 0)


async def test_stalled_clients_hold_no_copy_of_the_answer(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    """Not timed: 16 clients that never read a 2 MiB answer hold a few pieces of it each,
    in the transports' buffers, never a copy of their own (which is 32 MiB and more)."""
    srv = await serve(write_timeout=60.0, max_per_peer=16, render=lambda: (BIG, b""))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        stuck = [await connect(srv.address[1], rcvbuf=4096) for _ in range(16)]
        for sock in stuck:
            await asyncio.get_running_loop().sock_sendall(sock, GET)
        await until(lambda: all(unread(s) > 0 for s in stuck))
        await asyncio.sleep(0.2)  # more loop turns only add pieces, never a copy
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 16 * 512 * 1024, f"{peak / 2**20:.1f} MiB"


def blocking(
    entered: list[Request], gate: asyncio.Event
) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        entered.append(request)
        await gate.wait()
        return Response(200, b"ok\n")

    return handler


async def test_over_capacity_is_a_503_per_peer_and_in_all(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    entered: list[Request] = []
    gate = asyncio.Event()
    srv = await serve(max_clients=4, max_per_peer=2, handler=blocking(entered, gate))
    port = srv.address[1]
    loop = asyncio.get_running_loop()
    busy = []
    for src in ("127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.4"):
        busy.append(await connect(port, src))
        await loop.sock_sendall(busy[-1], GET)
        count = len(busy)
        await until(lambda: len(entered) == count)  # noqa: B023
    for src in ("127.0.0.2", "127.0.0.5"):  # a third from one peer; a fifth in all
        extra = await connect(port, src)
        await loop.sock_sendall(extra, GET)
        refused = await answer(extra)
        assert refused.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 5\r\n" in refused
    gate.set()
    for sock in busy:  # the ones being answered were not disturbed
        assert (await answer(sock)).startswith(b"HTTP/1.1 200 ")
    assert srv.slots.refused == 2 and len(entered) == 4


async def test_tls_handshakes_count_and_give_way(
    serve: Callable[..., Awaitable[MetricsServer]], certs: Certs, tmp_path: Path
) -> None:
    """Sockets that never start their handshake take slots and are dropped for newcomers;
    a scrape over TLS goes through them."""
    path = tmp_path / "web.yml"
    path.write_text(web_config(certs))
    srv = await serve(read_timeout=60.0, max_clients=4, tls=load_web_config(path).tls)
    idle = [await connect(srv.address[1]) for _ in range(12)]
    await until(lambda: len(srv.slots) == 4)
    status, body = await asyncio.to_thread(https_get, srv.address[1], "/metrics", certs)
    assert status == 200 and "uwsgi_up" in body
    dropped = [s for s in idle if tcp_state(s) != TCP_ESTABLISHED]
    assert len(dropped) >= 12 - 4 + 1  # the scrape took the place of one more


async def test_answers_being_written_are_bounded_in_bytes(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    """A second 2 MiB answer would take the held bodies past 3 MiB: a 503 instead, until the
    first stalled client is cut; small answers are never refused."""
    srv = await serve(write_timeout=1.0, max_held=3 * 2**20, render=lambda: (bytes(len(BIG)), b""))
    port = srv.address[1]
    loop = asyncio.get_running_loop()
    stuck = await connect(port, rcvbuf=4096)
    await loop.sock_sendall(stuck, GET)
    await until(lambda: unread(stuck) > 0)
    second = await connect(port)
    await loop.sock_sendall(second, GET)
    refused = await answer(second)
    assert refused.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 5\r\n" in refused
    assert (await scrape(port, "/nothing")) == 404  # small: not counted
    await until(lambda: tcp_state(stuck) != TCP_ESTABLISHED)
    assert await scrape(port) == 200
    await until(lambda: srv.budget.held == 0)  # every body given back once written
