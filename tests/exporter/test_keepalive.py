"""Plain HTTP/1.1 connections are kept alive between requests, as Prometheus reuses its
connection: answers in order (pipelined too), closed when the client asks or speaks HTTP/1.0,
after an error, or idle past `keep_alive`; an idle kept-alive connection gives way to a new
one. Real sockets against the real server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from tests.exporter.test_abuse import (
    TCP_ESTABLISHED,
    connect,
    scrape,
    tcp_state,
    until,
)
from uwsgitune.exporter.server import MetricsServer

Serve = Callable[..., Awaitable[MetricsServer]]


def get(path: str = "/metrics", *headers: str, version: str = "HTTP/1.1") -> bytes:
    return "\r\n".join((f"GET {path} {version}", "Host: x", *headers, "", "")).encode()


async def read_answer(sock: socket.socket, buffered: bytearray) -> tuple[bytes, bytes]:
    """One answer (head, body) by its Content-Length; what follows stays in `buffered`."""
    loop = asyncio.get_running_loop()
    while b"\r\n\r\n" not in buffered:
        chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), 10)
        assert chunk, "closed before an answer"
        buffered += chunk
    end = buffered.index(b"\r\n\r\n") + 4
    head = bytes(buffered[:end])
    length = int(next(h for h in head.split(b"\r\n") if h.startswith(b"Content-Length:"))[15:])
    while len(buffered) < end + length:
        buffered += await asyncio.wait_for(loop.sock_recv(sock, 65536), 10)
    body = bytes(buffered[end : end + length])
    del buffered[: end + length]
    return head, body


async def closed(sock: socket.socket) -> bool:
    chunk = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 1), 10)
    return chunk == b""


async def test_one_connection_answers_request_after_request(serve: Serve) -> None:
    srv = await serve()
    sock = await connect(srv.address[1])
    loop, buffered = asyncio.get_running_loop(), bytearray()
    for _ in range(3):
        await loop.sock_sendall(sock, get())
        head, body = await read_answer(sock, buffered)
        assert head.startswith(b"HTTP/1.1 200 ") and b"\r\nConnection: keep-alive\r\n" in head
        assert b"uwsgi_up" in body
    await loop.sock_sendall(sock, get("/nothing", "Connection: close"))
    head, _ = await read_answer(sock, buffered)
    assert head.startswith(b"HTTP/1.1 404 ") and b"\r\nConnection: close\r\n" in head
    assert await closed(sock)


async def test_pipelined_requests_are_answered_in_order(serve: Serve) -> None:
    srv = await serve()
    sock = await connect(srv.address[1])
    await asyncio.get_running_loop().sock_sendall(sock, get() + get("/x") + get())
    buffered = bytearray()
    statuses = [(await read_answer(sock, buffered))[0][9:12] for _ in range(3)]
    assert statuses == [b"200", b"404", b"200"] and not buffered


async def test_http_1_0_and_bad_requests_close(serve: Serve) -> None:
    srv = await serve()
    loop = asyncio.get_running_loop()
    for request in (get(version="HTTP/1.0"), b"NONSENSE\r\n\r\n"):
        sock = await connect(srv.address[1])
        await loop.sock_sendall(sock, request)
        head, _ = await read_answer(sock, bytearray())
        assert b"\r\nConnection: close\r\n" in head and await closed(sock)


async def test_an_idle_kept_alive_connection_closes_after_keep_alive(serve: Serve) -> None:
    srv = await serve(keep_alive=0.5)
    sock = await connect(srv.address[1])
    await asyncio.get_running_loop().sock_sendall(sock, get())
    await read_answer(sock, bytearray())
    assert await closed(sock)  # not timed: closed, not cut by the test's own wait
    await until(lambda: len(srv.slots) == 0)


async def test_kept_alive_connections_give_way_to_a_new_scrape(serve: Serve) -> None:
    srv = await serve(max_clients=2, max_per_peer=2)
    loop = asyncio.get_running_loop()
    kept = []
    for _ in range(2):
        kept.append(await connect(srv.address[1]))
        await loop.sock_sendall(kept[-1], get())
        await read_answer(kept[-1], bytearray())
    assert len(srv.slots) == 2
    assert await scrape(srv.address[1]) == 200  # both slots idle: one gave way
    await until(lambda: any(tcp_state(s) != TCP_ESTABLISHED for s in kept))
