"""Writes to uWSGI's master FIFO, and only to the FIFO of the master we watch.

Before every write: the path must be a FIFO (lstat: a symlink is refused, it could be
swapped), and `/proc/<master>/fd` must hold a descriptor on that same inode, so a command
never reaches another instance. The FIFO is opened O_WRONLY|O_NONBLOCK: ENXIO means no
master reads it (a blocking open would hang forever).

A write that does not go whole is never reported as sent: a full pipe (the master not
reading) sends nothing and says so; a write that stops part way (past PIPE_BUF) raises
`FifoShortWrite`, which names and keeps what went.

`-` in uWSGI 2.0 ignores the `cheaper` floor, can reach 0 workers, turns extra `-` into a
debt, and stays pending while every worker is busy. So `scale` never sends more `-` than
live - floor, and never a `-` while an earlier one has not shown in the live count.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.errors import UwsgituneError


class FifoError(UwsgituneError):
    """A write that was refused or failed; the message names the path and the fix."""

    code = 2


class FifoSetupError(FifoError):
    """The path is not a usable FIFO at all (missing, a symlink, another file type)."""


class FifoNotHeld(FifoError):
    """No master holds the FIFO open right now. Also seen for ~10 ms after each write: the
    master closes and reopens its end when a writer closes, so a quick second write retries."""


class FifoShortWrite(FifoError):
    """Fewer commands went than asked (the master's pipe filled up): `sent` is what went."""

    def __init__(self, message: str, sent: str) -> None:
        super().__init__(message)
        self.sent = sent


REOPEN_TRIES = 3
REOPEN_WAIT = 0.05


@dataclass(frozen=True)
class Pending:
    """`-` sent and not yet seen in the stats: the live count it should reach."""

    expect_live: int
    count: int
    since: float


def fifo_inode(path: Path) -> tuple[int, int]:
    """(dev, inode) of a real FIFO at `path`; raises FifoError for anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise FifoSetupError(
            f"{path}: no such file; add `master-fifo = {path}` to the ini"
        ) from None
    except OSError as exc:
        raise FifoError(f"{path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise FifoSetupError(f"{path}: a symlink, refused; give the FIFO's real path")
    if not stat.S_ISFIFO(st.st_mode):
        raise FifoSetupError(f"{path}: not a FIFO; give the path of uWSGI's `master-fifo`")
    return st.st_dev, st.st_ino


def master_reads(
    path: Path, master_pid: int, proc: Path = Path("/proc"), want: tuple[int, int] | None = None
) -> bool:
    """True when the master holds the FIFO (or the inode `want`) open. Raises FifoError when
    /proc is unreadable."""
    want = want or fifo_inode(path)
    fd_dir = proc / str(master_pid) / "fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError as exc:
        raise FifoError(
            f"cannot read {fd_dir} ({exc.strerror}) to prove {path} is this master's FIFO; "
            "run uwsgitune as the uWSGI user"
        ) from None
    for fd in fds:
        try:
            st = os.stat(fd_dir / fd)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == want:
            return True
    return False


class MasterFifo:
    def __init__(self, path: Path | str, proc: Path = Path("/proc")) -> None:
        self.path = Path(path)
        self.proc = proc
        self.pending: Pending | None = None

    def check(self, master_pid: int) -> None:
        if master_pid <= 0:
            raise FifoError("the master pid is unknown (no stats yet); not writing to the FIFO")
        if not master_reads(self.path, master_pid, self.proc):
            raise FifoNotHeld(
                f"{self.path} is not open in master {master_pid}: another instance's FIFO? "
                "give the `master-fifo` of this instance"
            )
        try:
            owner, master_uid = (
                os.lstat(self.path).st_uid,
                (self.proc / str(master_pid)).stat().st_uid,
            )
        except OSError as exc:
            raise FifoError(f"{self.path}: {exc.strerror}; not writing") from None
        if owner != master_uid:
            raise FifoError(
                f"{self.path} is owned by uid {owner}, the master runs as uid {master_uid}: "
                "refused (uWSGI creates its own FIFO; someone else's could be a trap)"
            )

    def send(self, command: str, master_pid: int) -> None:
        """One write of `command` after the checks. Never blocks; retries the reopen window."""
        for attempt in range(REOPEN_TRIES):
            try:
                return self._send_once(command, master_pid)
            except FifoNotHeld:
                if attempt == REOPEN_TRIES - 1:
                    raise
                time.sleep(REOPEN_WAIT)

    def _send_once(self, command: str, master_pid: int) -> None:
        self.check(master_pid)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise FifoNotHeld(f"{self.path}: no master reads it (is uWSGI running?)") from None
            raise FifoError(f"{self.path}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)  # the path may have been swapped since the checks
            opened = (st.st_dev, st.st_ino)
            if not stat.S_ISFIFO(st.st_mode) or not master_reads(
                self.path, master_pid, self.proc, opened
            ):
                raise FifoError(f"{self.path}: replaced while checking it; not writing")
            written = os.write(fd, command.encode())
        except BlockingIOError:
            raise FifoError(
                f"{self.path}: the master's pipe is full (is the master stuck?); nothing sent"
            ) from None
        except OSError as exc:
            raise FifoError(f"{self.path}: write failed ({exc.strerror})") from None
        finally:
            os.close(fd)
        if written < len(command):  # O_NONBLOCK: a write past PIPE_BUF may stop where it fills
            raise FifoShortWrite(
                f"{self.path}: only {written} of {len(command)} {command[0]!r} written (the "
                "master's pipe is full: is the master stuck?)",
                command[:written],
            )

    def observe(self, live: int) -> None:
        """Fold a fresh live count: a pending `-` that showed is done."""
        if self.pending is not None and live <= self.pending.expect_live:
            self.pending = None

    def scale(self, live: int, desired: int, floor: int, master_pid: int, now: float) -> str:
        """Send the `+`/`-` difference; return what was sent. Raises FifoError when unsafe."""
        if desired > live:
            command = "+" * (desired - live)
        elif desired < live:
            if self.pending is not None:
                raise FifoError(
                    f"a `-` is still pending (live {live}, expected {self.pending.expect_live})"
                )
            if desired < floor:
                raise FifoError(f"refusing to go below the floor: {desired} < {floor}")
            command = "-" * (live - desired)
        else:
            return ""
        try:
            self.send(command, master_pid)
        except FifoShortWrite as exc:
            self._sent(exc.sent, live, now)
            raise
        self._sent(command, live, now)
        return command

    def _sent(self, command: str, live: int, now: float) -> None:
        """Track what went: a `-` is pending until the live count shows it."""
        if command.startswith("-"):
            self.pending = Pending(live - len(command), len(command), now)
        elif command:
            self.pending = None  # a `+` cancels a pending `-` in uWSGI

    def cancel_pending(self, live: int, master_pid: int) -> str:
        """Cancel what is left of a pending `-` with as many `+` (uWSGI's own rule)."""
        if self.pending is None:
            return ""
        left = max(live - self.pending.expect_live, 0)
        command = "+" * left
        if command:
            try:
                self.send(command, master_pid)
            except FifoShortWrite as exc:
                self.pending = None if exc.sent else self.pending
                raise
        self.pending = None
        return command
