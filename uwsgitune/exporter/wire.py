"""The socket side of the endpoint: listening sockets, a connection's streams (TLS included)
built only once it was admitted, a request read into its parser (`request.py`) at most
`room` bytes at a time, a refusal, and an answer written in bounded pieces.

Memory: the body is written as `memoryview` slices of `CHUNK` bytes, each after the
transport's buffer drained below its low-water mark, so a client that reads slowly (or not
at all) holds at most about `2 * CHUNK` bytes of copies in the transport, never its own
copy of the whole exposition. Time: writing, flushing and closing happen within `timeout`;
past it the transport is aborted (not closed: a close waits for a flush that may never come).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct

from uwsgitune.exporter.request import Request, RequestParser, Response

CHUNK = 64 * 1024
BACKLOG = 128
SNDBUF = 256 * 1024  # the kernel doubles it for its bookkeeping
LINGER_0 = struct.pack("ii", 1, 0)
ERRORS = (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ssl.SSLError, RuntimeError)


async def bind(host: str, port: int) -> list[socket.socket]:
    """Listening, non-blocking sockets for every address `host` resolves to (OSError)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)  # fmt: skip
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


async def open_streams(
    sock: socket.socket, tls: ssl.SSLContext | None, limit: int, handshake: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams over an accepted socket; with `tls`, after the handshake. Nothing is read from
    the socket before this is called, so the client's first bytes reach the TLS layer."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await loop.connect_accepted_socket(
        lambda: protocol, sock, ssl=tls, ssl_handshake_timeout=handshake if tls else None
    )
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def nodelay(sock: socket.socket) -> None:
    """Non-blocking, and small writes go out at once (as asyncio's transports set it)."""
    sock.setblocking(False)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def accepted(sock: socket.socket) -> None:
    """Cap the kernel's send buffer (Linux grows it to 4 MiB by itself): what a client that
    does not read can make the kernel hold for it, in memory the unit's MemoryMax counts."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)


def refuse(sock: socket.socket, answer: bytes | None) -> None:
    """Close an accepted socket, first writing `answer` (a short 503) if there is one. What
    the client already sent is read first, so the close does not reset the answer away."""
    with contextlib.suppress(OSError):
        if answer is not None:
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.recv(16 * 1024)
            sock.send(answer)
    sock.close()


def abort(writer: asyncio.StreamWriter) -> None:
    """Drop the connection now: a reset, and what the kernel still holds for it discarded
    (a plain close would leave it sending to a client that does not read)."""
    with contextlib.suppress(*ERRORS):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_0)
        writer.transport.abort()


async def _send(writer: asyncio.StreamWriter, head: bytes, body: tuple[bytes, ...]) -> None:
    writer.write(head)
    for part in body:
        view = memoryview(part)
        for start in range(0, len(view), CHUNK):
            await writer.drain()
            writer.write(view[start : start + CHUNK])
    writer.close()
    await writer.wait_closed()  # the rest flushed and the connection closed


def recv_now(sock: socket.socket, limit: int) -> bytes:
    """What has arrived on a non-blocking socket, up to `limit` bytes (b"": nothing yet).
    Raises IncompleteReadError when the peer closed."""
    try:
        chunk = sock.recv(limit)
    except BlockingIOError:
        return b""
    if not chunk:
        raise asyncio.IncompleteReadError(b"", None)
    return chunk


def parse_now(sock: socket.socket, parser: RequestParser) -> Request | Response | None:
    """The next request from what has arrived, read and parsed without a turn of the event
    loop; None when it is not all there yet."""
    while (got := parser.next()) is None:
        data = recv_now(sock, parser.room)
        if not data:
            return None
        parser.feed(data)
    return got


async def parse_arriving(sock: socket.socket, parser: RequestParser) -> Request | Response:
    """`parse_now`, waiting for what has not arrived (the caller bounds the wait)."""
    loop = asyncio.get_running_loop()
    while (got := parse_now(sock, parser)) is None:
        data = await loop.sock_recv(sock, parser.room)
        if not data:
            raise asyncio.IncompleteReadError(b"", None)
        parser.feed(data)
    return got


async def parse_stream(reader: asyncio.StreamReader, parser: RequestParser) -> Request | Response:
    """The request from a stream (TLS), read as it arrives (the caller bounds the wait)."""
    while (got := parser.next()) is None:
        data = await reader.read(parser.room)
        if not data:
            raise asyncio.IncompleteReadError(b"", None)
        parser.feed(data)
    return got


def send_now(sock: socket.socket, parts: tuple[bytes, ...]) -> list[memoryview]:
    """Write what the kernel takes now, in one call; the rest, as views (no copies)."""
    views = [memoryview(p) for p in parts if p]
    try:
        sent = sock.sendmsg(views)
    except BlockingIOError:
        sent = 0
    while views and sent >= len(views[0]):
        sent -= len(views.pop(0))
    if views and sent:
        views[0] = views[0][sent:]
    return views


async def _send_rest(sock: socket.socket, views: list[memoryview]) -> None:
    loop = asyncio.get_running_loop()
    for view in views:
        for start in range(0, len(view), CHUNK):
            await loop.sock_sendall(sock, view[start : start + CHUNK])


async def send_plain(sock: socket.socket, parts: tuple[bytes, ...], timeout: float) -> bool:
    """Write `parts` on a non-blocking socket (what the kernel takes at once without a turn
    of the loop), within `timeout`. Whether it all went out (the caller closes or aborts)."""
    rest = send_now(sock, parts)
    if not rest:
        return True
    try:
        await asyncio.wait_for(_send_rest(sock, rest), timeout)
        return True
    except ERRORS:
        return False


def close_plain(sock: socket.socket, sent: bool) -> None:
    """Close after an answer: what the client sent beyond its head is read first, so the
    close does not reset the answer away; without an answer, a reset (`abort`)."""
    with contextlib.suppress(OSError, EOFError):
        if not sent:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_0)
        else:
            left = 64 * 1024
            while left > 0 and (chunk := recv_now(sock, left)):
                left -= len(chunk)
    sock.close()


async def send(
    writer: asyncio.StreamWriter, head: bytes, body: tuple[bytes, ...], timeout: float
) -> bool:
    """Write `head` and the parts of `body`, then close; abort past `timeout`. Whether it all
    went out."""
    try:
        await asyncio.wait_for(_send(writer, head, body), timeout)
        return True
    except ERRORS:
        abort(writer)
        return False
