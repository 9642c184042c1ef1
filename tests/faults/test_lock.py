"""Two actors on one instance: the lock stops the second, names the first, and frees itself
when the holder dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from uwsgitune.actuate.lock import ApplyLock, lock_path

HOLD = """
import sys, time
from pathlib import Path
from uwsgitune.actuate.lock import ApplyLock
lock = ApplyLock(Path(sys.argv[1]), "holder", Path(sys.argv[2]))
assert lock.acquire() is None
print("held", flush=True)
time.sleep(60)
"""


def test_second_lock_names_the_holder_and_is_freed_on_death(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    locks = tmp_path / "locks"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(fifo), str(locks)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        mine = ApplyLock(fifo, "second", locks)
        problem = mine.acquire()
        assert problem is not None and f"pid {proc.pid} (holder)" in problem
        assert "\n" not in problem and not mine.held
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert mine.acquire() is None and mine.held  # the kernel dropped the dead holder's lock
    assert f"pid {os.getpid()} (second)" in mine.path.read_text()
    mine.release()


def test_lock_is_keyed_by_the_real_path(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    assert lock_path(link, tmp_path) == lock_path(fifo, tmp_path)
    a, b = ApplyLock(fifo, "a", tmp_path), ApplyLock(link, "b", tmp_path)
    assert a.acquire() is None
    assert b.acquire() is not None
    a.release()
    assert b.acquire() is None
    b.release()


@pytest.mark.parametrize("bad", ["file", "dir"])
def test_unusable_lock_dir_refuses_to_apply(tmp_path: Path, bad: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    blocker = tmp_path / "locks"
    blocker.write_text("") if bad == "file" else blocker.mkdir()
    if bad == "dir":
        lock_path(fifo, blocker).mkdir()  # something that cannot be opened as a file
    problem = ApplyLock(fifo, "x", blocker).acquire()
    assert problem is not None and "not applying" in problem


def test_held_lock_survives_time(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    a = ApplyLock(fifo, "a", tmp_path)
    assert a.acquire() is None and a.acquire() is None  # re-entrant for its holder
    time.sleep(0.01)
    assert ApplyLock(fifo, "b", tmp_path).acquire() is not None
    a.release()
