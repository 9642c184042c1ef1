"""One persistent HTTP/1.1 client connection for the load generator (`--keepalive`).

Answers are read by h11 (python-hyper/h11, as the exporter's server reads requests): a body
framed by `Content-Length`, by chunked transfer-coding (uWSGI's HTTP router with
`--http-auto-chunked`, an app that streams), or read to EOF when it has neither (which ends
the connection); h11 also says whether the connection may carry the next request. An answer
that breaks HTTP/1.1 is a `ConnectionError`, counted by the load generator as a failure.

The connection is reopened whenever the server closed it: uWSGI's plain `http-socket`
answers and closes, `http11-socket` or a proxy keeps it. A request that fails on a
connection that had already served one is retried once on a fresh connection, since the
server may have closed an idle connection just as we wrote to it.
"""

from __future__ import annotations

import asyncio

import h11

HEAD_LIMIT = 64 * 1024  # bytes of an answer's head
READ = 64 * 1024  # bytes read at a time


def get(target: str, host: str) -> h11.Request:
    """The load generator's request on a kept-alive connection."""
    headers = [("Host", host), ("User-Agent", "uwsgitune-load"), ("Connection", "keep-alive")]
    return h11.Request(method="GET", target=target, headers=headers)


class KeepAliveConn:
    """A client's connection to `host:port` (or `unix_socket`), opened on first use."""

    def __init__(self, host: str, port: int, unix_socket: str | None = None) -> None:
        self.host, self.port, self.unix_socket = host, port, unix_socket
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
        self.connects = 0

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.unix_socket is not None:
            pair = await asyncio.open_unix_connection(self.unix_socket)
        else:
            pair = await asyncio.open_connection(self.host, self.port)
        self._reader, self._writer = pair
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
        self.connects += 1
        return pair

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _exchange(self, request: h11.Request) -> int:
        reader, writer = (
            (self._reader, self._writer) if self._writer is not None else await self._open()
        )
        assert reader is not None and writer is not None
        conn = self._h11
        try:
            writer.write((conn.send(request) or b"") + (conn.send(h11.EndOfMessage()) or b""))
            await writer.drain()
            status = await self._answer(conn, reader)
        except h11.ProtocolError as exc:
            raise ConnectionError(f"bad response: {exc}") from None
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()  # kept alive: ready for the next request
        else:
            self.close()  # either side said close, or the body ran to EOF
        return status

    @staticmethod
    async def _answer(conn: h11.Connection, reader: asyncio.StreamReader) -> int:
        """The answer's status, its body read and dropped to its end."""
        status = None
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(READ)
                if not data and status is None:
                    raise ConnectionResetError("closed before answering")
                conn.receive_data(data)  # b"": the server closed (ends a read-to-EOF body)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.EndOfMessage):
                assert status is not None  # h11 gives the head before the end
                return status
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("closed before answering")
            # h11.Data (the body, dropped) and h11.InformationalResponse (1xx) go on

    async def request(self, request: h11.Request, timeout: float) -> int:
        """Send `request`, read the whole answer, return its status."""
        reused = self._writer is not None
        try:
            return await asyncio.wait_for(self._exchange(request), timeout)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            self.close()
            if not reused:
                raise
        except BaseException:
            self.close()
            raise
        return await asyncio.wait_for(self._exchange(request), timeout)
