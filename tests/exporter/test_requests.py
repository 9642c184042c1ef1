"""What the server takes as a request, on raw sockets against the real server: requests
that a proxy in front and this server could frame differently (a body, two lengths, a
chunked body, a space before a colon, two Host or Authorization headers) get a 400 and the
connection closes, so no byte of theirs is ever answered as a request of its own; the head
stays bounded at 16 KiB however it arrives."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable

import pytest

from tests.exporter.test_abuse import connect
from uwsgitune.exporter.server import MAX_HEAD, MetricsServer, Request, Response

Serve = Callable[..., Awaitable[MetricsServer]]
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"


def head(*lines: str, start: str = "GET /metrics HTTP/1.1") -> bytes:
    return "\r\n".join((start, *lines, "", "")).encode()


async def exchange(port: int, data: bytes, *pieces: bytes) -> list[tuple[int, bytes]]:
    """Send `data` (then each of `pieces` a moment apart) and read every answer until the
    server closes: [(status, body)]."""
    sock = await connect(port)
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(sock, data)
    for piece in pieces:
        await asyncio.sleep(0.05)
        await loop.sock_sendall(sock, piece)
    got = b""
    while chunk := await asyncio.wait_for(loop.sock_recv(sock, 65536), 20):
        got += chunk
    return answers(got)


def answers(raw: bytes) -> list[tuple[int, bytes]]:
    out = []
    while raw:
        end = raw.index(b"\r\n\r\n") + 4
        lines = raw[:end].split(b"\r\n")
        length = next(int(h[15:]) for h in lines if h.lower().startswith(b"content-length:"))
        out.append((int(lines[0].split()[1]), raw[end : end + length]))
        raw = raw[end + length :]
    return out


REFUSED = {
    "a body on GET": head("Host: x", f"Content-Length: {len(SMUGGLED)}") + SMUGGLED,
    "two different Content-Lengths": head("Host: x", "Content-Length: 0", "Content-Length: 37")
    + SMUGGLED,
    "two equal Content-Lengths": head("Host: x", "Content-Length: 37", "Content-Length: 37")
    + SMUGGLED,
    "two Content-Length: 0 on GET": head("Host: x", "Content-Length: 0", "Content-Length: 0")
    + SMUGGLED,
    "a chunked body": head("Host: x", "Transfer-Encoding: chunked")
    + f"{len(SMUGGLED):x}\r\n".encode()
    + SMUGGLED
    + b"\r\n0\r\n\r\n",
    "chunked and a length": head("Host: x", "Content-Length: 4", "Transfer-Encoding: chunked")
    + b"0\r\n\r\n"
    + SMUGGLED,
    "a body on POST": head("Host: x", "Content-Length: 37", start="POST /metrics HTTP/1.1")
    + SMUGGLED,
    "a space before the colon": head("Host: x", "Content-Length : 37") + SMUGGLED,
    "a space before a plain header's colon": head("Host: x", "Accept-Encoding : gzip"),
    "two Host headers": head("Host: x", "Host: y"),
    "two Host headers over HTTP/1.0": head("Host: x", "Host: y", start="GET / HTTP/1.0"),
    "two Authorization headers": head("Host: x", "Authorization: Basic a", "Authorization: b"),
    "no Host over HTTP/1.1": head("Accept: */*"),
}


@pytest.mark.parametrize("request_bytes", REFUSED.values(), ids=list(REFUSED))
async def test_ambiguous_requests_get_a_400_and_the_connection_closes(
    serve: Serve, request_bytes: bytes
) -> None:
    """Before: the body was read as the next request (a 200 and then a 404 for /smuggled),
    a space before a colon was stripped, and the last of two headers won."""
    srv = await serve(keep_alive=1.0)  # a connection kept alive is closed soon enough
    got = await exchange(srv.address[1], request_bytes)
    assert [status for status, _ in got] == [400], got
    assert got[0][1].startswith(b"bad request: ") and b"smuggled" not in got[0][1]


async def test_no_client_bytes_are_echoed_in_a_400(serve: Serve) -> None:
    srv = await serve()
    got = await exchange(srv.address[1], head("Host: x", "X-\x1b]0;owned\x07: 1"))
    assert got[0][0] == 400 and b"\x1b" not in got[0][1] and b"owned" not in got[0][1]


async def test_the_duplicate_authorization_never_reaches_the_handler(serve: Serve) -> None:
    seen: list[Request] = []

    async def handler(request: Request) -> Response:
        seen.append(request)
        return Response(200, b"ok\n")

    srv = await serve(handler=handler)
    good = "Authorization: Basic " + base64.b64encode(b"prometheus:x").decode()
    assert await exchange(srv.address[1], head("Host: x", good, "Connection: close")) == [
        (200, b"ok\n")
    ]
    assert seen[0].header("Authorization") == good[len("Authorization: ") :]
    got = await exchange(srv.address[1], head("Host: x", good, "Authorization: Basic b"))
    assert got[0][0] == 400 and len(seen) == 1


async def test_lists_join_and_bodyless_requests_keep_the_connection(serve: Serve) -> None:
    seen: list[Request] = []

    async def handler(request: Request) -> Response:
        seen.append(request)
        return Response(200, b"ok\n")

    srv = await serve(handler=handler, keep_alive=1.0)
    two = head("Host: x", "Accept-Encoding: br", "Accept-Encoding: gzip")
    empty_post = head("Host: x", "Content-Length: 0", start="POST /x HTTP/1.1")
    got = await exchange(srv.address[1], two + empty_post + head("Host: x", "Connection: close"))
    assert [status for status, _ in got] == [200, 200, 200]
    assert seen[0].header("Accept-Encoding") == "br, gzip" and seen[1].method == "POST"


async def test_the_head_is_bounded_at_16_kib_however_it_arrives(serve: Serve) -> None:
    srv = await serve(keep_alive=1.0)
    port = srv.address[1]
    start = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: "
    fits = start + b"a" * (MAX_HEAD - len(start) - 4) + b"\r\n\r\n"
    over = start + b"a" * (MAX_HEAD - len(start) - 3) + b"\r\n\r\n"
    assert len(fits) == MAX_HEAD and len(over) == MAX_HEAD + 1
    close = b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    assert [s for s, _ in await exchange(port, fits + close)] == [200, 404]
    assert [s for s, _ in await exchange(port, over + close)] == [431]  # in one write
    assert [s for s, _ in await exchange(port, over[:9000], over[9000:])] == [431]  # in two
    endless = start + b"a" * (2 * MAX_HEAD)  # never ends: refused once past the limit
    assert [s for s, _ in await exchange(port, endless[:9000], endless[9000:])] == [431]
