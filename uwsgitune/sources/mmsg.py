"""Many UDP datagrams in one system call: Linux's `recvmmsg(2)`, through ctypes.

Python's `socket` reads one datagram a call (`recvfrom`), and builds its source address as a
`(str, int)` tuple each time: at 10k datagrams/s that is most of what the request log
receiver (sources/reqlog.py) costs (bench/results/latency_cost.md: ~1.6 µs a datagram).
`recvmmsg` fills up to `vlen` datagrams in one call, each with its own source address, so
a datagram costs the kernel's copy and a few C-level steps in Python.

How, and why so:
- **Memory made once.** One `mmsghdr` a slot, each with two `iovec`s (its first `HEAD`
  bytes, 1 KiB, in one dense buffer; the rest of its `slot` bytes in another) and its own
  16-byte `sockaddr_in` for the source, all allocated once per reader: at 64 slots of
  16 KiB about 1 MiB, of which only the 64 KiB of heads are touched (the rests are
  anonymous memory, mapped only where a datagram longer than its head lands).
- **Cut with C-level passes.** A batch whose datagrams all fit in their heads (the common
  case: a request log line is ~100-500 bytes) is copied out once, as the heads of the
  slots used, and cut into lines by slices of that copy (`short`). Lines read from
  scattered 16 KiB slots cost twice as much (measured): cache misses.
- **Read without ctypes attributes.** The headers and the addresses live in `bytearray`s
  that ctypes structures are laid over (`from_buffer`), so the lengths the kernel wrote
  (`msg_len`) are read as one strided slice of the headers seen as 32-bit words, and the
  sources as one strided slice of the addresses seen as 64-bit words: the first 8 bytes of
  a `sockaddr_in` (family, port, IPv4 address) as one int, `key`, equal for two datagrams
  exactly when their sources are equal. A key becomes the `(host, port)` pair that
  `socket.recvfrom` would give by `source_of` (the receiver does so once per source).
- **Never blocks**: `MSG_DONTWAIT` on every call.
- **The same datagrams as recvfrom.** Each datagram lands in its own slot; one longer than
  the slot is cut to it (the caller sizes the slot one byte over the longest it keeps, as
  with recvfrom, and counts a full slot as oversized).
- **IPv4 only**: the source key and `source_of` read a `sockaddr_in` (the receiver binds
  127.0.0.0/8 alone: uWSGI's socket logger sends over IPv4).
- **Where it is missing** (not Linux, no `recvmmsg` in the C library), `RecvMmsg.open`
  answers None and the caller reads with `recvfrom`.

The GIL is released during the call (ctypes does so for every foreign call).

Public API:
    RecvMmsg.open(fd, vlen, slot) -> RecvMmsg | None
        .recv(vlen) -> int                  datagrams read (0: none queued or an error)
        .lengths(n) -> list[int]            each datagram's length (`slot` when cut)
        .keys(n) -> list[int]               each datagram's source, as a key
        .short(n, lengths) -> (datagrams less their last byte, last bytes) | None
        .datagram(i, length) -> bytes       one datagram whole
        .recv_lines(ask) -> Batch | None    one recv, checked and cut into lines by source
    source_of(key) -> (host, port)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import socket
import sys
from collections.abc import Callable
from operator import add

_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0x40)
_SOCKADDR_IN = 16  # bytes of a struct sockaddr_in


class _IOVec(ctypes.Structure):
    _fields_ = (("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t))


class _MsgHdr(ctypes.Structure):
    _fields_ = (
        ("msg_name", ctypes.c_void_p),
        ("msg_namelen", ctypes.c_uint32),  # socklen_t
        ("msg_iov", ctypes.c_void_p),
        ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p),
        ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    )


class _MMsgHdr(ctypes.Structure):
    _fields_ = (("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint))


def _libc_recvmmsg() -> Callable[[int, int, int, int, None], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.recvmmsg
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p)
    fn.restype = ctypes.c_int
    call: Callable[[int, int, int, int, None], int] = fn
    return call


_recvmmsg = _libc_recvmmsg()


HEAD = 1024  # bytes of each slot in the dense buffer (a request log line is ~100-500)


class RecvMmsg:
    """`vlen` slots of `slot` bytes for one socket's datagrams (see the module docstring).
    Not thread-safe: one reader."""

    def __init__(self, fd: int, vlen: int, slot: int) -> None:
        assert _recvmmsg is not None
        self._fd = fd
        self.vlen = vlen
        self.slot = slot
        self.head = head = min(HEAD, slot)
        rest = slot - head
        hdr_size = ctypes.sizeof(_MMsgHdr)
        self._hdr_mem = bytearray(hdr_size * vlen)
        self._name_mem = bytearray(_SOCKADDR_IN * vlen)
        self._head_mem = bytearray(head * vlen)
        # anonymous memory: its pages are mapped only when a long datagram writes them
        self._rest_mem = mmap.mmap(-1, max(1, rest * vlen))
        hdrs = (_MMsgHdr * vlen).from_buffer(self._hdr_mem)
        iovs = (_IOVec * (2 * vlen))()
        pinned = [ctypes.c_char.from_buffer(m) for m in (self._head_mem, self._rest_mem)]
        names_at = ctypes.c_char.from_buffer(self._name_mem)
        heads, rests = (ctypes.addressof(p) for p in pinned)
        names = ctypes.addressof(names_at)
        for i in range(vlen):
            iovs[2 * i].iov_base = heads + i * head
            iovs[2 * i].iov_len = head
            iovs[2 * i + 1].iov_base = rests + i * rest
            iovs[2 * i + 1].iov_len = rest
            h = hdrs[i].msg_hdr
            h.msg_name = names + i * _SOCKADDR_IN
            h.msg_namelen = _SOCKADDR_IN
            h.msg_iov = ctypes.addressof(iovs[2 * i])
            h.msg_iovlen = 2 if rest else 1
        self._keep = (hdrs, iovs, pinned, names_at)  # the buffers stay exported: never moved
        self._hdrs = ctypes.addressof(hdrs)
        words = memoryview(self._hdr_mem).cast("I")
        self._lens = words[_MMsgHdr.msg_len.offset // 4 :: hdr_size // 4]
        self._keys = memoryview(self._name_mem).cast("Q")[::2]
        self._starts = range(0, head * vlen, head)
        self._lasts = range(-1, head * vlen - 1, head)  # + a length: its last byte

    @classmethod
    def open(cls, fd: int, vlen: int, slot: int) -> RecvMmsg | None:
        """The reader, or None where recvmmsg cannot serve (see the module docstring)."""
        if _recvmmsg is None or vlen < 1 or ctypes.sizeof(ctypes.c_uint64) != 8:
            return None
        if ctypes.sizeof(_MMsgHdr) % 4:
            return None
        return cls(fd, vlen, slot)

    def recv(self, vlen: int) -> int:
        """Read up to `vlen` (<= the slots) queued datagrams; how many were read. Never
        blocks; 0 when none is queued or the call fails (as recvfrom's caller stops)."""
        assert _recvmmsg is not None
        # (each slot's msg_namelen stays 16: the kernel writes back the length of an IPv4
        # source, the size it was given)
        got = _recvmmsg(self._fd, self._hdrs, min(vlen, self.vlen), _MSG_DONTWAIT, None)
        return max(0, got)  # -1: EAGAIN (nothing queued), or an error recvfrom stops at too

    def lengths(self, n: int) -> list[int]:
        """The first `n` datagrams' lengths (`slot` for one cut to it)."""
        return self._lens[:n].tolist()

    def keys(self, n: int) -> list[int]:
        """The first `n` datagrams' sources, as keys (`source_of` turns one into its pair)."""
        return self._keys[:n].tolist()

    def short(self, n: int, lengths: list[int]) -> tuple[list[bytes], list[int]] | None:
        """When every one of the first `n` datagrams lies whole in its slot's head (the
        common case): each as bytes without its last byte, and each one's last byte; else
        None. One copy of the heads, then C-level slices of it."""
        if max(lengths) > self.head:
            return None
        heads = bytes(memoryview(self._head_mem)[: n * self.head])
        starts = self._starts[:n]
        ends = list(map(add, self._lasts[:n], lengths))
        return (
            list(map(heads.__getitem__, map(slice, starts, ends))),
            list(map(heads.__getitem__, ends)),
        )

    def datagram(self, i: int, length: int) -> bytes:
        """Datagram `i` whole (its head, then the rest of its slot)."""
        head = self.head
        if length <= head:
            return bytes(self._head_mem[i * head : i * head + length])
        rest = self.slot - head
        return bytes(self._head_mem[i * head : (i + 1) * head]) + bytes(
            self._rest_mem[i * rest : i * rest + length - head]
        )

    def recv_lines(self, ask: int) -> Batch | None:
        """One `recv` of up to `ask` datagrams, checked and cut into lines as
        sources/_recvlines.c `recv` does (its comment says how): None when none was read.
        A batch whose datagrams are all good lines in their heads (the common case) is cut
        by C-level passes (`short`); a Python loop runs per datagram otherwise."""
        n = self.recv(ask)
        if not n:
            return None
        max_size = self.slot - 1
        sizes = self.lengths(n)
        keys = self.keys(n)
        short = self.short(n, sizes) if min(sizes) else None
        if short is not None and short[1].count(10) == n and max(sizes) <= max_size:
            data = short[0]  # each without its newline
            groups = [(keys[0], data)] if keys.count(keys[0]) == n else _runs(keys, data)
            return n, groups, n, 0, 0, 0, sum(sizes) - n
        received = oversized = empty = cut = kept = 0
        good_keys: list[int] = []
        good: list[bytes] = []
        for i, (size, key) in enumerate(zip(sizes, keys, strict=True)):
            if size > max_size:
                oversized += 1
                continue
            if not size:
                empty += 1
                continue
            datum = self.datagram(i, size)
            if datum[-1] == 10:  # b"\n"
                datum = datum[:-1]
                size -= 1
            else:
                cut += 1
            received += 1
            kept += size
            good_keys.append(key)
            good.append(datum)
        return n, _runs(good_keys, good), received, oversized, empty, cut, kept


# One batch read: (datagrams read, [(source key, lines), ...] a pair per run of one source in
# arrival order, received, oversized, empty, cut, bytes kept).
Batch = tuple[int, list[tuple[int, list[bytes]]], int, int, int, int, int]


def _runs(keys: list[int], data: list[bytes]) -> list[tuple[int, list[bytes]]]:
    """The lines in runs of one source each, in order."""
    out: list[tuple[int, list[bytes]]] = []
    last: int | None = None
    got: list[bytes] = []
    for key, datum in zip(keys, data, strict=True):
        if key != last:
            last, got = key, []
            out.append((key, got))
        got.append(datum)
    return out


def source_of(key: int) -> tuple[str, int]:
    """The (host, port) of a source key (a sockaddr_in's first 8 bytes as a native int)."""
    raw = key.to_bytes(8, sys.byteorder)
    return (socket.inet_ntoa(raw[4:8]), int.from_bytes(raw[2:4], "big"))
