"""A small asyncio HTTP server for the scrape target. Each connection answers one request
and closes.

The request head is bounded (16 KiB) and must arrive within `read_timeout`; at most
`max_clients` connections are served at once; a client that does not read its answer is
dropped after `read_timeout`. So a slow or hostile client cannot hold the endpoint. With a
TLS context the handshake is part of that budget, and a refused handshake (no client
certificate, wrong CA) closes the connection without a word to the log per attempt.

What is served is the `handler`'s business (`site.Site` for the daemon). Without one, the
server answers `GET /metrics` (and HEAD) with `render()`, 404 elsewhere and 405 for other
methods, which is all `watch --metrics-listen` needs. Rendering runs in a thread, so a
scrape never stalls the daemon's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Awaitable, Callable

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry

from uwsgitune.exporter.listen import split_listen
from uwsgitune.exporter.request import Request, Response, parse_head, text
from uwsgitune.exporter.text import render as render_text

MAX_HEAD = 16 * 1024
log = logging.getLogger(__name__)
Handler = Callable[[Request], Awaitable[Response]]


class MetricsServer:
    """Serves `handler` (default: `render()`, the registry in the text format, at /metrics)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        read_timeout: float = 5.0,
        max_clients: int = 16,
        render: Callable[[], bytes] | None = None,
        handler: Handler | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.registry = registry
        self.read_timeout = read_timeout
        self.max_clients = max_clients
        self._render = render or (lambda: render_text(self.registry))
        self.handler: Handler = handler or self._metrics_only
        self.tls = tls
        self._servers: list[asyncio.AbstractServer] = []
        self._clients = 0
        self.failures = 0
        self.addresses: list[tuple[str, int]] = []

    @property
    def address(self) -> tuple[str, int]:
        return self.addresses[0] if self.addresses else ("", 0)

    async def start(self, listen: str) -> None:
        """Bind one more address (call once per `--web.listen-address`)."""
        host, port = split_listen(listen)
        server = await asyncio.start_server(
            self._handle, host.strip("[]"), port, limit=MAX_HEAD, reuse_address=True,
            ssl=self.tls, ssl_handshake_timeout=self.read_timeout if self.tls else None,
        )  # fmt: skip
        self._servers.append(server)
        sockname = server.sockets[0].getsockname()
        self.addresses.append((str(sockname[0]), int(sockname[1])))

    async def close(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for server in servers:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(server.wait_closed(), self.read_timeout)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._clients >= self.max_clients:
            writer.close()
            return
        self._clients += 1
        try:
            answer = await self._answer(reader)
            if answer:
                writer.write(answer)
                await asyncio.wait_for(writer.drain(), self.read_timeout)
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            pass
        finally:
            self._clients -= 1
            with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
                writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> bytes:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.read_timeout)
        except asyncio.LimitOverrunError:
            return text(431, "request head too large").encode()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, OSError):
            return b""  # a client that sent nothing, too little, or too slowly: just close
        request = parse_head(head)
        if request is None:
            return text(400, "bad request line").encode()
        try:
            answer = await self.handler(request)
        except Exception:  # a collector bug must not take the endpoint down
            self.failures += 1
            log.exception("rendering %s failed", request.path)
            # The body never echoes the exception: it can carry what a stats peer sent.
            answer = text(500, "collector failed; see uwsgitune's log")
        return answer.encode(head_only=request.method == "HEAD")

    async def _metrics_only(self, request: Request) -> Response:
        if request.path != "/metrics":
            return text(404, "not found; metrics are at /metrics")
        if request.method not in ("GET", "HEAD"):
            return text(405, "method not allowed", ("Allow", "GET, HEAD"))
        body = await asyncio.to_thread(self._render)
        return Response(200, body, CONTENT_TYPE_PLAIN_0_0_4)


class ThreadedMetricsServer:
    """The same server on its own event loop in a daemon thread (`watch --metrics-listen`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.server = MetricsServer(registry)
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
