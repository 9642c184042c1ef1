"""Read one stats document from a live uWSGI, without ever harming it.

Rules this module keeps (see uwsgi-facts.md):
- one connection per document, closed at once; never held past the deadline;
- `--stats-http` gets its request line the moment the connection opens (a silent client stalls
  the master loop for ~4 s);
- a raw TCP stats server speaks first: if nothing arrives quickly the peer is probably a
  `--stats-http` server waiting for a request, so we hang up early and say so;
- a document is capped (16 MiB by default) and must be JSON that looks like uWSGI stats.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import struct
import time
from dataclasses import dataclass

from uwsgitune.core.address import StatsAddress
from uwsgitune.core.redact import printable
from uwsgitune.errors import UwsgituneError

MAX_DOCUMENT = 16 * 1024 * 1024
RAW_FIRST_BYTE = 1.0  # seconds a raw TCP peer may stay silent before we suspect stats-http


class StatsError(UwsgituneError):
    """A poll that failed. `str()` is one line: the address, what happened, the likely fix."""

    def __init__(self, address: StatsAddress | str, message: str) -> None:
        message = printable(message)  # it may quote what the peer sent
        super().__init__(f"{address}: {message}")
        self.address = str(address)
        self.reason = message


def _connect(addr: StatsAddress, deadline: float) -> socket.socket:
    remaining = max(deadline - time.monotonic(), 0.001)
    if addr.kind == "unix":
        return _connect_unix(addr.path, remaining)
    if addr.kind == "abstract":
        # uWSGI 2.0 binds `@name` with its terminating NUL inside the address (`ss -lx` shows
        # `@name@`); other programs do not. Try uWSGI's spelling first.
        name = b"\0" + addr.path.encode()
        try:
            return _connect_unix(name + b"\0", remaining)
        except ConnectionRefusedError:
            return _connect_unix(name, max(deadline - time.monotonic(), 0.001))
    return socket.create_connection((addr.host, addr.port), timeout=remaining)


def _connect_unix(target: str | bytes, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(target)
    except BaseException:
        sock.close()
        raise
    return sock


def _not_a_socket(addr: StatsAddress) -> str | None:
    """For a unix path that refused: is it a regular file or a directory (a wrong path)?"""
    if addr.kind != "unix":
        return None
    try:
        mode = os.stat(addr.path).st_mode
    except OSError:
        return None
    if stat.S_ISSOCK(mode):
        return None
    what = "a directory" if stat.S_ISDIR(mode) else "not a socket"
    return f"{addr.path} is {what}; give the path set by `stats =`"


def _explain(addr: StatsAddress, exc: OSError, timeout: float) -> StatsError:
    where = addr.path if addr.kind in ("unix", "abstract") else f"{addr.host}:{addr.port}"
    if isinstance(exc, FileNotFoundError):
        return StatsError(addr, f"no socket at {where}; is uWSGI running with `stats = {where}`?")
    if isinstance(exc, ConnectionRefusedError) or exc.errno == errno.ECONNREFUSED:
        wrong = _not_a_socket(addr)
        if wrong:
            return StatsError(addr, wrong)
        if addr.kind == "unix":
            return StatsError(
                addr,
                "connection refused; no uWSGI is listening there (a stopped instance leaves its "
                "socket file behind), or it is reloading",
            )
        return StatsError(
            addr, f"connection refused; nothing listens on {where}; is uWSGI running?"
        )
    if isinstance(exc, PermissionError):
        return StatsError(
            addr, "permission denied; run uwsgitune as the uWSGI user or in its group"
        )
    if isinstance(exc, socket.timeout | TimeoutError):
        return StatsError(addr, f"no answer within {timeout:g}s; is the master stopped or hung?")
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        if addr.kind == "http":
            return StatsError(
                addr,
                "connection reset after the HTTP request; if uWSGI runs without --stats-http, "
                f"use {addr.host}:{addr.port}; else it may be restarting",
            )
        return StatsError(addr, "connection reset by peer; the instance may be restarting")
    if exc.errno == errno.ENOTSOCK:
        return StatsError(addr, f"{where} is not a socket; give the path set by `stats =`")
    return StatsError(addr, f"{exc.strerror or exc}; check the address")


def _cap(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def _read_all(sock: socket.socket, addr: StatsAddress, deadline: float, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    first = True
    while True:
        remaining = deadline - time.monotonic()
        if first and addr.kind == "tcp":
            remaining = min(remaining, RAW_FIRST_BYTE)
        if remaining <= 0:
            raise TimeoutError("deadline")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(262144)
        except ConnectionResetError:
            # A peer that closes without reading our request resets the connection: keep
            # what arrived, so that the document (or its absence) explains itself.
            if chunks:
                return b"".join(chunks)
            raise
        except TimeoutError:
            if first and addr.kind == "tcp":
                raise StatsError(
                    addr,
                    "the peer sent nothing; if uWSGI runs with --stats-http, use "
                    f"http://{addr.host}:{addr.port}",
                ) from None
            raise
        if not chunk:
            return b"".join(chunks)
        first = False
        size += len(chunk)
        if size > max_bytes:
            raise StatsError(addr, f"document larger than {_cap(max_bytes)}; not uWSGI stats?")
        chunks.append(chunk)


def _strip_http(addr: StatsAddress, data: bytes) -> bytes:
    if data.lstrip().startswith(b"{"):
        raise StatsError(
            addr, f"the peer sent raw JSON, not HTTP; use {addr.host}:{addr.port} without http://"
        )
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        if not data:
            raise StatsError(addr, "the peer closed without answering; is this uWSGI stats?")
        raise StatsError(addr, "truncated HTTP answer; is this a uWSGI --stats-http server?")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or not status[0].startswith(b"HTTP/"):
        raise StatsError(addr, "not an HTTP answer; if this is a raw stats socket, drop http://")
    if status[1] != b"200":
        code = status[1].decode("latin-1", "replace")
        raise StatsError(addr, f"HTTP {code}; is this a uWSGI --stats-http server?")
    return body


def check_document(addr: StatsAddress, data: bytes) -> bytes:
    """Reject what is plainly not a stats document, with a message that says what it was."""
    stripped = data.lstrip()
    if not stripped:
        raise StatsError(addr, "the peer closed without sending anything; is this uWSGI stats?")
    if stripped.startswith(b"HTTP/"):
        raise StatsError(
            addr,
            "an HTTP server answered; for uWSGI --stats-http use "
            f"http://{addr.host or 'HOST'}:{addr.port or 'PORT'}",
        )
    if not stripped.startswith(b"{"):
        preview = stripped[:16].decode("ascii", "backslashreplace")
        raise StatsError(addr, f"not a uWSGI stats document (starts with {preview!r})")
    return data


@dataclass(frozen=True)
class StatsRead:
    data: bytes
    peer_uid: int | None = None  # who serves a unix stats socket (SO_PEERCRED); None over TCP


def _peer_uid(sock: socket.socket) -> int | None:
    if sock.family != socket.AF_UNIX:
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return int(struct.unpack("3i", creds)[1])


def read_stats(addr: StatsAddress, *, timeout: float = 2.0, max_bytes: int = MAX_DOCUMENT) -> bytes:
    """One connection, one document, closed. Raises `StatsError` with a one-line message."""
    return read_stats_from(addr, timeout=timeout, max_bytes=max_bytes).data


def read_stats_from(
    addr: StatsAddress, *, timeout: float = 2.0, max_bytes: int = MAX_DOCUMENT
) -> StatsRead:
    """`read_stats`, and who served the document (the uid behind a unix socket)."""
    deadline = time.monotonic() + timeout
    try:
        sock = _connect(addr, deadline)
    except OSError as exc:
        raise _explain(addr, exc, timeout) from None
    except UnicodeError:  # a host name IDNA cannot encode
        raise StatsError(addr, "invalid host name; check the address") from None
    try:
        peer = _peer_uid(sock)
        if addr.kind == "http":
            request = f"GET {addr.http_path} HTTP/1.0\r\nHost: {addr.host}\r\n\r\n"
            sock.sendall(request.encode())
        data = _read_all(sock, addr, deadline, max_bytes)
    except StatsError:
        raise
    except OSError as exc:
        raise _explain(addr, exc, timeout) from None
    finally:
        sock.close()
    if addr.kind == "http":
        data = _strip_http(addr, data)
    return StatsRead(check_document(addr, data), peer)
