"""Basic auth under abuse, on real sockets against the real server (issue 36.4): wrong
passwords from many connections run one bcrypt at a time, a 401 closes its connection, and
a scraper that logged in keeps getting in while connections that never do hammer."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import threading
import time
from collections.abc import Awaitable, Callable

import bcrypt
import pytest

from tests.exporter.conftest import HASH, PASSWORD
from tests.exporter.test_abuse import OPEN, answer, connect, until
from tests.exporter.test_abuse import _close_clients as _close_clients  # autouse: closes OPEN
from uwsgitune.exporter.auth import BasicAuth, Checker
from uwsgitune.exporter.server import MetricsServer
from uwsgitune.exporter.site import Site, SiteConfig, each_time

BODY = b"# TYPE uwsgi_up gauge\nuwsgi_up 1.0\n"


def head(password: str, keep: bool = False) -> bytes:
    token = base64.b64encode(f"prometheus:{password}".encode()).decode()
    connection = "keep-alive" if keep else "close"
    return (
        f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n"
        f"Connection: {connection}\r\n\r\n"
    ).encode()


async def ask(port: int, password: str, source: str = "127.0.0.1") -> bytes:
    """One request on a new connection; the whole answer (the server closes)."""
    sock = await connect(port, source)
    try:
        await asyncio.get_running_loop().sock_sendall(sock, head(password))
        return await answer(sock, timeout=30)
    finally:
        sock.close()
        OPEN.remove(sock)


async def whole(sock: socket.socket) -> bytes:
    """One answer on a kept-alive connection: its head and `Content-Length` bytes."""
    loop, got = asyncio.get_running_loop(), b""
    while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 4 + length(got):
        chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), 10)
        assert chunk, got
        got += chunk
    return got


def length(got: bytes) -> int:
    for line in got.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def status(got: bytes) -> int:
    return int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else 0


class Concurrency:
    """bcrypt.checkpw, with the most calls seen running at once; wrong passwords wait for
    `gate` when one is given (a check that takes as long as the test wants)."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.running = self.peak = self.calls = 0
        self.passwords: list[bytes] = []
        self.gate = gate
        self._lock = threading.Lock()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.passwords.append(password)
            self.peak = max(self.peak, self.running)
        try:
            if self.gate is not None and password != PASSWORD.encode():
                self.gate.wait(60)
            else:
                time.sleep(0.02)  # wider than bcrypt's own ~1 ms at cost 4: overlaps show
            return bcrypt.checkpw(password, hashed)
        finally:
            with self._lock:
                self.running -= 1


def site(checkpw: Concurrency, fail_delay: float = 0.0) -> Site:
    """The daemon's site with basic auth; no delay before a refused login's answer unless
    the test is about it."""
    auth = BasicAuth({"prometheus": HASH.encode()}, Checker(checkpw=checkpw))
    return Site(each_time(lambda: BODY), config=SiteConfig(fail_delay=fail_delay), auth=auth)


async def test_wrong_passwords_from_many_connections_run_one_bcrypt_at_a_time(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    """32 clients from 8 addresses, each trying 3 different wrong passwords at once: never
    two checks running together, and each client gets its 401 (or a 503: no room)."""
    checkpw = Concurrency()
    srv = await serve(handler=site(checkpw))
    port = srv.address[1]

    async def client(i: int) -> list[int]:
        return [status(await ask(port, f"wrong-{i}-{n}", f"127.0.0.{2 + i % 8}")) for n in range(3)]

    answers = [s for got in await asyncio.gather(*(client(i) for i in range(32))) for s in got]
    assert set(answers) <= {401, 503} and answers.count(401) >= 8, answers
    assert checkpw.calls >= 8 and checkpw.peak == 1, (checkpw.calls, checkpw.peak)
    assert status(await ask(port, PASSWORD)) == 200


async def test_a_401_closes_the_connection(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    srv = await serve(handler=site(Concurrency()))
    loop = asyncio.get_running_loop()
    sock = await connect(srv.address[1])
    await loop.sock_sendall(sock, head("wrong", keep=True))
    got = await whole(sock)
    assert got.startswith(b"HTTP/1.1 401 ") and b"\r\nConnection: close\r\n" in got
    assert await answer(sock) == b""  # and the server closed it
    kept = await connect(srv.address[1])  # the right password keeps its connection
    for _ in range(2):
        await loop.sock_sendall(kept, head(PASSWORD, keep=True))
        reply = await whole(kept)
        assert reply.startswith(b"HTTP/1.1 200 ") and b"Connection: keep-alive" in reply
    assert len(srv.slots) == 1


async def test_a_scraper_that_logged_in_gets_in_while_64_strangers_hammer(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    """64 connections from 64 addresses send wrong passwords whose checks never end (the
    one check thread is held), and reconnect as soon as they are refused: they fill every
    slot they may. The scraper logged in before; its scrapes still answer 200."""
    gate = threading.Event()
    checkpw = Concurrency(gate)
    srv = await serve(handler=site(checkpw), read_timeout=60.0)
    port = srv.address[1]
    assert status(await ask(port, PASSWORD)) == 200  # logged in: remembered, and trusted
    refused = [0]

    async def stranger(i: int) -> None:
        for n in range(10_000):
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                got = await ask(port, f"wrong-{i}-{n}", f"127.0.1.{1 + i}")
                refused[0] += status(got) == 503
            await asyncio.sleep(0.05)

    hammer = [asyncio.ensure_future(stranger(i)) for i in range(64)]
    try:
        await until(lambda: srv.slots.busy() >= 64 - srv.slots.reserve, timeout=60)
        await until(lambda: refused[0] >= 8, timeout=60)  # and they keep knocking
        for _ in range(3):
            assert status(await ask(port, PASSWORD)) == 200
        assert checkpw.peak == 1
    finally:
        for task in hammer:
            task.cancel()
        await asyncio.gather(*hammer, return_exceptions=True)
        gate.set()


async def test_a_stranger_evicted_while_its_check_waits_costs_no_bcrypt(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    """Three slots (one kept for the scraper). Two strangers: one's check holds the check
    thread, the other's waits. The scraper's kept-alive connections take the slots back,
    evicting the busy strangers; the waiting check is dropped, never run."""
    gate = threading.Event()
    checkpw = Concurrency(gate)
    srv = await serve(handler=site(checkpw), max_clients=3)
    port = srv.address[1]
    loop = asyncio.get_running_loop()
    try:
        assert status(await ask(port, PASSWORD)) == 200  # logged in: remembered, trusted
        strangers = []
        for n, source in ((1, "127.0.0.2"), (2, "127.0.0.3")):
            strangers.append(await connect(port, source))
            await loop.sock_sendall(strangers[-1], head(f"wrong-{n}"))
            await until(lambda: srv.slots.busy() == n)  # noqa: B023
        assert checkpw.passwords == [PASSWORD.encode(), b"wrong-1"]
        for _ in range(3):  # kept alive, idle after their answer: protected
            scraper = await connect(port)
            await loop.sock_sendall(scraper, head(PASSWORD, keep=True))
            assert (await whole(scraper)).startswith(b"HTTP/1.1 200 ")
        assert srv.slots.evicted == 2 and len(srv.slots) == 3
        for sock in strangers:  # reset, unanswered
            with pytest.raises(ConnectionResetError):
                await answer(sock)
        gate.set()
        late = await ask(port, "wrong-3")  # queued after wrong-2, were it still queued
        assert status(late) == 401
        assert checkpw.passwords == [PASSWORD.encode(), b"wrong-1", b"wrong-3"]
    finally:
        gate.set()


async def test_a_refused_login_is_answered_late_and_gives_way_meanwhile(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    """One slot. A wrong password's 401 comes `fail_delay` late; while it waits, its
    connection is as idle, so a newcomer takes the slot and is answered at once."""
    checker_calls = Concurrency()
    srv = await serve(handler=site(checker_calls, fail_delay=3.0), max_clients=1)
    port = srv.address[1]
    t0 = time.monotonic()
    assert status(await ask(port, "wrong")) == 401
    assert time.monotonic() - t0 >= 3.0  # a lower bound: load only adds to it
    loop = asyncio.get_running_loop()
    guesser = await connect(port, "127.0.0.2")
    await loop.sock_sendall(guesser, head("wrong-again"))
    await until(lambda: checker_calls.calls == 2 and srv.slots.busy() == 0)  # in its delay
    assert status(await ask(port, PASSWORD)) == 200  # took the guesser's slot
    with pytest.raises(ConnectionResetError):
        await answer(guesser)
    assert srv.slots.evicted == 1


async def test_a_request_that_came_with_its_connection_is_not_taken_for_idle(
    serve: Callable[..., Awaitable[MetricsServer]],
) -> None:
    """Two slots. A scrape connects and sends its request, then two silent sockets connect,
    all before the server's loop runs: it accepts all three in one go. The scrape's head is
    read before the next accept, so the silent ones give way to each other, never the
    scrape (which was the oldest connection not yet looked at)."""
    srv = await serve(handler=site(Concurrency()), max_clients=2, read_timeout=30.0)
    port = srv.address[1]
    scrape = socket.create_connection(("127.0.0.1", port))  # blocking: no turn of the loop
    OPEN.append(scrape)
    scrape.sendall(head(PASSWORD))
    for source in ("127.0.0.2", "127.0.0.3"):
        silent = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
        OPEN.append(silent)
    scrape.setblocking(False)
    got = await answer(scrape)
    assert status(got) == 200, got
    assert srv.slots.evicted == 1
