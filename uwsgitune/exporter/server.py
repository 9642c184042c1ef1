"""A small asyncio HTTP/1.1 server for the scrape target: the sockets, the requests (parsed by
h11), the answers, and the bounds that keep any client from holding it.

Plain HTTP/1.1 connections are kept alive between requests (`keep_alive` seconds idle), as
Prometheus reuses its connection: a request that has arrived is read, and an answer the
kernel takes at once is written, without a turn of the event loop. Over TLS each connection
answers one request and closes; its streams are built only once it was admitted, so no
handshake is spent on a connection that is refused.

Requests are parsed by h11 (python-hyper/h11: bytes in, events out), not by hand, so that
the request line, header names and values, Host and the message framing follow RFC 9112
as h11 enforces it. On top of h11, for an endpoint that serves GET and HEAD only:
- no request carries a body: `Transfer-Encoding`, a `Content-Length` other than 0, or any
  `Content-Length` on GET or HEAD is a 400 after which the connection closes, so body
  bytes are never read as the next request (h11 folds repeated equal lengths into one;
  refusing the header on GET and HEAD refuses a repeated `Content-Length: 0` there too);
- `Host`, `Authorization` and `X-Prometheus-Scrape-Timeout-Seconds` appear at most once:
  two are a 400, never "the last one wins";
- other repeated headers are joined with ", " (RFC 9110 5.3), names lower-cased;
- the head (request line and headers) is at most `MAX_HEAD` bytes (16 KiB), however it
  arrives (h11's `max_incomplete_event_size` bounds what is buffered; a head complete in
  one read is measured too): past it, 431.
A 400 names h11's reason without the bytes it quotes: the client's bytes are never echoed.
Answers are written here (`Response.head`), not by h11: the head is one f-string sent with
the body's shared slices, and every header value it can carry is checked where it is
configured (`webconfig.py`), so h11's writer would add only its cost.

Bounds, so that no client, slow, silent or hostile, can hold the endpoint or its memory:
- connections: at most `max_clients` at once and `max_per_peer` from one peer, with room
  kept for peers that logged in with basic auth (`admission.Slots`; a 401 closes the
  connection). A connection still waiting for its request head gives way to a new one, so
  idle sockets never deny a scrape; over capacity with every slot answering, the newcomer
  gets `503 Service Unavailable` with `Retry-After` (over TLS it is just closed);
- time: the TLS handshake and the request head must arrive within `read_timeout` (a
  kept-alive connection's next one, idle, within `keep_alive`), and the answer must be
  written within `write_timeout`; past it the connection is aborted (not closed: a close
  waits for a flush that may never come);
- requests: a malformed one, one with a body, or with two `Host` or `Authorization`
  headers is a 400 after which the connection closes;
- memory: the answer goes out in `CHUNK` (64 KiB) `memoryview` slices of the one body,
  each after the transport drained, so a client that never reads holds about 128 KiB of
  copies, never its own copy of the exposition; the kernel's send buffer is capped
  (`SNDBUF`); concurrent scrapes share one render and the scrapes of one poll its bytes
  (`exposition.py`); and the bodies being written total at most `max_held` bytes
  (`admission.Budget`: each shared body once, a scrape's own tail of a few KiB not at all;
  past it, 503): slow readers together pin at most `max_held`.
A refused TLS handshake (no client certificate, wrong CA) closes the connection without a
word to the log per attempt. A close after an answer reads what the client sent beyond its
head first, so the close does not reset the answer away.

What is served is the `handler`'s business (`site.Site` for the daemon). Without one, the
server answers `GET /metrics` (and HEAD) with `render()` (a shared part and a scrape's own
tail), 404 elsewhere and 405 for other methods, which is all `watch --metrics-listen`
needs. Rendering runs in a thread, so a scrape never stalls the event loop.

Where it listens: `HOST:PORT` (`core.address.split_listen`: a host is required, `:9117` is
refused rather than guessed), on every address the host resolves to.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
import struct
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import parse_qs, unquote

import h11
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry

from uwsgitune.core.address import split_listen
from uwsgitune.exporter.admission import CURRENT, Budget, Conn, Slots
from uwsgitune.exporter.exposition import InFlight
from uwsgitune.exporter.exposition import render as render_text

MAX_HEAD = 16 * 1024
KEEP_ALIVE = 120.0  # seconds a kept-alive connection waits for its next request (idle)
CLOSE_AFTER = frozenset((400, 401, 431, 500, 503))  # answers after which the connection closes
MAX_HELD = 64 * 1024 * 1024  # bytes of answers being written, each body counted once
ACCEPT_RETRY = 0.1  # seconds after a failed accept (EMFILE)
CHUNK = 64 * 1024
BACKLOG = 128
SNDBUF = 256 * 1024  # the kernel doubles it for its bookkeeping
LINGER_0 = struct.pack("ii", 1, 0)
ERRORS = (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ssl.SSLError, RuntimeError)
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
TEXT = "text/plain; charset=utf-8"
SINGLE = frozenset((b"host", b"authorization", b"x-prometheus-scrape-timeout-seconds"))
NO_BODY = (b"GET", b"HEAD")
log = logging.getLogger(__name__)


# Where it listens (`core.address.split_listen` parses HOST:PORT) -------------------------------


def ip_loopback(host: str) -> bool:
    """Whether a bound address is reachable from this host only."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


# Requests and answers (no I/O) ----------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    version: str = "HTTP/1.1"

    @property
    def keep_alive(self) -> bool:
        """HTTP/1.1 keeps the connection unless the client says close; 1.0 closes it."""
        connection = (self.header("Connection") or "").lower()
        return self.version == "HTTP/1.1" and "close" not in connection

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()
    tail: bytes = b""  # sent after `body`, which a scrape shares with others (exposition.py)

    @property
    def content(self) -> bytes:
        """The whole body (a copy when there is a tail)."""
        return self.body + self.tail if self.tail else self.body

    def encode(self, head_only: bool = False, extra: tuple[tuple[str, str], ...] = ()) -> bytes:
        return self.head(extra) + (b"" if head_only else self.content)

    def head(self, extra: tuple[tuple[str, str], ...] = (), keep: bool = False) -> bytes:
        """The status line and headers: the server writes the body after it, uncopied.
        `keep`: the connection stays open for the client's next request."""
        lines = [
            f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body) + len(self.tail)}",
            "Connection: keep-alive" if keep else "Connection: close",
            *(f"{k}: {v}" for k, v in (*self.headers, *extra)),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def text(status: int, message: str, *headers: tuple[str, str]) -> Response:
    return Response(status, (message + "\n").encode(), TEXT, headers)


class RequestParser:
    """One request from a connection's bytes: `feed` what arrives (at most `room` bytes
    at a time), `next()` until it is not None; `rest` is what followed the request head
    (a pipelined next request), for the next parser."""

    def __init__(self, limit: int, data: bytes = b"") -> None:
        self.limit = limit
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limit)
        self._fed = 0
        self._new = False  # bytes fed since h11 last needed more
        self.rest = b""
        if data:
            self.feed(data)

    @property
    def room(self) -> int:
        """Bytes to read at most before the head must be complete."""
        return max(1, self.limit + 1 - self._fed)

    def feed(self, data: bytes) -> None:
        self._fed += len(data)
        self._new = True
        self._h11.receive_data(data)

    def next(self) -> Request | Response | None:
        """The request, an answer that refuses it (the connection closes after it), or
        None: more bytes are needed."""
        if not self._new:
            return None
        self._new = False
        try:
            event = self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            if exc.error_status_hint == 431:
                return text(431, "request head too large")
            return text(400, f"bad request: {_reason(exc)}")
        if not isinstance(event, h11.Request):  # NEED_DATA: the peer's close is not fed
            return None
        self.rest = self._h11.trailing_data[0]
        if self._fed - len(self.rest) > self.limit:
            return text(431, "request head too large")
        return _request(event)


def _reason(exc: h11.RemoteProtocolError) -> str:
    """h11's reason, cut before the client's bytes it quotes."""
    reason = str(exc)
    for quoted in (": b'", ': b"', ": bytearray("):
        reason = reason.split(quoted, 1)[0]
    return reason


def _request(event: h11.Request) -> Request | Response:
    headers: dict[str, str] = {}
    for raw, value in event.headers.raw_items():
        name = raw.lower()
        key = name.decode("ascii")
        if key not in headers:
            headers[key] = value.decode("latin-1")
        elif name in SINGLE:
            return text(400, f"bad request: more than one {key} header")
        else:
            headers[key] += ", " + value.decode("latin-1")
    length = headers.get("content-length")
    if (
        "transfer-encoding" in headers
        or length not in (None, "0")
        or (length is not None and event.method in NO_BODY)
    ):
        why = "a request body (Content-Length, Transfer-Encoding); this endpoint takes none"
        return text(400, f"bad request: {why}")
    path, _, query = event.target.decode("ascii").partition("?")
    version = "HTTP/" + event.http_version.decode("ascii")
    return Request(event.method.decode("ascii"), unquote(path), parse_qs(query), headers, version)


# The sockets ------------------------------------------------------------------------------


async def bind(host: str, port: int) -> list[socket.socket]:
    """Listening, non-blocking sockets for every address `host` resolves to (OSError)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
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


# The server -----------------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def _nothing() -> None:
    pass


def _closed(sock: socket.socket, _task: asyncio.Task[None]) -> None:
    sock.close()  # a no-op when the connection's task closed it


class MetricsServer:
    """Serves `handler` (default: `render()`, the registry in the text format, at /metrics)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        read_timeout: float = 10.0,
        keep_alive: float = KEEP_ALIVE,
        write_timeout: float = 30.0,
        max_clients: int = 64,
        max_per_peer: int = 8,
        max_held: int = MAX_HELD,
        render: Callable[[], tuple[bytes, bytes]] | None = None,
        handler: Handler | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.registry = registry
        self.read_timeout = read_timeout
        self.keep_alive = keep_alive
        self.write_timeout = write_timeout
        self.slots = Slots(max_clients, max_per_peer)
        self.budget = Budget(max_held, CHUNK)
        self._render = render or (lambda: (render_text(self.registry), b""))
        self._renders: InFlight[tuple[bytes, bytes]] = InFlight()
        self.handler: Handler = handler or self._metrics_only
        self.tls = tls
        self._socks: list[socket.socket] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy = text(503, "too many connections; retry later", ("Retry-After", "5")).encode()
        self.failures = 0  # handler exceptions (500)
        self.cut = 0  # answers aborted at `write_timeout`
        self.addresses: list[tuple[str, int]] = []

    @property
    def address(self) -> tuple[str, int]:
        return self.addresses[0] if self.addresses else ("", 0)

    async def start(self, listen: str) -> None:
        """Bind one more address (call once per `--web.listen-address`). Raises OSError."""
        host, port = split_listen(listen)
        socks = await bind(host.strip("[]"), port)
        self._socks += socks
        for sock in socks:
            self._spawn(self._accept(sock))
        sockname = socks[0].getsockname()
        self.addresses.append((str(sockname[0]), int(sockname[1])))

    async def close(self) -> None:
        """Stop listening and drop every connection (none is waited for)."""
        socks, self._socks = self._socks, []
        tasks, self._tasks = self._tasks, set()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.read_timeout)
        for sock in socks:
            sock.close()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, addr = await loop.sock_accept(sock)
            except OSError:  # out of file descriptors, a connection reset before accept
                await asyncio.sleep(ACCEPT_RETRY)
                continue
            accepted(client)
            conn = Conn(str(addr[0]) if isinstance(addr, tuple) else "", _nothing)
            if not self.slots.admit(conn):  # over TLS no handshake is spent on it
                refuse(client, None if self.tls else self._busy)
                continue
            task = self._spawn(self._serve(conn, client))
            task.add_done_callback(partial(_closed, client))  # evicted before it ran, too
            conn.abort = task.cancel
            await asyncio.sleep(0)  # its first step (a head that came is read: busy) first

    async def _serve(self, conn: Conn, client: socket.socket) -> None:
        """Plain HTTP on the socket itself, kept alive for the client's next request (as
        Prometheus scrapes: one connection, reused). A request that has arrived is read,
        and an answer the kernel takes at once is written, without a turn of the event loop.
        Between requests the connection is idle again: it gives way to a new one."""
        CURRENT.set(conn)  # this task's own: the handler reads the connection's standing
        if self.tls is not None:
            return await self._serve_tls(conn, client)
        clean, rest, timeout = True, b"", self.read_timeout
        try:
            nodelay(client)
            while True:
                parser = RequestParser(MAX_HEAD, rest)  # `rest`: a pipelined request
                got = parse_now(client, parser)
                if got is None:  # not all there yet: wait for the rest, within the deadline
                    got = await asyncio.wait_for(parse_arriving(client, parser), timeout)
                rest = parser.rest
                conn.idle, clean = False, False
                sent, keep = await self._respond(
                    got, lambda h, body: send_plain(client, (h, *body), self.write_timeout)
                )
                if not (sent and keep):
                    clean = sent
                    break
                conn.idle, clean, timeout = True, True, self.keep_alive
        except ERRORS:
            pass  # silent, too slow, or gone: just drop it
        finally:
            self.slots.release(conn)
            close_plain(client, clean)

    async def _respond(
        self,
        got: Request | Response,
        write: Callable[[bytes, tuple[bytes, ...]], Awaitable[bool]],
    ) -> tuple[bool, bool]:
        """Answer a request (or a ready answer): whether it all went out, and whether the
        connection may stay open for another request."""
        answer, request = await self._answer(got)
        if not self.budget.take(answer.body):
            self.budget.refused += 1
            why = "answers in progress hold too much memory; retry later"
            answer = text(503, why, ("Retry-After", "5"))
        keep = request is not None and request.keep_alive and answer.status not in CLOSE_AFTER
        head_only = request is not None and request.method == "HEAD"
        try:
            body = () if head_only else (answer.body, answer.tail)
            sent = await write(answer.head(keep=keep), body)
        finally:
            self.budget.give(answer.body)
        self.cut += not sent
        return sent, keep

    async def _serve_tls(self, conn: Conn, client: socket.socket) -> None:
        opened: list[asyncio.StreamWriter] = []
        sent = False
        try:
            got = await asyncio.wait_for(self._receive(client, opened), self.read_timeout)
            conn.idle = False
            sent, _ = await self._respond(  # `keep` is never set over TLS: one request
                got, lambda h, body: send(opened[0], h, body, self.write_timeout)
            )
        except ERRORS:
            pass  # silent, too slow, or a refused handshake: just drop it
        finally:
            self.slots.release(conn)
            if opened and not sent:
                abort(opened[0])
            elif not opened:  # no streams: a transport that was started stopped reading it
                client.close()

    async def _receive(
        self, client: socket.socket, opened: list[asyncio.StreamWriter]
    ) -> Request | Response:
        """The request, the TLS handshake first if any (within `read_timeout`)."""
        reader, writer = await open_streams(client, self.tls, MAX_HEAD, self.read_timeout)
        opened.append(writer)
        return await parse_stream(reader, RequestParser(MAX_HEAD))

    async def _answer(self, got: Request | Response) -> tuple[Response, Request | None]:
        """The answer, and the request it answers (None: what came was refused)."""
        if isinstance(got, Response):
            return got, None
        request = got
        try:
            answer = await self.handler(request)
        except Exception:  # a collector bug must not take the endpoint down
            self.failures += 1
            log.exception("rendering %s failed", request.path)
            # The body never echoes the exception: it can carry what a stats peer sent.
            answer = text(500, "collector failed; see uwsgitune's log")
        return answer, request

    async def _metrics_only(self, request: Request) -> Response:
        if request.path != "/metrics":
            return text(404, "not found; metrics are at /metrics")
        if request.method not in ("GET", "HEAD"):
            return text(405, "method not allowed", ("Allow", "GET, HEAD"))
        body, tail = await self._renders.run("text", self._render)
        return Response(200, body, CONTENT_TYPE_PLAIN_0_0_4, tail=tail)


class ThreadedMetricsServer:
    """The same server on its own event loop in a daemon thread (`watch --metrics-listen`)."""

    def __init__(
        self, registry: CollectorRegistry, render: Callable[[], tuple[bytes, bytes]] | None = None
    ) -> None:
        self.server = MetricsServer(registry, render=render)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="uwsgitune-metrics"
        )

    def start(self, listen: str) -> tuple[str, int]:
        """Bind (raising OSError/ValueError here, in the caller) and serve in the background."""
        try:
            self._loop.run_until_complete(self.server.start(listen))
        except BaseException:
            self._loop.close()
            raise
        self._thread.start()
        return self.server.address

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self.server.close(), self._loop)
        with contextlib.suppress(Exception):  # best effort at exit
            future.result(timeout=2)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=2)
        if not self._thread.is_alive():
            self._loop.close()
