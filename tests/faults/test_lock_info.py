"""`doctor` names the apply lock's holder from /proc/locks, without taking the lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uwsgitune.actuate.doctor import DoctorFacts, checks
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.lockinfo import LockInfo, flock_holders, lock_info


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
