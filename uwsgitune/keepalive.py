"""One persistent HTTP/1.1 client connection for the load generator (`--keepalive`).

A response is read by its `Content-Length` (or to EOF when it has none, which ends the
connection). The connection is reopened whenever the server closed it: uWSGI's plain
`http-socket` answers and closes, `http11-socket` or a proxy keeps it. A request that fails on
a connection that had already served one is retried once on a fresh connection, since the
server may have closed an idle connection just as we wrote to it.
"""

from __future__ import annotations

import asyncio

HEAD_LIMIT = 64 * 1024


def _status_and_length(head: bytes) -> tuple[int, int | None, bool]:
    """The status, the Content-Length (None: read to EOF), and whether the server closes."""
    lines = head.split(b"\r\n")
    first = lines[0].split()
    if len(first) < 2 or not first[1].isdigit():
        raise ConnectionError("bad response")
    length: int | None = None
    closes = first[0] == b"HTTP/1.0"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
        elif key == b"connection":
            token = value.strip().lower()
            closes = token == b"close" or (closes and token != b"keep-alive")
    return int(first[1]), length, closes or length is None


class KeepAliveConn:
    """A client's connection to `host:port` (or `unix_socket`), opened on first use."""

    def __init__(self, host: str, port: int, unix_socket: str | None = None) -> None:
        self.host, self.port, self.unix_socket = host, port, unix_socket
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.connects = 0

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.unix_socket is not None:
            pair = await asyncio.open_unix_connection(self.unix_socket, limit=HEAD_LIMIT)
        else:
            pair = await asyncio.open_connection(self.host, self.port, limit=HEAD_LIMIT)
        self._reader, self._writer = pair
        self.connects += 1
        return pair

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _exchange(self, request: bytes) -> int:
        reader, writer = (
            (self._reader, self._writer) if self._writer is not None else await self._open()
        )
        assert reader is not None and writer is not None
        writer.write(request)
        await writer.drain()
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            raise ConnectionResetError("closed before answering") from None
        status, length, closes = _status_and_length(head)
        if length is None:
            await reader.read()
        else:
            await reader.readexactly(length)
        if closes:
            self.close()
        return status

    async def request(self, request: bytes, timeout: float) -> int:
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
