"""The request log receiver: uWSGI's request log lines, one UDP datagram each, on loopback.

uWSGI 2.0 sends its request log to uwsgitune with `req-logger = socket:127.0.0.1:9118` (the
built-in `logsocket` plugin; docs/latency.md). The master sends each line as one datagram,
with a blocking `sendmsg` on an unconnected IPv4 UDP socket that it creates at the first
line. This module is the other end: a bound, non-blocking UDP socket that hands the lines to
whoever drains it. It does not parse them (that is the pure parser's work) and decides
nothing.

Rules, and why:
- **UDP on loopback only.** A stalled or absent UDP reader never blocks the sender: the
  kernel drops what does not fit in the receive buffer. A unix datagram socket would block
  uWSGI's master (its `sendmsg` is blocking) whenever uwsgitune stops reading, so a unix
  address is refused. The lines carry URIs: they stay on the host, so a non-loopback address
  is refused too. uWSGI 2.0's `logsocket` opens an AF_INET socket for any address with a
  colon, so `[::1]:PORT` never receives a line (measured on 2.0.31): refused, naming
  127.0.0.1. Each refusal is one line that names the fix (`ReqlogAddressError`).
- **Never blocks.** The socket is non-blocking; `drain` reads what is queued now and returns.
  A caller that wants to wait selects on `fileno()`.
- **Bounded memory and work.** `drain(max_datagrams, max_bytes)` reads at most that many
  datagrams, and stops once the lines kept reach `max_bytes`; what is left waits in the
  kernel's queue for the next call (`Drained.more`), and the kernel drops what overflows its
  receive buffer. Those drops are the socket's own count (`sk_drops`), read once per drain
  with `getsockopt(SO_MEMINFO)` (Linux 4.6 and later; `Drained.kernel_drops`, the increase
  since the last drain; None where the kernel does not say). (SO_RXQ_OVFL attaches the same
  count to every datagram, but only `recvmsg` reads it, which costs more per datagram than
  `recvfrom`.) A datagram longer than `max_size` is read, counted
  as oversized and discarded (it is read into `max_size + 1` bytes: one that fills them did
  not fit). Reading to discard costs what reading to keep costs, so datagrams over the bound
  are left queued rather than read and thrown away: a caller that catches up loses none, and
  a flood costs each call at most `max_datagrams` reads and `max_bytes` (+ one datagram) of
  lines.
- **The receive buffer.** `SO_RCVBUF` asks for `rcvbuf` bytes (4 MiB by default); the kernel
  caps the request at `net.core.rmem_max` and doubles it for its bookkeeping. Each queued
  datagram costs its `truesize` (832 bytes for a 100-byte line, measured), so 8 MiB holds
  about 10,000 lines and the common default (2 x 208 KiB) about 500: at 10k requests/s a
  caller drains every 100 ms or so (or on readiness). The buffer granted is
  `Receiver.rcvbuf` (getsockopt), for a doctor to name the sysctl when it is small.
- **Lines as uWSGI sent them.** Each datagram is one line ending in a newline, which is
  removed. uWSGI cuts a line longer than `log-master-bufsize` (8192 bytes by default) to that
  length, without the newline: such a line is returned as it is and counted as `cut`. An
  empty datagram is counted and dropped. Nothing is decoded here: bytes in, bytes out.
- **Cost.** Reading is the receiver's cost per line, so it is read in batches: Linux's
  `recvmmsg` fills up to `batch` (64) datagrams a system call, each with its source. Where
  the C extension is built (sources/_recvlines.c, with the package wherever a C compiler
  is), one C call makes the system call, checks each datagram (empty, oversized, its
  newline), makes its line and groups the lines by source: no Python runs per datagram.
  Without it (or `fast=False`), sources/mmsg.py does the same through ctypes, with C-level
  passes over the batch, and a Python loop per datagram only for a batch that holds a bad
  datagram or more than one source. Where recvmmsg is missing (not Linux), or with
  `batch=0`, one `recvfrom` a datagram (~1.6 µs, most of it the system call and the source
  tuple; bench/results/latency_cost.md), the same checks and the same grouping. Both read
  the same datagrams into the same `Drained` (tests/sources/test_reqlog.py runs every test
  on each of the three).
- **Who sent it.** Lines are grouped by their source (address, port), each datagram by its
  own (recvmmsg writes each one's source beside it; a batch is taken as one source's only
  when every datagram's source is that one, compared as raw bytes). uWSGI's master sends
  from one socket whose port changes only when the master re-executes (a reload);
  sources/logsender.py proves a source is the master's. Nothing here trusts a source.

Public API:
    parse_reqlog_address(text) -> (host, port)            # raises ReqlogAddressError
    Receiver(address, *, max_size=MAX_DATAGRAM, rcvbuf=DEFAULT_RCVBUF, batch=RECV_BATCH,
             fast=True)            # fast: the C reader where built
        .address -> (host, port)    the bound address (port 0 asks the kernel for one)
        .rcvbuf -> int              the receive buffer the kernel granted
        .batched -> bool            reading with recvmmsg (else recvfrom)
        .drain(max_datagrams=..., max_bytes=...) -> Drained
        .totals -> Totals           the counters since the receiver opened
        .fileno() / .close() / context manager
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from uwsgitune.core.address import split_host_port
from uwsgitune.core.logline import DEFAULT_USER_FORMAT, TAIL_FORMAT
from uwsgitune.errors import UwsgituneError
from uwsgitune.sources.mmsg import Batch, RecvMmsg, source_of

try:  # the same batches read in C (sources/_recvlines.c), where it is built (Linux)
    from uwsgitune.sources import _recvlines

    _c_recv = getattr(_recvlines, "recv", None)
except ImportError:
    _c_recv = None

DEFAULT_PORT = 9118  # beside the exporter's 9117
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"
MAX_DATAGRAM = 16384  # twice uWSGI's default log-master-bufsize (8192): longer is not a line
DEFAULT_RCVBUF = 4 * 1024 * 1024
DEFAULT_MAX_DATAGRAMS = 20_000  # per drain: 2 s of 10k requests/s
# per drain: 20k lines of 400 bytes; a flood of big datagrams stops here
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
# datagrams per recvmmsg call (sources/mmsg.py): 64 slots of MAX_DATAGRAM + 1 bytes, ~1 MiB
RECV_BATCH = 64

# The ini lines (docs/latency.md) have one definition, the parser's (core/logline.py): the
# tail uwsgitune reads after the last ` uwt1 `, and uWSGI's default line spelled as a
# log-format, which comes first when the user set none.
LOG_TAIL = TAIL_FORMAT
DEFAULT_LINE_FORMAT = DEFAULT_USER_FORMAT
# What `memory-report = true` puts before the default line.
MEMORY_REPORT_FORMAT = (
    "{address space usage: %(vsz) bytes/%(vszM)MB} {rss usage: %(rss) bytes/%(rssM)MB} "
)

# Linux: the socket's memory counters (`SK_MEMINFO_*`, u32 each); the ninth (Linux 4.6 and
# later) counts the datagrams the kernel dropped on this socket.
SO_MEMINFO = getattr(socket, "SO_MEMINFO", 55)
_MEMINFO = struct.Struct("=9I")

Source = tuple[str, int]


class ReqlogAddressError(UwsgituneError):
    """A request log address uwsgitune will not listen on; the message names the fix."""


def parse_reqlog_address(text: str) -> tuple[str, int]:
    """`127.0.0.1:9118` (any 127.0.0.0/8 address, or `localhost`) -> (host, port). Port 0
    asks the kernel for a free port (tests). Anything else raises ReqlogAddressError, one
    line that names the fix."""
    text = text.strip()
    fix = f"use UDP on loopback, e.g. {DEFAULT_ADDRESS} (req-logger = socket:{DEFAULT_ADDRESS})"
    host, port_text, problem = split_host_port(text.removeprefix("socket:"))
    if problem == "no-colon":
        raise ReqlogAddressError(
            f"latency address {text!r} is a unix socket: a stalled reader would block uWSGI's "
            f"master; {fix}"
        )
    if problem == "unclosed":
        raise ReqlogAddressError(f"latency address {text!r}: unclosed '['; {fix}")
    if not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise ReqlogAddressError(
            f"latency address {text!r}: the port must be a number from 0 to 65535; {fix}"
        )
    host = "127.0.0.1" if host == "localhost" else host
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ReqlogAddressError(
            f"latency address {text!r}: the host must be a loopback IP; {fix}"
        ) from None
    if ip.version == 6:
        raise ReqlogAddressError(
            f"latency address {text!r}: uWSGI 2.0's socket logger sends over IPv4 only; {fix}"
        )
    if not ip.is_loopback:
        raise ReqlogAddressError(
            f"latency address {text!r} is not loopback: request lines carry URIs and must "
            f"stay on this host; {fix}"
        )
    return host, int(port_text)


@dataclass(frozen=True)
class Drained:
    """What one `drain` read. `lines[source]`: the lines from that (address, port), in the
    order they arrived, each without its newline."""

    lines: dict[Source, list[bytes]] = field(default_factory=dict)
    received: int = 0  # datagrams read and kept
    oversized: int = 0  # read and discarded: longer than max_size
    empty: int = 0  # read and discarded: no bytes
    cut: int = 0  # kept, but without the newline: cut by uWSGI's log-master-bufsize
    kernel_drops: int | None = (
        0  # dropped by the kernel (queue full) since the last read; None: unknown
    )
    more: bool = False  # stopped at max_datagrams with datagrams still queued

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.lines.values())


@dataclass
class Totals:
    """The receiver's counters since it opened (the same meanings as `Drained`'s)."""

    received: int = 0
    oversized: int = 0
    empty: int = 0
    cut: int = 0
    kernel_drops: int = 0
    drains_at_bound: int = 0  # drains that stopped at max_datagrams


# What one drain read: the lines by source, received, oversized, empty, cut, more.
_Read = tuple[dict[Source, list[bytes]], int, int, int, int, bool]
# One recvmmsg call, its datagrams checked and cut into lines (sources/_recvlines.c `recv`,
# or sources/mmsg.py `RecvMmsg.recv_lines`): (read, [(source key, lines), ...], received,
# oversized, empty, cut, bytes kept), or None when nothing was queued.
_Recv = Callable[[int], Batch | None]


class Receiver:
    """A bound, non-blocking UDP socket for uWSGI's request log. Not thread-safe: one reader
    drains it (a poll loop, or a thread that selects on `fileno()`)."""

    def __init__(
        self,
        address: str | tuple[str, int] = DEFAULT_ADDRESS,
        *,
        max_size: int = MAX_DATAGRAM,
        rcvbuf: int = DEFAULT_RCVBUF,
        batch: int = RECV_BATCH,
        fast: bool = True,
    ) -> None:
        host, port = parse_reqlog_address(address) if isinstance(address, str) else address
        if isinstance(address, tuple):  # the same refusals for a ready-made pair
            parse_reqlog_address(f"{host}:{port}")
        self.max_size = max_size
        self.totals = Totals()
        self._last_drops = 0
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            try:
                sock.bind((host, port))
            except OSError as exc:
                hint = (
                    "another process listens there: stop it or choose another port"
                    if exc.errno == errno.EADDRINUSE
                    else "choose another loopback address"
                )
                raise ReqlogAddressError(
                    f"latency address {host}:{port}: cannot listen ({exc.strerror}); {hint}"
                ) from None
        except BaseException:
            sock.close()
            raise
        self._sock: socket.socket | None = sock
        bound = sock.getsockname()
        self.address: tuple[str, int] = (str(bound[0]), int(bound[1]))
        self.rcvbuf = int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        self._meminfo = sys.platform.startswith("linux") and self._sk_drops() is not None
        # a longer datagram arrives cut to max_size + 1 bytes: oversized
        self._sources: dict[int, tuple[str, int]] = {}
        self._mmsg: RecvMmsg | None = None
        self._recv: _Recv | None = None  # a batch read (recvmmsg), else recvfrom's loop
        self._batch = 0  # the most datagrams a batch read asks for
        if batch > 0 and fast and _c_recv is not None:
            c_recv, fd, slot = _c_recv, sock.fileno(), max_size + 1
            self._recv = lambda ask: c_recv(fd, ask, slot)
            self._batch = min(batch, RECV_BATCH)  # the C reader's slots
        elif batch > 0:
            self._mmsg = RecvMmsg.open(sock.fileno(), batch, max_size + 1)
            if self._mmsg is not None:
                self._recv = self._mmsg.recv_lines
                self._batch = self._mmsg.vlen

    @property
    def batched(self) -> bool:
        """Whether datagrams are read in batches (recvmmsg), not one a call (recvfrom)."""
        return self._recv is not None

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    def drain(
        self, max_datagrams: int = DEFAULT_MAX_DATAGRAMS, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> Drained:
        """The datagrams queued now: at most `max_datagrams`, and no more once the lines kept
        reach `max_bytes`. Never blocks, never raises for what a sender sent; a closed
        receiver drains nothing."""
        sock = self._sock
        if sock is None:
            return Drained()
        if self._recv is not None:
            got = self._read_batches(sock, self._recv, max_datagrams, max_bytes)
        else:
            got = self._read_each(sock, max_datagrams, max_bytes)
        lines, received, oversized, empty, cut, more = got
        drops = self._drops()
        t = self.totals
        t.received += received
        t.oversized += oversized
        t.empty += empty
        t.cut += cut
        t.kernel_drops += drops or 0
        t.drains_at_bound += more
        return Drained(lines, received, oversized, empty, cut, drops, more)

    def _read_each(self, sock: socket.socket, max_datagrams: int, max_bytes: int) -> _Read:
        """One `recvfrom` a datagram (where recvmmsg is missing, or `batch=0`)."""
        lines: dict[Source, list[bytes]] = {}
        received = oversized = empty = cut = kept = 0
        more = False
        max_size = self.max_size
        bufsize = max_size + 1  # a longer datagram arrives cut to this: oversized
        recvfrom = sock.recvfrom  # the loop is the cost per line: no lookups in it
        last: Source | None = None  # the last datagram's source, and its list
        got: list[bytes] = []
        for _ in range(max_datagrams):
            try:
                data, src = recvfrom(bufsize)
            except OSError:  # BlockingIOError: nothing more queued; nothing else a sender causes
                break
            n = len(data)
            if n > max_size:
                oversized += 1
                continue
            if not n:
                empty += 1
                continue
            if data[-1] == 10:  # b"\n"
                data = data[:-1]
                n -= 1
            else:
                cut += 1
            received += 1
            kept += n
            if src != last:  # (address, port): a tuple already
                last = src
                got = lines.setdefault(src, [])
            got.append(data)
            if kept >= max_bytes:
                more = self._pending(sock)
                break
        else:
            more = self._pending(sock)
        return lines, received, oversized, empty, cut, more

    def _read_batches(
        self, sock: socket.socket, recv: _Recv, max_datagrams: int, max_bytes: int
    ) -> _Read:
        """`recvmmsg` calls of up to `batch` datagrams, each batch checked and cut into lines
        by `recv` (in C, or sources/mmsg.py's C-level passes): the lines grouped by source.
        A call asks for no more datagrams than could keep `max_bytes` (at `max_size` each),
        so a drain stops within one datagram of it, as the recvfrom loop does."""
        lines: dict[Source, list[bytes]] = {}
        received = oversized = empty = cut = kept = read = 0
        max_size, batch = self.max_size, self._batch
        while read < max_datagrams:
            ask = min(batch, max_datagrams - read, max(1, -(-(max_bytes - kept) // max_size)))
            got = recv(ask)
            if got is None:
                break
            n, groups, r, o, e, c, k = got
            read += n
            received += r
            oversized += o
            empty += e
            cut += c
            kept += k
            for key, data in groups:
                src = self._sources.get(key) or self._source(key)
                have = lines.get(src)
                if have is None:
                    lines[src] = data
                else:
                    have += data
            if kept >= max_bytes:
                return lines, received, oversized, empty, cut, self._pending(sock)
            if n < ask:  # the queue is empty now
                break
        else:
            return lines, received, oversized, empty, cut, self._pending(sock)
        return lines, received, oversized, empty, cut, False

    def _source(self, key: int) -> tuple[str, int]:
        got = source_of(key)
        if len(self._sources) < 256:
            self._sources[key] = got
        return got

    @staticmethod
    def _pending(sock: socket.socket) -> bool:
        try:
            sock.recv(1, socket.MSG_PEEK)
        except OSError:
            return False
        return True

    def _drops(self) -> int | None:
        """The kernel's drops on this socket since the last drain (SO_MEMINFO's count,
        read once a drain); None where the kernel does not say."""
        if not self._meminfo:
            return None
        now = self._sk_drops()
        if now is None:
            return None
        drops, self._last_drops = (now - self._last_drops) & 0xFFFFFFFF, now
        return drops

    def _sk_drops(self) -> int | None:
        sock = self._sock
        if sock is None:
            return None
        try:
            info = sock.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, _MEMINFO.size)
        except OSError:
            return None
        if len(info) < _MEMINFO.size:  # before Linux 4.6: no drop count
            return None
        return int(_MEMINFO.unpack_from(info)[8])

    def close(self) -> None:
        self._mmsg = self._recv = None
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
