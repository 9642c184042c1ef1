"""Listening sockets' queue and backlog from the kernel, through netlink sock_diag.

uWSGI reads `queue`/`max_queue` with TCP_INFO, so its stats say 0/0 for every unix socket,
even while clients get EAGAIN. The kernel knows better: `ss -lx` asks NETLINK_SOCK_DIAG for
AF_UNIX sockets in LISTEN with UDIAG_SHOW_RQLEN, where `rqueue` is the number of connections
waiting for accept() and `wqueue` the backlog.

For TCP, uWSGI's figures are right but old: its master samples them about once a second.
`ss -lt` asks inet_diag for TCP sockets in LISTEN, whose `idiag_rqueue` is the accept queue
now and `idiag_wqueue` the backlog. The same answer gives each listener's owner uid and
inode, which `/proc/<pid>/fd` names (`socket:[INODE]`): who holds a TCP stats port
(actuate/peer.py).

The same inet_diag dump for UDP, in every state, lists the UDP sockets with their local
address, port and inode: who sent a request log datagram, found by its source port
(sources/logsender.py). This is a minimal client for those dumps.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from uwsgitune.core.address import split_host_port

T = TypeVar("T")

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x01
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
TCP_LISTEN = 10
UDIAG_SHOW_NAME = 0x01
UDIAG_SHOW_RQLEN = 0x10
UNIX_DIAG_NAME = 0
UNIX_DIAG_RQLEN = 4

_NLMSGHDR = struct.Struct("=IHHII")
_UNIX_DIAG_REQ = struct.Struct("=BBHIIIII")
_UNIX_DIAG_MSG = struct.Struct("=BBBBIII")
_RTATTR = struct.Struct("=HH")
_INET_DIAG_REQ = struct.Struct("=BBBBI48s")  # family, protocol, ext, pad, states, sockid
_INET_DIAG_MSG_SIZE = 72  # family, state, timer, retrans, sockid (48), expires, rq, wq, uid, inode


def _align(n: int) -> int:
    return (n + 3) & ~3


def build_request(seq: int = 1) -> bytes:
    body = _UNIX_DIAG_REQ.pack(
        socket.AF_UNIX, 0, 0, 1 << TCP_LISTEN, 0, UDIAG_SHOW_NAME | UDIAG_SHOW_RQLEN, 0, 0
    )
    header = _NLMSGHDR.pack(
        _NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0
    )
    return header + body


def _parse_attrs(data: bytes) -> tuple[str | None, tuple[int, int] | None]:
    name: str | None = None
    rq: tuple[int, int] | None = None
    off = 0
    while off + _RTATTR.size <= len(data):
        length, kind = _RTATTR.unpack_from(data, off)
        if length < _RTATTR.size:
            break
        payload = data[off + _RTATTR.size : off + length]
        if kind == UNIX_DIAG_NAME:
            if payload.startswith(b"\0"):
                # uWSGI binds abstract names with their terminating NUL: `@name\0` is `@name`
                name = "@" + payload[1:].rstrip(b"\0").decode("utf-8", "replace")
            else:
                name = payload.rstrip(b"\0").decode("utf-8", "replace")
        elif kind == UNIX_DIAG_RQLEN and len(payload) >= 8:
            rq = struct.unpack_from("=II", payload)
        off += _align(length)
    return name, rq


def _walk(data: bytes) -> tuple[list[tuple[int, int]], bool]:
    """The SOCK_DIAG_BY_FAMILY messages in one recv(): [(payload start, payload end)], and
    whether the dump is done. An NLMSG_ERROR with a code raises OSError."""
    out: list[tuple[int, int]] = []
    off = 0
    while off + _NLMSGHDR.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
        if length < _NLMSGHDR.size or kind == NLMSG_DONE:
            return out, True
        if kind == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", data, off + _NLMSGHDR.size)
            if err:
                raise OSError(-err, os.strerror(-err))
            return out, True
        if kind == SOCK_DIAG_BY_FAMILY:
            out.append((off + _NLMSGHDR.size, off + length))
        off += _align(length)
    return out, False


def parse_messages(data: bytes) -> tuple[list[tuple[str, int, int]], bool]:
    """Parse one recv() worth of unix_diag messages. Returns (entries, done)."""
    messages, done = _walk(data)
    out: list[tuple[str, int, int]] = []
    for start, end in messages:
        name, rq = _parse_attrs(data[start + _UNIX_DIAG_MSG.size : end])
        if name and rq is not None:
            out.append((name, rq[0], rq[1]))
    return out, done


ALL_STATES = 0xFFFFFFFF  # an unconnected UDP socket is in TCP_CLOSE, a connected one ESTABLISHED


def build_inet_request(
    family: int, seq: int = 1, *, protocol: int = socket.IPPROTO_TCP, states: int = 1 << TCP_LISTEN
) -> bytes:
    body = _INET_DIAG_REQ.pack(family, protocol, 0, 0, states, bytes(48))
    header = _NLMSGHDR.pack(
        _NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0
    )
    return header + body


TcpEntry = tuple[str, int, int, int]  # (address, port, queue, backlog)


class TcpListener(NamedTuple):
    """A listening TCP socket, as inet_diag gives it."""

    address: str  # as inet_ntop writes it: "127.0.0.1", "::", "::ffff:127.0.0.1"
    port: int
    queue: int
    backlog: int
    uid: int  # the socket's owner
    inode: int  # what /proc/<pid>/fd of a holder names (`socket:[INODE]`)


class UdpSocket(NamedTuple):
    """A UDP socket, as inet_diag gives it."""

    address: str  # its local address, as inet_ntop writes it: "0.0.0.0" when bound to any
    port: int  # its local port: the source port of what it sends
    rx_queue: int  # bytes waiting to be read
    tx_queue: int
    uid: int  # the socket's owner
    inode: int  # what /proc/<pid>/fd of a holder names (`socket:[INODE]`)


def _inet_fields(data: bytes) -> tuple[list[tuple[str, int, int, int, int, int]], bool]:
    """One recv() worth of inet_diag messages: [(local address, local port, rqueue, wqueue,
    uid, inode)], and whether the dump is done."""
    messages, done = _walk(data)
    out: list[tuple[str, int, int, int, int, int]] = []
    for start, end in messages:
        if end - start < _INET_DIAG_MSG_SIZE:
            continue
        family = data[start]
        (port,) = struct.unpack_from("!H", data, start + 4)
        raw = data[start + 8 : start + 24]
        addr = (
            socket.inet_ntop(socket.AF_INET, raw[:4])
            if family == socket.AF_INET
            else socket.inet_ntop(socket.AF_INET6, raw)
        )
        rqueue, wqueue, uid, inode = struct.unpack_from("=IIII", data, start + 56)
        out.append((addr, port, rqueue, wqueue, uid, inode))
    return out, done


def parse_inet_listeners(data: bytes) -> tuple[list[TcpListener], bool]:
    """Parse one recv() worth of inet_diag messages. Returns (listeners, done)."""
    fields, done = _inet_fields(data)
    return [TcpListener(*f) for f in fields], done


def parse_udp_sockets(data: bytes) -> tuple[list[UdpSocket], bool]:
    """Parse one recv() worth of inet_diag messages for UDP. Returns (sockets, done)."""
    fields, done = _inet_fields(data)
    return [UdpSocket(*f) for f in fields], done


def parse_inet_messages(data: bytes) -> tuple[list[TcpEntry], bool]:
    """Parse one recv() worth of inet_diag messages. Returns (entries, done)."""
    listeners, done = parse_inet_listeners(data)
    return [(t.address, t.port, t.queue, t.backlog) for t in listeners], done


class Diag:
    """A NETLINK_SOCK_DIAG socket, kept between dumps (a sampler polls with one; not
    thread-safe). A dump that fails closes it, so the next one opens a new socket with no
    half-read answer left in it."""

    def __init__(self, timeout: float = 1.0) -> None:
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __del__(self) -> None:  # a dropped sampler's socket closes without a warning
        with contextlib.suppress(Exception):
            self.close()

    def dump(self, request: bytes, parse: Callable[[bytes], tuple[list[T], bool]]) -> list[T]:
        out: list[T] = []
        sock = self._sock
        if sock is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
            sock.settimeout(self.timeout)
            self._sock = sock
        try:
            sock.sendto(request, (0, 0))
            done = False
            while not done:
                data = sock.recv(65536)
                if not data:
                    break
                entries, done = parse(data)
                out += entries
        except BaseException:
            self.close()
            raise
        return out

    def tcp(self, families: tuple[int, ...] = (socket.AF_INET, socket.AF_INET6)) -> list[TcpEntry]:
        """Every listening TCP socket of `families` on the host (this netns)."""
        out: list[TcpEntry] = []
        for family in families:
            out += self.dump(build_inet_request(family), parse_inet_messages)
        return out

    def tcp_listeners(
        self, families: tuple[int, ...] = (socket.AF_INET, socket.AF_INET6)
    ) -> list[TcpListener]:
        """Every listening TCP socket of `families` on the host (this netns), with its owner
        and inode."""
        out: list[TcpListener] = []
        for family in families:
            out += self.dump(build_inet_request(family), parse_inet_listeners)
        return out

    def udp_sockets(self, families: tuple[int, ...] = (socket.AF_INET,)) -> list[UdpSocket]:
        """Every UDP socket of `families` on the host (this netns), in any state, with its
        owner and inode."""
        out: list[UdpSocket] = []
        for family in families:
            request = build_inet_request(family, protocol=socket.IPPROTO_UDP, states=ALL_STATES)
            out += self.dump(request, parse_udp_sockets)
        return out

    def unix(self) -> dict[str, tuple[int, int]]:
        """Every listening unix socket on the host (this netns): {name: (queue, backlog)}."""
        return {name: (q, b) for name, q, b in self.dump(build_request(), parse_messages)}


WILDCARDS = ("", "*", "0.0.0.0", "::")


def match_tcp(name: str, table: list[TcpEntry]) -> tuple[int, int] | None:
    """(queue, backlog) of the listener uWSGI calls `name` ("127.0.0.1:9000", ":9000",
    "[::1]:9000", "localhost:9000"). None when no listener, or more than one, could be it."""
    host, port_s, problem = split_host_port(name)
    if problem or not port_s.isdigit():
        return None
    port = int(port_s)
    same = [e for e in table if e[1] == port]
    wild = host in WILDCARDS
    exact = [e for e in same if (e[0] in ("0.0.0.0", "::") if wild else e[0] == host)]
    found = exact or (same if len(same) == 1 else [])
    return (found[0][2], found[0][3]) if len(found) == 1 else None


def v4_found(names: list[str], table: list[TcpEntry]) -> bool:
    """Whether each name is an IPv4 address (not a wildcard) with a listener of its own in
    `table`: then no IPv6 listener can change what `match_tcp` finds for it (none has that
    address), and the IPv6 dump can be skipped."""
    for name in names:
        host, port, problem = split_host_port(name)
        if problem or not port.isdigit() or host in WILDCARDS:
            return False
        try:
            socket.inet_pton(socket.AF_INET, host)
        except OSError:
            return False
        if not any(e[0] == host and e[1] == int(port) for e in table):
            return False
    return True
