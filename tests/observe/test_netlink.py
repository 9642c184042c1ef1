"""Unix listen queues from the kernel (netlink sock_diag), without uWSGI."""

from __future__ import annotations

import contextlib
import socket
import struct
from pathlib import Path

from tests.observe.helpers import document, worker
from uwsgitune.core.model import parse_stats
from uwsgitune.sources import netlink
from uwsgitune.sources.host import HostSampler, listen_overflows


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
        assert netlink.unix_listen_queues()[path] == (0, 3)
        try:
            for _ in range(8):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setblocking(False)
                clients.append(c)
                with contextlib.suppress(BlockingIOError):
                    c.connect(path)
            queue, backlog = netlink.unix_listen_queues()[path]
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
    assert listen_overflows(tmp_path / "missing") == (None, None)
    assert listen_overflows() != (None, None)
