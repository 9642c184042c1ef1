"""A bounded HTTP/1.0 load generator on asyncio: nothing else to install.

Closed loop (`concurrency` clients, each sends the next request when the last one ends) or
open loop (`rate` requests per second, whatever the server does). Every run is bounded by a
duration *and* a request count. Non-keepalive by default: one connection per request, as nginx
to uWSGI; `keepalive=True` keeps one HTTP/1.1 connection per client (reconnecting whenever the
server closes it), as a proxy with upstream keepalive does. In the open loop a request's latency
runs from its *intended* send time, so a generator that falls behind shows it as latency
instead of hiding it (no coordinated omission); a request it cannot start because
`max_in_flight` are outstanding counts as an error (`Dropped`), never as silence.
Loopback only is the caller's business; this module connects where it is told.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import h11

from uwsgitune.keepalive import KeepAliveConn, get


@dataclass
class LoadResult:
    sent: int = 0
    ok: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    error_kinds: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    finished: list[float] = field(default_factory=list)  # clock at each latency's end
    failed_at: list[float] = field(default_factory=list)  # clock at each error
    started: float = 0.0
    ended: float = 0.0

    @property
    def elapsed(self) -> float:
        return max(self.ended - self.started, 1e-9)

    @property
    def throughput(self) -> float:
        return self.ok / self.elapsed

    def percentile(self, q: float) -> float | None:
        if not self.latencies:
            return None
        data = sorted(self.latencies)
        idx = min(len(data) - 1, max(0, round(q / 100 * (len(data) - 1))))
        return data[idx]


STAMP_HEADER = "X-Request-Start"


def proxy_stamp(now: float | None = None) -> str:
    """nginx's `t=${msec}`: seconds since the epoch with milliseconds."""
    ms = int((time.time() if now is None else now) * 1000)
    return f"t={ms // 1000}.{ms % 1000:03d}"


def _target(
    url: str, headers: Sequence[tuple[str, str]] = ()
) -> tuple[str, int, bytes, h11.Request]:
    """Host, port, the request on its own connection (HTTP/1.0), and on a kept one; `headers`
    are sent with both (a session cookie, say: they are never logged or shown)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{url}: only http://HOST:PORT/PATH URLs are supported")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname
    port = parts.port or 80
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
    request = (
        f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: uwsgitune-load\r\n{extra}\r\n"
    )
    kept = get(path, f"{host}:{port}")
    if headers:
        kept = h11.Request(method="GET", target=path, headers=[*kept.headers, *headers])
    return host, port, request.encode(), kept


async def one_request(
    host: str, port: int, request: bytes, timeout: float, unix_socket: str | None = None
) -> int:
    """Send one request on a fresh connection (TCP, or `unix_socket`); return the HTTP status."""

    async def go() -> int:
        if unix_socket is not None:
            reader, writer = await asyncio.open_unix_connection(unix_socket)
        else:
            reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(request)
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
        line = data.split(b"\r\n", 1)[0].split()
        if len(line) < 2 or not line[1].isdigit():
            raise ConnectionError("bad response")
        return int(line[1])

    return await asyncio.wait_for(go(), timeout)


class LoadRun:
    """One bounded run. `path` may be changed while it runs (the demo's phases do)."""

    def __init__(
        self,
        url: str,
        *,
        duration: float,
        max_requests: int = 1_000_000,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        unix_socket: str | None = None,
        keepalive: bool = False,
        stamp: bool = False,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.keepalive = keepalive
        # stamp each request as a front proxy does (nginx: `t=${msec}`), when it is sent: the
        # request log then splits its time into queue wait and service (docs/latency.md)
        self.stamp = stamp
        self.headers = tuple(headers)
        self.host, self.port, self.request, self.kept_request = _target(url, self.headers)
        # An `http-socket = /path.sock`: connect there, send `url`'s path and Host header.
        self.unix_socket = unix_socket
        self.duration = duration
        self.max_requests = max_requests
        self.timeout = timeout
        self.result = LoadResult()
        self._clock = clock
        self._stop = asyncio.Event()

    def set_url(self, url: str) -> None:
        self.host, self.port, self.request, self.kept_request = _target(url, self.headers)

    def stop(self) -> None:
        self._stop.set()

    def _budget_left(self, end: float) -> bool:
        return (
            not self._stop.is_set() and self._clock() < end and self.result.sent < self.max_requests
        )

    async def _send(self, conn: KeepAliveConn | None) -> int:
        if conn is not None:
            kept = self.kept_request
            if self.stamp:
                kept = h11.Request(
                    method=kept.method,
                    target=kept.target,
                    headers=[*kept.headers, (STAMP_HEADER.encode(), proxy_stamp().encode())],
                )
            return await conn.request(kept, self.timeout)
        request = self.request
        if self.stamp:
            request = request[:-2] + f"{STAMP_HEADER}: {proxy_stamp()}\r\n\r\n".encode()
        return await one_request(self.host, self.port, request, self.timeout, self.unix_socket)

    def _count_error(self, kind: str) -> None:
        r = self.result
        r.errors += 1
        r.error_kinds[kind] = r.error_kinds.get(kind, 0) + 1
        r.failed_at.append(self._clock())

    async def _fire(self, conn: KeepAliveConn | None = None, intended: float | None = None) -> None:
        """One request; its latency runs from `intended` (the open loop's schedule) if given."""
        r = self.result
        r.sent += 1
        t0 = self._clock() if intended is None else intended
        try:
            status = await self._send(conn)
        except (OSError, asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError) as exc:
            self._count_error(type(exc).__name__)
            return
        r.statuses[status] = r.statuses.get(status, 0) + 1
        if 200 <= status < 400:
            r.ok += 1
            end = self._clock()
            r.latencies.append(end - t0)
            r.finished.append(end)
        else:
            self._count_error(f"HTTP {status}")

    def _conn(self) -> KeepAliveConn | None:
        return KeepAliveConn(self.host, self.port, self.unix_socket) if self.keepalive else None

    async def closed_loop(self, concurrency: int) -> LoadResult:
        self.result.started = self._clock()
        end = self.result.started + self.duration

        async def client() -> None:
            conn = self._conn()
            try:
                while self._budget_left(end):
                    await self._fire(conn)
            finally:
                if conn is not None:
                    conn.close()

        await asyncio.gather(*(client() for _ in range(max(1, concurrency))))
        self.result.ended = self._clock()
        return self.result

    async def open_loop(self, rate: float, max_in_flight: int = 2000) -> LoadResult:
        self.result.started = self._clock()
        end = self.result.started + self.duration
        tasks: set[asyncio.Task[None]] = set()
        interval = 1.0 / max(rate, 0.001)
        next_at = self.result.started
        idle: list[KeepAliveConn | None] = []  # keepalive: connections between requests
        while self._budget_left(end):
            if len(tasks) < max_in_flight:
                task = asyncio.create_task(self._fire_pooled(idle, next_at))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            else:
                self.result.sent += 1
                self._count_error("Dropped")
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - self._clock()))
        if tasks:
            await asyncio.wait(tasks, timeout=self.timeout)
        for conn in idle:
            if conn is not None:
                conn.close()
        self.result.ended = self._clock()
        return self.result

    async def _fire_pooled(self, idle: list[KeepAliveConn | None], intended: float) -> None:
        conn = idle.pop() if idle else self._conn()
        await self._fire(conn, intended)
        idle.append(conn)


def run_closed(
    url: str, concurrency: int, duration: float, max_requests: int = 1_000_000
) -> LoadResult:
    """Blocking helper for scripts and tests."""
    return asyncio.run(
        LoadRun(url, duration=duration, max_requests=max_requests).closed_loop(concurrency)
    )


def run_open(url: str, rate: float, duration: float, max_requests: int = 1_000_000) -> LoadResult:
    return asyncio.run(LoadRun(url, duration=duration, max_requests=max_requests).open_loop(rate))
