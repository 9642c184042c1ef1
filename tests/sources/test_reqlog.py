"""The request log receiver on its own: addresses refused in one line, datagrams drained
without blocking, bad input counted, memory and work bounded (a local sender, no uWSGI:
tests/sources/test_reqlog_real.py has uWSGI's side)."""

from __future__ import annotations

import select
import socket
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from uwsgitune.errors import UwsgituneError
from uwsgitune.sources.reqlog import (
    DEFAULT_PORT,
    RECV_BATCH,
    Receiver,
    ReqlogAddressError,
    parse_reqlog_address,
)

try:
    from uwsgitune.sources import _recvlines
except ImportError:  # not built: tests/core/test_fastlog.py says whether it should be
    _recvlines = None  # type: ignore[assignment]

_NO_C = pytest.mark.skipif(_recvlines is None, reason="sources/_recvlines.c not built")


# Every receiver test runs on each way of reading: recvmmsg's batches in C
# (sources/_recvlines.c) and through ctypes (sources/mmsg.py), both Linux's, and one
# recvfrom a datagram (elsewhere): they must read the same datagrams into the same lines.
@pytest.fixture(
    params=[
        pytest.param((RECV_BATCH, True), id="recvmmsg-c", marks=_NO_C),
        pytest.param((3, True), id="recvmmsg-c-3", marks=_NO_C),
        pytest.param((RECV_BATCH, False), id="recvmmsg"),
        pytest.param((3, False), id="recvmmsg-3"),
        pytest.param((0, False), id="recvfrom"),
    ]
)
def reading(request: pytest.FixtureRequest) -> tuple[int, bool]:
    batch, fast = request.param
    return int(batch), bool(fast)


@pytest.fixture
def batch(reading: tuple[int, bool]) -> int:
    return reading[0]


@pytest.fixture
def rx(reading: tuple[int, bool]) -> Iterator[Receiver]:
    batch, fast = reading
    with Receiver("127.0.0.1:0", batch=batch, fast=fast) as receiver:
        assert receiver.batched == (batch > 0)  # Linux: recvmmsg is there
        assert (receiver._mmsg is None) == (fast or batch == 0)  # fast: the C reader
        yield receiver


@pytest.fixture
def tx() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        yield sender


def settle(rx: Receiver) -> None:
    """Wait until the datagrams just sent are queued: loopback delivers them in order, in
    the sender's call or its softirq, but a test must not race it."""
    select.select([rx.fileno()], [], [], 2.0)
    time.sleep(0.1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9118", ("127.0.0.1", 9118)),
        ("localhost:9118", ("127.0.0.1", 9118)),
        ("127.0.0.2:0", ("127.0.0.2", 0)),
        ("socket:127.0.0.1:9118", ("127.0.0.1", 9118)),  # the req-logger value, pasted
    ],
)
def test_loopback_ipv4_addresses_are_taken(text: str, expected: tuple[str, int]) -> None:
    assert parse_reqlog_address(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("/run/uwsgitune.sock", "is a unix socket: a stalled reader would block uWSGI's master"),
        ("@abstract", "is a unix socket"),
        ("10.0.0.1:9118", "is not loopback"),
        ("0.0.0.0:9118", "is not loopback"),
        ("[::1]:9118", "sends over IPv4 only"),
        ("example.com:9118", "the host must be a loopback IP"),
        ("127.0.0.1:http", "the port must be a number"),
        ("127.0.0.1:70000", "the port must be a number"),
        ("[::1:9118", "unclosed"),
    ],
)
def test_other_addresses_are_refused_in_one_line_naming_the_fix(text: str, why: str) -> None:
    with pytest.raises(ReqlogAddressError) as err:
        parse_reqlog_address(text)
    message = str(err.value)
    assert why in message and "\n" not in message and isinstance(err.value, UwsgituneError)
    assert message.endswith(
        f"use UDP on loopback, e.g. 127.0.0.1:{DEFAULT_PORT} "
        f"(req-logger = socket:127.0.0.1:{DEFAULT_PORT})"
    )


def test_a_pair_is_refused_like_text() -> None:
    with pytest.raises(ReqlogAddressError, match="is not loopback"):
        Receiver(("192.0.2.1", 0))


def test_a_port_in_use_is_one_line(rx: Receiver) -> None:
    with pytest.raises(ReqlogAddressError, match=r"cannot listen .* another process listens"):
        Receiver(rx.address)


def test_lines_are_grouped_by_source_in_order_without_their_newline(
    rx: Receiver, tx: socket.socket
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        tx.sendto(b"a 1\n", rx.address)
        other.sendto(b"b 1\n", rx.address)
        tx.sendto(b"a 2\n", rx.address)
        settle(rx)
        got = rx.drain()
        assert got.lines == {
            ("127.0.0.1", tx.getsockname()[1]): [b"a 1", b"a 2"],
            ("127.0.0.1", other.getsockname()[1]): [b"b 1"],
        }
        assert got.received == got.count == 3 and not got.more
    assert rx.drain().lines == {}  # what was read is gone: lines since the last call


def test_a_batch_of_many_sources_and_bad_datagrams_keeps_each_line_with_its_source(
    rx: Receiver, tx: socket.socket
) -> None:
    """One read of interleaved senders with bad datagrams among them (recvmmsg takes them
    in one call, and the batch leaves its C-level path): each line under its own source,
    in order, whole (a line longer than a slot's 1 KiB head too), the bad ones counted."""
    long = b"L" * 5000
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        sends = [
            (tx, b"a 1\n"),
            (other, b"b 1\n"),
            (tx, b""),
            (other, b"x" * (rx.max_size + 1)),
            (tx, long + b"\n"),
            (other, b"b 2"),  # no newline: cut
            (tx, b"a 3\n"),
        ]
        for sock, data in sends:
            sock.sendto(data, rx.address)
        settle(rx)
        got = rx.drain()
        assert got.lines == {
            ("127.0.0.1", tx.getsockname()[1]): [b"a 1", long, b"a 3"],
            ("127.0.0.1", other.getsockname()[1]): [b"b 1", b"b 2"],
        }
    assert (got.received, got.empty, got.oversized, got.cut) == (5, 1, 1, 1)


def test_an_empty_queue_returns_at_once(rx: Receiver) -> None:
    start = time.monotonic()
    for _ in range(20):
        got = rx.drain(max_datagrams=1)
    assert got.received == 0 and got.lines == {} and not got.more
    assert time.monotonic() - start < 2.0  # 20 drains: never a blocking read


def test_bad_datagrams_are_counted_never_raised(rx: Receiver, tx: socket.socket) -> None:
    tx.sendto(b"", rx.address)  # empty
    tx.sendto(b"x" * (rx.max_size + 1) + b"\n", rx.address)  # oversized
    tx.sendto(b"y" * rx.max_size, rx.address)  # fits; no newline: cut by uWSGI
    tx.sendto(b"\xff\xfe\x00 not a line\n", rx.address)  # kept as bytes: the parser judges
    tx.sendto(b"two\nlines\n", rx.address)  # one datagram, one entry
    settle(rx)
    got = rx.drain()
    (lines,) = got.lines.values()
    assert lines == [b"y" * rx.max_size, b"\xff\xfe\x00 not a line", b"two\nlines"]
    assert (got.received, got.oversized, got.empty, got.cut) == (3, 1, 1, 1)
    t = rx.totals
    assert (t.received, t.oversized, t.empty, t.cut) == (3, 1, 1, 1)


def test_a_drain_stops_at_its_bound_and_leaves_the_rest_queued(
    rx: Receiver, tx: socket.socket
) -> None:
    for i in range(50):
        tx.sendto(b"line %d\n" % i, rx.address)
    settle(rx)
    first = rx.drain(max_datagrams=20)
    assert first.received == 20 and first.more
    second = rx.drain(max_datagrams=20, max_bytes=30)  # 7-byte lines: 35 bytes, then stop
    assert second.received == 5 and second.more
    rest = rx.drain()
    assert rest.received == 25 and not rest.more
    everything = [ln for d in (first, second, rest) for v in d.lines.values() for ln in v]
    assert everything == [b"line %d" % i for i in range(50)]  # none lost, in order
    assert rx.totals.drains_at_bound == 2


def test_a_flood_is_bounded_in_work_and_memory_and_the_kernel_drops_are_counted(
    tx: socket.socket, reading: tuple[int, bool]
) -> None:
    """A foreign sender floods the port while the receiver is not read: the kernel's queue
    is bounded by the receive buffer, what overflows is counted from the socket's drop
    count (SO_MEMINFO), and each drain keeps at most its bound."""
    batch, fast = reading
    with Receiver("127.0.0.1:0", rcvbuf=1024 * 1024, batch=batch, fast=fast) as rx:
        big = b"z" * 1000 + b"\n"
        for _ in range(5000):  # ~5 MB (~11 MiB of truesize) into a 2 MiB buffer
            tx.sendto(big, rx.address)
        tracemalloc.start()
        try:
            drains = [rx.drain(max_datagrams=100) for _ in range(3)]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert all(d.received <= 100 for d in drains) and drains[0].more
        assert peak < 2 * 1024 * 1024  # 100 lines of 1 KB, not 5 MB
        for _ in range(200):
            if not rx.drain().more:
                break
        tx.sendto(b"after\n", rx.address)  # the next datagram carries the drop count
        settle(rx)
        last = rx.drain()
        assert last.lines and next(iter(last.lines.values()))[-1] == b"after"
        total = rx.totals
        assert total.kernel_drops > 1000  # most of 5000 did not fit
        assert total.received + total.kernel_drops == 5001


def test_a_closed_receiver_drains_nothing(rx: Receiver, tx: socket.socket) -> None:
    address = rx.address
    tx.sendto(b"x\n", address)
    rx.close()
    rx.close()  # twice is harmless
    assert rx.drain().lines == {} and rx.fileno() == -1


def test_the_receive_buffer_is_asked_for_and_reported() -> None:
    with Receiver("127.0.0.1:0", rcvbuf=256 * 1024) as rx:
        rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
        assert rx.rcvbuf == 2 * min(256 * 1024, rmem_max)  # the kernel doubles what it grants
