from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from uwsgitune.daemon.sdnotify import Notifier, watchdog_interval


def receiver(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(2)
    return sock


def test_path_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    with receiver(path) as sock:
        n = Notifier({"NOTIFY_SOCKET": path})
        assert n.ready("watching 2") and n.ping() and n.stopping()
        assert sock.recv(4096) == b"READY=1\nSTATUS=watching 2"
        assert sock.recv(4096) == b"WATCHDOG=1"
        assert sock.recv(4096) == b"STOPPING=1"
        assert n.reloading()
        assert sock.recv(4096).startswith(b"RELOADING=1\nMONOTONIC_USEC=")


def test_abstract_socket() -> None:
    name = f"uwsgitune-test-{uuid.uuid4().hex}"
    with receiver("\0" + name) as sock:
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).ready()
        assert sock.recv(4096) == b"READY=1"


def test_no_op_without_systemd(tmp_path: Path) -> None:
    assert not Notifier({}).enabled
    assert not Notifier({}).ready()
    # systemd gone (socket removed): never raises
    assert not Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone")}).ready()


def test_watchdog_interval_is_half_and_ours_only() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}) == 1.0
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}, pid=2) is None
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None


def test_a_full_receiver_never_blocks(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    with receiver(path):  # never read: its queue fills after max_dgram_qlen messages
        n = Notifier({"NOTIFY_SOCKET": path})
        sent = [n.ping() for _ in range(200)]
        assert sent[0] and not sent[-1]  # dropped, not blocked
