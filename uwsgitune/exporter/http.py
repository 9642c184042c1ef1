"""A small asyncio HTTP server for the scrape target. Plain HTTP/1.1 connections are kept
alive between requests (`keep_alive` seconds idle), as Prometheus reuses its connection;
over TLS each connection answers one request and closes.

Bounds, so that no client, slow, silent or hostile, can hold the endpoint or its memory:
- connections: at most `max_clients` at once and `max_per_peer` from one peer (an IPv4
  address, an IPv6 /64), with room kept for peers that logged in with basic auth
  (`admission.py`; a 401 closes the connection). A connection still waiting for its request
  head gives way to a new one,
  so idle sockets never deny a scrape; over capacity with every slot answering, the newcomer
  gets `503 Service Unavailable` with `Retry-After` (over TLS it is just closed: no
  handshake is spent on it);
- time: the TLS handshake and the request head (at most 16 KiB, else 431) must arrive
  within `read_timeout` (a kept-alive connection's next one, idle, within `keep_alive`),
  and the answer must be written within `write_timeout`; past it the connection is aborted;
- requests: parsed by h11 (`request.py`); a malformed one, one with a body, or with two
  `Host` or `Authorization` headers is a 400 after which the connection closes, so the
  bytes of a body are never read as a request of their own;
- memory: the answer goes out in 64 KiB slices of the one body (`wire.py`), concurrent
  scrapes share one render (`shared.py`), the scrapes of one poll share its rendered bytes
  (`exposition.py`), and the bodies being written total at most `max_held` bytes
  (`admission.Budget`: each shared body once, a scrape's own tail of a few KiB not at all;
  past it, 503): a client that never reads holds about 128 KiB of copies, and slow readers
  together pin at most `max_held`.
A refused TLS handshake (no client certificate, wrong CA) closes the connection without a
word to the log per attempt.

What is served is the `handler`'s business (`site.Site` for the daemon). Without one, the
server answers `GET /metrics` (and HEAD) with `render()` (a shared part and a scrape's own
tail, `exposition.py`), 404 elsewhere and 405 for other methods, which is all
`watch --metrics-listen` needs. Rendering runs in a thread, so a
scrape never stalls the daemon's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry

from uwsgitune.exporter.admission import CURRENT, Budget, Conn, Slots
from uwsgitune.exporter.listen import split_listen
from uwsgitune.exporter.request import Request, RequestParser, Response, text
from uwsgitune.exporter.shared import InFlight
from uwsgitune.exporter.text import render as render_text
from uwsgitune.exporter.wire import (
    CHUNK,
    ERRORS,
    abort,
    accepted,
    bind,
    close_plain,
    nodelay,
    open_streams,
    parse_arriving,
    parse_now,
    parse_stream,
    refuse,
    send,
    send_plain,
)

MAX_HEAD = 16 * 1024
KEEP_ALIVE = 120.0  # seconds a kept-alive connection waits for its next request (idle)
CLOSE_AFTER = frozenset((400, 401, 431, 500, 503))  # answers after which the connection closes
MAX_HELD = 64 * 1024 * 1024  # bytes of answers being written, each body counted once
ACCEPT_RETRY = 0.1  # seconds after a failed accept (EMFILE)
log = logging.getLogger(__name__)
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
            answer = text(503, "answers in progress hold too much memory; retry later",
                          ("Retry-After", "5"))  # fmt: skip
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
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="uwsgitune-metrics")  # fmt: skip

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
