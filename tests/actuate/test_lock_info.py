"""`doctor` names the apply lock's holder from /proc/locks, without taking the lock; the
daemon says when its lock would be hidden in a private /tmp."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import wait_for
from tests.support.tuned import manual
from uwsgitune.actuate.doctor import DoctorFacts, checks
from uwsgitune.actuate.lock import ApplyLock, LockInfo, flock_holders, lock_info
from uwsgitune.launch import UwsgiProcess


def test_flock_holders_match_device_and_inode() -> None:
    dev = os.makedev(0xFD, 1)
    text = (
        "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n"
        "1: -> FLOCK  ADVISORY  WRITE 77 fd:01:1234 0 EOF\n"  # a waiter, not a holder
        "2: POSIX  ADVISORY  WRITE 99 fd:01:1234 0 EOF\n"
        "3: FLOCK  ADVISORY  WRITE 55 fd:01:12345 0 EOF\n"
    )
    assert flock_holders(text, dev, 1234) == [4242]


def test_a_held_lock_is_named_and_a_released_one_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UWSGITUNE_LOCK_DIR", str(tmp_path / "locks"))
    fifo = tmp_path / "app.fifo"
    os.mkfifo(fifo)
    assert lock_info(fifo).holder_pid is None  # no file yet
    lock = ApplyLock(fifo, "uwsgitune tune \x1b[2J")
    assert lock.acquire() is None
    try:
        info = lock_info(fifo)
        assert info.holder_pid == os.getpid() and "\x1b" not in info.holder
        assert "uwsgitune tune" in info.holder
        assert ApplyLock(fifo, "other").acquire() is not None  # lock_info took nothing
    finally:
        lock.release()
    assert lock_info(fifo).holder_pid is None
    assert ApplyLock(fifo, "other").acquire() is None


def test_doctor_reports_the_lock(tmp_path: Path) -> None:
    def lock_check(info: LockInfo | None) -> tuple[bool | None, str]:
        c = next(c for c in checks(DoctorFacts("s", lock=info)) if c.name == "lock")
        return c.ok, c.detail

    assert lock_check(LockInfo("/run/uwsgitune/x.lock")) == (True, "/run/uwsgitune/x.lock: free")
    ok, detail = lock_check(LockInfo("/l", None, 12, "pid 12 (uwsgitune daemon)"))
    assert ok is True and "held by pid 12 (uwsgitune daemon);" in detail
    ok, detail = lock_check(LockInfo("/l", "the lock directory /d is writable by others"))
    assert ok is False and "writable" in detail


def test_a_lock_in_private_tmp_under_systemd_is_named() -> None:
    from uwsgitune.actuate.lock import private_lock_dir

    tmp = Path("/tmp/uwsgitune-33")
    assert private_lock_dir({"INVOCATION_ID": "abc"}, tmp) == "/tmp/uwsgitune-33"
    assert private_lock_dir({}, tmp) is None  # not under systemd: /tmp is the host's
    assert private_lock_dir({"INVOCATION_ID": "abc"}, Path("/run/uwsgitune")) is None


@pytest.mark.uwsgi
def test_the_daemon_warns_when_its_lock_is_in_a_private_tmp(
    uwsgi: Callable[..., UwsgiProcess], start_daemon: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    """An old unit without RuntimeDirectory: the daemon's lock falls in its PrivateTmp,
    unseen by `tune`, the TUI and `sweep`. It says so at start, with the fix."""
    proc = uwsgi(**manual(tmp_path / "override.ini", processes=2, initial=1))
    config = (
        '[daemon]\nmetrics_listen = "127.0.0.1:@PORT@"\n'
        f'state_dir = "{tmp_path}"\n\n[[instance]]\nname = "app"\nstats = "{proc.stats}"\n'
        f'fifo = "{proc.fifo}"\nmode = "apply"\n'
    )
    locks = tempfile.mkdtemp(prefix="uwt-private-", dir="/tmp")
    d = start_daemon(config=config, env={"INVOCATION_ID": "1", "UWSGITUNE_LOCK_DIR": locks})
    wait_for(lambda: "started" in d.log.read_text(), timeout=20)
    log = d.log.read_text()
    assert "lock_private" in log and locks in log and "RuntimeDirectory=uwsgitune" in log, log
