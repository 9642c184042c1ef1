"""Unix and TCP listen queues from the kernel (netlink sock_diag), without uWSGI."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from pathlib import Path

import pytest

from tests.support.instances import document, worker
from uwsgitune.core.model import parse_stats
from uwsgitune.sources import netlink
from uwsgitune.sources.host import HostSampler
from uwsgitune.sources.hostfiles import listen_overflows


def _unix() -> dict[str, tuple[int, int]]:
    diag = netlink.Diag()
    try:
        return diag.unix()
    finally:
        diag.close()


def _tcp() -> list[netlink.TcpEntry]:
    diag = netlink.Diag()
    try:
        return diag.tcp()
    finally:
        diag.close()


def test_request_layout() -> None:
    req = netlink.build_request(seq=7)
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", req)
    assert length == len(req) == 16 + 24
    assert kind == netlink.SOCK_DIAG_BY_FAMILY and seq == 7
    assert flags == netlink.NLM_F_REQUEST | netlink.NLM_F_DUMP


def _message(name: bytes, rq: tuple[int, int]) -> bytes:
    def attr(kind: int, payload: bytes) -> bytes:
        raw = struct.pack("=HH", 4 + len(payload), kind) + payload
        return raw + b"\0" * ((4 - len(raw) % 4) % 4)

    body = struct.pack("=BBBBIII", 1, 1, 10, 0, 42, 0, 0)
    body += attr(netlink.UNIX_DIAG_NAME, name) + attr(
        netlink.UNIX_DIAG_RQLEN, struct.pack("=II", *rq)
    )
    return struct.pack("=IHHII", 16 + len(body), netlink.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + body


def test_parse_messages_path_abstract_and_done() -> None:
    data = _message(b"/run/a.sock", (3, 16)) + _message(b"\0abs", (0, 100))
    data += _message(b"\0uwsgi\0", (1, 10))  # uWSGI binds abstract names with their NUL
    data += struct.pack("=IHHII", 20, netlink.NLMSG_DONE, 2, 1, 0) + b"\0\0\0\0"
    entries, done = netlink.parse_messages(data)
    assert entries == [("/run/a.sock", 3, 16), ("@abs", 0, 100), ("@uwsgi", 1, 10)]
    assert done


def test_real_unix_backlog_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "l.sock")
    clients: list[socket.socket] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(3)
        assert _unix()[path] == (0, 3)
        try:
            for _ in range(8):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setblocking(False)
                clients.append(c)
                with contextlib.suppress(BlockingIOError):
                    c.connect(path)
            queue, backlog = _unix()[path]
            assert backlog == 3
            assert queue == backlog + 1  # a unix queue also peaks at backlog+1
            sampler = HostSampler()
            doc = parse_stats(
                document(workers=[worker(1, 1)], sockets=[{"name": path, "proto": "uwsgi"}])
            )
            host = sampler.sample(doc)
            assert [(q.path, q.queue, q.backlog) for q in host.unix_queues] == [(path, 4, 3)]
        finally:
            for c in clients:
                c.close()


def test_netstat_counters_parse(tmp_path: Path) -> None:
    f = tmp_path / "netstat"
    f.write_text(
        "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 12 15\n"
        "IpExt: InNoRoutes\nIpExt: 0\n"
    )
    assert listen_overflows(f) == (12, 15)
    f.write_text(  # another table whose name ends in "TcpExt:" comes first
        "MPTcpExt: MPCapableSYNRX ListenOverflows\nMPTcpExt: 0 99\n"
        "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 12 15\n"
    )
    assert listen_overflows(f) == (12, 15)
    assert listen_overflows(tmp_path / "missing") == (None, None)
    assert listen_overflows() != (None, None)


def _inet_message(family: int, addr: str, port: int, rq: int, wq: int) -> bytes:
    raw = socket.inet_pton(family, addr)
    sockid = struct.pack("!HH", port, 0) + raw.ljust(16, b"\0") + bytes(16) + bytes(12)
    body = struct.pack("=BBBB", family, 10, 0, 0) + sockid + struct.pack("=IIIII", 0, rq, wq, 0, 9)
    return struct.pack("=IHHII", 16 + len(body), netlink.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + body


def test_parse_inet_messages_v4_v6_and_done() -> None:
    data = _inet_message(socket.AF_INET, "127.0.0.1", 9000, 5, 4)
    data += _inet_message(socket.AF_INET6, "::", 9001, 0, 128)
    data += struct.pack("=IHHII", 20, netlink.NLMSG_DONE, 2, 1, 0) + b"\0\0\0\0"
    entries, done = netlink.parse_inet_messages(data)
    assert entries == [("127.0.0.1", 9000, 5, 4), ("::", 9001, 0, 128)] and done
    listeners, done = netlink.parse_inet_listeners(data)  # with owner uid 0 and inode 9
    assert listeners == [
        netlink.TcpListener("127.0.0.1", 9000, 5, 4, 0, 9),
        netlink.TcpListener("::", 9001, 0, 128, 0, 9),
    ]


def test_match_tcp_names_as_uwsgi_writes_them() -> None:
    table = [
        ("127.0.0.1", 9000, 5, 4),
        ("0.0.0.0", 9001, 1, 100),
        ("10.0.0.1", 9002, 0, 8),
        ("10.0.0.2", 9002, 3, 8),
        ("::1", 9003, 2, 16),
    ]
    assert netlink.match_tcp("127.0.0.1:9000", table) == (5, 4)
    assert netlink.match_tcp("localhost:9000", table) == (5, 4)  # the only listener there
    assert netlink.match_tcp(":9001", table) == (1, 100)
    assert netlink.match_tcp("0.0.0.0:9001", table) == (1, 100)
    assert netlink.match_tcp("10.0.0.2:9002", table) == (3, 8)
    assert netlink.match_tcp("myhost:9002", table) is None  # two could be it: do not guess
    assert netlink.match_tcp("[::1]:9003", table) == (2, 16)
    assert netlink.match_tcp("127.0.0.1:1", table) is None
    assert netlink.match_tcp("/run/app.sock", table) is None


def test_real_tcp_backlog_is_seen_at_once() -> None:
    clients: list[socket.socket] = []
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(3)
        port = listener.getsockname()[1]
        assert netlink.match_tcp(f"127.0.0.1:{port}", _tcp()) == (0, 3)
        try:
            for _ in range(4):
                clients.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            sampler = HostSampler()
            doc = parse_stats(
                document(workers=[worker(1, 1)], sockets=[{"name": f"127.0.0.1:{port}"}])
            )
            host = sampler.sample(doc)
            assert [(q.name, q.queue, q.backlog) for q in host.tcp_queues] == [
                (f"127.0.0.1:{port}", 4, 3)
            ]
        finally:
            for c in clients:
                c.close()


def test_the_ipv6_dump_is_skipped_only_where_it_cannot_change_a_match() -> None:
    v4 = [("127.0.0.1", 9000, 5, 4), ("0.0.0.0", 9001, 1, 100), ("10.0.0.1", 9002, 0, 8)]
    v6 = [("::", 9001, 7, 50), ("::1", 9003, 2, 16), ("::", 9004, 1, 9), ("::1", 9000, 9, 9)]
    names = [
        "127.0.0.1:9000",
        ":9001",
        "0.0.0.0:9001",
        "10.0.0.1:9002",
        "[::1]:9003",
        "localhost:9000",
        "127.0.0.1:9004",
        "10.0.0.9:9002",
        "/run/app.sock",
        "x",
    ]
    skipped = [n for n in names if netlink.v4_found([n], v4)]
    assert skipped == ["127.0.0.1:9000", "10.0.0.1:9002"]
    for name in names:  # where it is skipped, the answer is the one both tables give
        if name in skipped:
            assert netlink.match_tcp(name, v4) == netlink.match_tcp(name, v4 + v6)
    assert netlink.match_tcp("127.0.0.1:9004", v4 + v6) == (1, 9)  # only v6 has it: dumped
    assert not netlink.v4_found(["127.0.0.1:9000", ":9001"], v4)  # one needs it: both dumped


def test_a_real_ipv6_listener_is_still_found_by_the_sampler() -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as listener:
        listener.bind(("::1", 0))
        listener.listen(5)
        port = listener.getsockname()[1]
        doc = parse_stats(document(workers=[worker(1, 1)], sockets=[{"name": f"[::1]:{port}"}]))
        sampler = HostSampler()
        try:
            for _ in range(2):  # the second through the kept socket
                host = sampler.sample(doc)
                assert [(q.queue, q.backlog) for q in host.tcp_queues] == [(0, 5)]
        finally:
            sampler.close()


def test_a_failed_dump_leaves_no_half_answer_for_the_next() -> None:
    diag = netlink.Diag()
    try:
        bad = netlink.build_inet_request(socket.AF_UNSPEC)  # the kernel refuses it
        with pytest.raises(OSError):
            diag.dump(bad, netlink.parse_inet_messages)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as a:
            a.bind(f"\0uwt-diag-{id(a)}")
            a.listen(2)
            assert diag.unix()[f"@uwt-diag-{id(a)}"] == (0, 2)
    finally:
        diag.close()


def test_the_udp_dump_lists_every_udp_socket_with_its_inode() -> None:
    """Bound or not, connected or not (uWSGI's logger socket is unconnected and bound by the
    kernel at its first send, on 0.0.0.0): each is listed with its port and inode."""
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as bound,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as connected,
    ):
        bound.bind(("127.0.0.1", 0))
        sender.sendto(b"x", bound.getsockname())  # the kernel binds it: 0.0.0.0:ephemeral
        connected.connect(bound.getsockname())
        diag = netlink.Diag()
        try:
            table = diag.udp_sockets()
            tcp = diag.tcp_listeners()
        finally:
            diag.close()
        mine = {
            (s.address, s.port, s.inode)
            for s in table
            if s.inode in {os.fstat(x.fileno()).st_ino for x in (bound, sender, connected)}
        }
        assert mine == {
            ("127.0.0.1", bound.getsockname()[1], os.fstat(bound.fileno()).st_ino),
            ("0.0.0.0", sender.getsockname()[1], os.fstat(sender.fileno()).st_ino),
            ("127.0.0.1", connected.getsockname()[1], os.fstat(connected.fileno()).st_ino),
        }
        (queued,) = [s for s in table if s.inode == os.fstat(bound.fileno()).st_ino]
        assert queued.rx_queue > 0  # the datagram waiting to be read
        assert not any(t.inode == queued.inode for t in tcp)  # UDP only in the UDP dump
