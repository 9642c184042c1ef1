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

from uwsgitune.actuate.lock import dir_problem, holder_line, lock_path, trusted_uids

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
    path = lock_path(fifo)
    trusted = trusted_uids(fifo, os.geteuid())
    try:
        problem = dir_problem(path.parent, os.stat(path.parent), trusted)
        st = os.lstat(path)
    except OSError:
        return LockInfo(str(path))  # no directory or no file yet: nobody holds it
    if problem or not stat.S_ISREG(st.st_mode):
        return LockInfo(str(path), problem or f"the lock {path} is not a regular file")
    try:
        pids = flock_holders(locks.read_text(), st.st_dev, st.st_ino)
        text = holder_line(path.read_bytes())
    except OSError:
        return LockInfo(str(path))
    return LockInfo(str(path), None, pids[0] if pids else None, text)
