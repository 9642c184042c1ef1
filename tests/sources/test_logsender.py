"""The sender proof on its own: which sockets may have sent a datagram, the cache per source
port, the rate of dumps, and the reasons when nothing can be proved (a socket table and a
/proc given by the test; tests/sources/test_reqlog_real.py proves a real master's)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from uwsgitune.sources.logsender import SenderCheck, sending_sockets
from uwsgitune.sources.netlink import Diag, UdpSocket

MASTER = 100


class Table(Diag):
    """A Diag whose UDP dump is the test's table (or an error)."""

    def __init__(self, table: list[UdpSocket]) -> None:
        super().__init__()
        self.table = table
        self.error: OSError | None = None

    def udp_sockets(self, families: tuple[int, ...] = (socket.AF_INET,)) -> list[UdpSocket]:
        if self.error is not None:
            raise self.error
        return list(self.table)


def proc_with(tmp_path: Path, pid: int, inodes: list[int]) -> Path:
    fd = tmp_path / str(pid) / "fd"
    fd.mkdir(parents=True)
    for i, inode in enumerate(inodes):
        os.symlink(f"socket:[{inode}]", fd / str(i + 3))
    os.symlink("/dev/null", fd / "0")
    return tmp_path


def udp(address: str, port: int, inode: int) -> UdpSocket:
    return UdpSocket(address, port, 0, 0, 0, inode)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_sockets_that_may_have_sent_are_those_on_its_port_and_address_or_a_wildcard() -> None:
    table = [
        udp("0.0.0.0", 5000, 1),  # uWSGI's logger: never bound, the kernel picks 0.0.0.0
        udp("127.0.0.1", 5000, 2),
        udp("127.0.0.2", 5000, 3),  # another address: not it
        udp("127.0.0.1", 5001, 4),  # another port: not it
        udp("::", 5000, 5),
        udp("::ffff:127.0.0.1", 5000, 6),
    ]
    found = sending_sockets(("127.0.0.1", 5000), table)
    assert [s.inode for s in found] == [1, 2, 5, 6]


def test_a_source_is_proven_when_every_candidate_is_the_masters(tmp_path: Path) -> None:
    proc = proc_with(tmp_path, MASTER, [11, 12])
    diag = Table([udp("0.0.0.0", 5000, 11), udp("0.0.0.0", 6000, 99)])
    check = SenderCheck(diag=diag, proc=proc)
    assert check.verdict(("127.0.0.1", 5000), MASTER).proven
    verdict = check.verdict(("127.0.0.1", 6000), MASTER)  # a stranger's socket
    assert not verdict.proven
    assert verdict.reason == "127.0.0.1:6000: the sending socket is not the master's (100)"
    verdict = check.verdict(("127.0.0.1", 7000), MASTER)
    assert verdict.reason == "127.0.0.1:7000: no UDP socket of this host sends from that port"
    # a stranger sharing the master's port (SO_REUSEPORT) makes the port unproven
    diag.table.append(udp("127.0.0.1", 5000, 77))
    fresh = SenderCheck(diag=diag, proc=proc)
    assert not fresh.proven(("127.0.0.1", 5000), MASTER)


def test_what_cannot_be_proved_is_unproven_with_the_reason(tmp_path: Path) -> None:
    diag = Table([udp("0.0.0.0", 5000, 11)])
    check = SenderCheck(diag=diag, proc=tmp_path)  # no /proc/100
    verdict = check.verdict(("127.0.0.1", 5000), MASTER)
    assert not verdict.proven and verdict.reason.startswith(
        "127.0.0.1:5000: /proc/100/fd unreadable ("
    )
    assert check.verdict(("127.0.0.1", 5000), 0).reason.endswith("the master's pid is unknown")
    diag.error = PermissionError(1, "Operation not permitted")
    nl = SenderCheck(diag=diag, proc=proc_with(tmp_path, MASTER, [11]))
    assert nl.verdict(("127.0.0.1", 5000), MASTER).reason == (
        "127.0.0.1:5000: no netlink answer (Operation not permitted)"
    )


def test_a_proof_is_cached_per_port_and_master_and_reproved_later(tmp_path: Path) -> None:
    clock = Clock()
    diag = Table([udp("0.0.0.0", 5000, 11)])
    check = SenderCheck(
        diag=diag, proc=proc_with(tmp_path, MASTER, [11]), clock=clock, reprove_after=10.0
    )
    assert check.proven(("127.0.0.1", 5000), MASTER) and check.dumps == 1
    clock.now = 5.0
    for _ in range(1000):
        assert check.proven(("127.0.0.1", 5000), MASTER)
    assert check.dumps == 1  # one dump, not one per datagram
    # the master's socket closed and a stranger took its port: caught at the re-proof
    diag.table = [udp("0.0.0.0", 5000, 66)]
    clock.now = 10.5
    assert not check.proven(("127.0.0.1", 5000), MASTER) and check.dumps == 2
    # another master pid is another proof
    assert not check.proven(("127.0.0.1", 5000), MASTER + 1)


def test_a_new_port_is_proved_at_once_and_retires_the_old_one(tmp_path: Path) -> None:
    """A reload re-executes the master: its logger socket gets a new port. The new port is
    proved at its first datagram (an unproven verdict is kept for min_interval only), and the
    old port's proof is dropped, so a stranger that takes the old port is not trusted."""
    clock = Clock()
    diag = Table([udp("0.0.0.0", 5000, 11)])
    proc = proc_with(tmp_path, MASTER, [11, 12])
    check = SenderCheck(diag=diag, proc=proc, clock=clock, min_interval=1.0)
    assert check.proven(("127.0.0.1", 5000), MASTER)
    assert not check.proven(("127.0.0.1", 5002), MASTER)  # not yet in the dump
    clock.now = 0.5
    diag.table = [udp("0.0.0.0", 5002, 12)]  # the reload: a new socket, a new port
    assert not check.proven(("127.0.0.1", 5002), MASTER)  # dumps rate-limited: 1 per second
    clock.now = 1.2
    assert check.proven(("127.0.0.1", 5002), MASTER)
    diag.table = [udp("0.0.0.0", 5002, 12), udp("0.0.0.0", 5000, 66)]  # a stranger on 5000
    clock.now = 2.5
    assert not check.proven(("127.0.0.1", 5000), MASTER)


def test_a_flood_from_many_ports_costs_one_dump_per_interval(tmp_path: Path) -> None:
    clock = Clock()
    diag = Table([udp("0.0.0.0", 5000, 11)])
    check = SenderCheck(diag=diag, proc=proc_with(tmp_path, MASTER, [11]), clock=clock)
    for port in range(20000, 21000):
        assert not check.proven(("127.0.0.1", port), MASTER)
    assert check.dumps == 1
    assert check.proven(("127.0.0.1", 5000), MASTER)  # the master still is
