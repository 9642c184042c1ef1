"""A small asyncio HTTP server for the scrape target: `GET /metrics` (and HEAD), nothing else.

Other paths are 404, other methods 405. Each connection answers one request and closes.
The request head is bounded (16 KiB) and must arrive within `read_timeout`; at most
`max_clients` connections are served at once; a client that does not read its answer is
dropped after `read_timeout`. So a slow or hostile client cannot hold the endpoint.
The exposition is rendered in a thread, so a scrape never stalls the daemon's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry

from uwsgitune.exporter.listen import split_listen
from uwsgitune.exporter.text import render as render_text

MAX_HEAD = 16 * 1024
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           431: "Request Header Fields Too Large", 500: "Internal Server Error"}  # fmt: skip


def response(status: int, body: bytes = b"", content_type: str = "text/plain; charset=utf-8",
             head_only: bool = False, extra: str = "") -> bytes:  # fmt: skip
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode("latin-1") + (b"" if head_only else body)


class MetricsServer:
    """Serves `render()` (default: the registry in the text format) at /metrics."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        read_timeout: float = 5.0,
        max_clients: int = 16,
        render: Callable[[], bytes] | None = None,
    ) -> None:
        self.registry = registry
        self.read_timeout = read_timeout
        self.max_clients = max_clients
        self._render = render or (lambda: render_text(self.registry))
        self._server: asyncio.AbstractServer | None = None
        self._clients = 0
        self.failures = 0
        self.address: tuple[str, int] = ("", 0)

    async def start(self, listen: str) -> None:
        host, port = split_listen(listen)
        self._server = await asyncio.start_server(
            self._handle, host.strip("[]"), port, limit=MAX_HEAD, reuse_address=True
        )
        sockname = self._server.sockets[0].getsockname()
        self.address = (str(sockname[0]), int(sockname[1]))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), self.read_timeout)
            self._server = None

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
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            self._clients -= 1
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> bytes:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.read_timeout)
        except asyncio.LimitOverrunError:
            return response(431, b"request head too large\n")
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError):
            return b""  # a client that sent nothing, too little, or too slowly: just close
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return response(400, b"bad request line\n")
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target != b"/metrics":
            return response(404, b"not found; metrics are at /metrics\n")
        if method not in (b"GET", b"HEAD"):
            return response(405, b"method not allowed\n", extra="Allow: GET, HEAD\r\n")
        try:
            body = await asyncio.to_thread(self._render)
        except Exception as exc:  # a collector bug must not take the endpoint down
            self.failures += 1
            return response(500, f"collector failed: {exc!r}\n".encode())
        return response(200, body, CONTENT_TYPE_PLAIN_0_0_4, head_only=method == b"HEAD")


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
