"""A minimal guarded writer for the uWSGI master FIFO (sweep's own, until actuate/fifo.py lands).

Guards: the path must be a FIFO itself (lstat: a symlink is refused, so a planted link cannot
redirect our writes), it is opened O_WRONLY|O_NONBLOCK (a blocking open with no reader hangs
forever; ENXIO means no master reads it), and, when /proc lets us look, the master whose stats
we read must hold it open: we never step a different instance than the one we measure.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

REOPEN_TRIES = 3
REOPEN_WAIT = 0.05


class FifoError(Exception):
    """The FIFO cannot be used; one line naming the path and the fix."""


def check_fifo(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise FifoError(f"{path} does not exist; add `master-fifo = {path}` to the ini") from None
    except OSError as exc:
        raise FifoError(f"{path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise FifoError(f"{path} is a symlink; pass the FIFO's real path")
    if not stat.S_ISFIFO(st.st_mode):
        raise FifoError(f"{path} is not a FIFO; pass the path of `master-fifo` from the ini")


def opened_by(pid: int, path: str) -> bool | None:
    """Whether process `pid` holds `path` open; None when /proc does not let us see."""
    if pid <= 0:
        return None
    want = os.path.realpath(path)
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        fds = list(fd_dir.iterdir())
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(fd) == want:
                return True
        except OSError:
            continue
    return False


class MasterFifo:
    """Writes commands to one master FIFO, re-checking the guards at every write."""

    def __init__(self, path: str, master_pid: int = 0) -> None:
        self.path = path
        self.master_pid = master_pid
        self.sent: list[str] = []  # every command written, for the report and the tests

    def check(self) -> None:
        """All guards, and one open/close: ENXIO now rather than mid-sweep. Ownership first:
        after a writer closes, the master closes and reopens its end (a few ms without it)."""
        check_fifo(self.path)
        if opened_by(self.master_pid, self.path) is False:
            raise FifoError(
                f"{self.path} is not the master FIFO of the instance whose stats we read "
                f"(master pid {self.master_pid}); pass the matching --fifo and --stats"
            )
        os.close(self._open())

    def _open(self) -> int:
        check_fifo(self.path)
        for attempt in range(REOPEN_TRIES):
            try:
                return os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise FifoError(f"{self.path}: {exc.strerror}") from None
            if attempt < REOPEN_TRIES - 1:
                time.sleep(REOPEN_WAIT)  # the master may be reopening after our last write
        raise FifoError(f"no uWSGI master reads {self.path}; is it running?")

    def write(self, commands: str) -> None:
        fd = self._open()
        try:
            os.write(fd, commands.encode())
        finally:
            os.close(fd)
        self.sent.append(commands)
