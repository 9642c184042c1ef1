"""Who holds an instance's apply lock, read without taking it (for `doctor`).

Taking the lock, even for a moment, could make a daemon starting at that instant refuse to
apply. The kernel lists every `flock` in /proc/locks with the holder's pid and the file's
device and inode: that is matched against the lock file, which is only stat'ed and read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.actuate.lock import HOLDER_BYTES, holder_line, lock_path
from uwsgitune.actuate.lockdir import dir_problem, fallback_dir, fallback_problem, trusted_uids

PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class LockInfo:
    path: str
    problem: str | None = None  # the lock directory or file cannot be used safely
    holder_pid: int | None = None  # a live flock on the file
    holder: str = ""  # what the file says about its holder, printable


def flock_holders(text: str, dev: int, ino: int) -> list[int]:
    """Pids holding a FLOCK on (dev, ino), from /proc/locks text (pure)."""
    want = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    pids = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == "FLOCK" and f[5] == want:
            pids.append(int(f[4]) if f[4].isdigit() else 0)
    return pids


def lock_info(fifo: Path, locks: Path = PROC_LOCKS) -> LockInfo:
    """The lock of `fifo`: its hashed name, or the legacy name when that one is held (an
    older uwsgitune takes only that one) or cannot be used (acquire would refuse)."""
    trusted = trusted_uids(fifo, os.geteuid())
    info = _info(lock_path(fifo), trusted, locks)
    if info.problem or info.holder_pid is not None:
        return info
    legacy = _info(lock_path(fifo, legacy=True), trusted, locks)
    return legacy if legacy.problem or legacy.holder_pid is not None else info


def _directory_problem(directory: Path, trusted: frozenset[int]) -> str | None:
    euid = os.geteuid()
    if directory == fallback_dir(euid):  # a real directory of ours: never followed
        return fallback_problem(directory, os.lstat(directory), euid)
    return dir_problem(directory, os.stat(directory), trusted)


def _info(path: Path, trusted: frozenset[int], locks: Path) -> LockInfo:
    try:
        problem = _directory_problem(path.parent, trusted)
        if problem:  # acquire would refuse it, file or no file
            return LockInfo(str(path), problem)
        st = os.lstat(path)
    except OSError:
        return LockInfo(str(path))  # no directory or no file yet: nobody holds it
    if not stat.S_ISREG(st.st_mode):
        return LockInfo(str(path), f"the lock {path} is not a regular file")
    try:
        pids = flock_holders(locks.read_text(), st.st_dev, st.st_ino)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            text = holder_line(os.pread(fd, HOLDER_BYTES, 0))
        finally:
            os.close(fd)
    except OSError:
        return LockInfo(str(path))
    return LockInfo(str(path), None, pids[0] if pids else None, text)
