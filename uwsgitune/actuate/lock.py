"""One actor per instance: an `flock` on a lock file keyed by the FIFO's real path.

Two daemons, a daemon and `uwsgitune tune --mode apply`, the TUI's `a` key, or `sweep` acting
on the same master would fight (each sees the other's `+`/`-` as the load moving). Whoever
applies holds an exclusive, non-blocking `flock` on `<lock dir>/<sanitised real FIFO
path>~<hash>.lock` and writes its pid and role there; the kernel drops the lock when the
holder dies, so a stale file never blocks anyone.

The name is the FIFO's real path with every character but `A-Za-z0-9._-` made `_`, its last
200 characters, then `~` and 16 hex digits of the SHA-256 of the whole real path: two FIFOs
whose sanitised names meet (`a b.fifo` and `a_b.fifo`, or the same last 200 characters)
get two locks. Before that hash, the name was `<sanitised>.lock` (the legacy name; `~` is
never in one, so no new name is ever an old one). An older uwsgitune (a daemon not yet
restarted after an upgrade) takes only the legacy name, exclusively; so a holder also
takes the legacy name's lock, shared (`LOCK_SH`): an old actor's exclusive lock and ours
exclude each other either way, while two new actors on FIFOs whose legacy names collide
both get their shared lock and are told apart by the hashed name. Both files get the
holder's line (an old actor names us from the legacy one), both get a reload's mark, and
the marks of both are read and kept: an old `tune` killed mid-reload
leaves its mark in the legacy file only. Both are released together.

The directory, and why it is trusted: actuate/lockdir.py. The lock file is opened relative
to that checked directory with O_NOFOLLOW, and must be a regular file with one link, owned
by us, root or the FIFO's owner. Root hands a lock file it creates in the service user's
directory over to that user, so the service can take the lock after it. The holder's text
is read from a file others may write: it is printed with its control characters escaped.

A reload pauses the workers before its `r` (actuate/quiesce.py), so a holder killed in
between leaves them paused. From its `p` until its `r` went, the holder writes a mark naming
the master's pid there, under its own line (`mark_reload`, `clear_reload`; the Reloader
does). The next holder, whoever it is (the daemon after `tune`, `sweep` or the TUI's `a`, or
the other way round; their audit logs differ), finds the marks when it takes the lock
(`left`) and resumes that master's pool before anything else (actuate/leftpaused.py). Taking
the lock keeps the marks in the file: one goes only when a holder has acted on it
(`clear_reload`), so a holder that could not resume the pool, or that sees another master,
leaves it for the next. A mark per master; at most `MARKS` are kept, the newest.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from uwsgitune.actuate.lockdir import FIX as FIX
from uwsgitune.actuate.lockdir import RUN_DIR as RUN_DIR
from uwsgitune.actuate.lockdir import LockProblem as LockProblem
from uwsgitune.actuate.lockdir import dir_problem as dir_problem
from uwsgitune.actuate.lockdir import lock_dir as lock_dir
from uwsgitune.actuate.lockdir import open_dir
from uwsgitune.actuate.lockdir import private_lock_dir as private_lock_dir
from uwsgitune.actuate.lockdir import resolve_dir as resolve_dir
from uwsgitune.actuate.lockdir import trusted_uids as trusted_uids
from uwsgitune.core.redact import printable

HOLDER_BYTES = 200


MARK = re.compile(r"^reload master (\d+) at (\d+(?:\.\d+)?)$", re.MULTILINE)
MARK_BYTES = 1024
MARKS = 8  # marks kept in the file at most (one per master; the newest)


def reload_marks(text: str) -> dict[int, float]:
    """{master pid: wall time} of the reloads the lock file says were under way (pure)."""
    marks: dict[int, float] = {}
    for m in MARK.finditer(text):
        pid, t = int(m.group(1)), float(m.group(2))
        marks[pid] = max(t, marks.get(pid, t))
    return marks


def render_marks(marks: Mapping[int, float]) -> bytes:
    """The mark lines for `marks`, the newest `MARKS` (pure)."""
    newest = sorted(marks.items(), key=lambda m: m[1])[-MARKS:]
    return "".join(f"reload master {pid} at {t:.3f}\n" for pid, t in newest).encode()


def lock_name(real: str, *, legacy: bool = False) -> str:
    """The lock file's name for the FIFO's real path (pure): see the module docstring."""
    name = (re.sub(r"[^A-Za-z0-9._-]", "_", real.strip("/")) or "root")[-200:]
    if legacy:
        return f"{name}.lock"
    return f"{name}~{hashlib.sha256(os.fsencode(real)).hexdigest()[:16]}.lock"


def lock_path(fifo: Path, directory: Path | None = None, *, legacy: bool = False) -> Path:
    """The lock file of `fifo` (`legacy`: the name an older uwsgitune takes)."""
    name = lock_name(os.path.realpath(fifo), legacy=legacy)
    return (directory or lock_dir()) / name


def file_problem(path: Path, st: os.stat_result, trusted: frozenset[int]) -> str | None:
    """Why the opened lock file `path` (fstat `st`) must not be written, or None."""
    if not stat.S_ISREG(st.st_mode):
        why = "is not a regular file"
    elif st.st_nlink != 1:
        why = f"has {st.st_nlink} hard links (it would overwrite another file)"
    elif st.st_uid not in trusted:
        why = f"belongs to uid {st.st_uid}, not to you, root or the instance's user"
    else:
        return None
    return f"the lock {path} {why}: remove it, {FIX}"


def open_lock(path: Path, trusted: frozenset[int]) -> tuple[int, os.stat_result]:
    """The lock file, opened and checked, and its directory's stat; else LockProblem."""
    dfd, dir_st = open_dir(path.parent, trusted)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path.name, flags, 0o644, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LockProblem(f"the lock {path} is a symlink: remove it, {FIX}") from None
        raise LockProblem(
            f"cannot open the lock {path} ({exc.strerror}): run as the instance's user or "
            f"root, {FIX}"
        ) from None
    finally:
        os.close(dfd)
    problem = file_problem(path, os.fstat(fd), trusted)
    if problem:
        os.close(fd)
        raise LockProblem(problem)
    return fd, dir_st


def holder_line(data: bytes) -> str:
    """The holder's line of a lock file's bytes (a reload's mark may follow it), safe to
    print; "" when there is none (pure)."""
    return printable(data[:HOLDER_BYTES].decode(errors="replace").split("\n")[0].strip())


def holder_text(fd: int) -> str:
    """Who holds the lock, as its file says, safe to print on one line."""
    return holder_line(os.pread(fd, HOLDER_BYTES, 0)) or "unknown"


class ApplyLock:
    """`acquire()` returns None when held by us, else one line naming the holder."""

    def __init__(self, fifo: Path, role: str, directory: Path | None = None) -> None:
        self.path = lock_path(fifo, directory)
        self.legacy = lock_path(fifo, directory, legacy=True)  # an older uwsgitune's name
        self.fifo = fifo
        self.role = role
        self.fd: int | None = None
        self.legacy_fd: int | None = None
        self.holder = f"pid {os.getpid()} ({role})\n".encode()
        # {master pid: wall time}: the reloads the file marks as under way, ours and those
        # earlier holders left, until acted on (`clear_reload`)
        self.marks: dict[int, float] = {}
        # the marks found when the lock was taken, not yet handed to a resumer (`take_left`)
        self.left: dict[int, float] = {}

    def _take(self, path: Path, how: int, trusted: frozenset[int]) -> int | str:
        """`path` opened, checked and flocked (`how`), or why not (the holder, named)."""
        try:
            fd, dir_st = open_lock(path, trusted)
        except LockProblem as exc:
            return str(exc)
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except OSError:
            holder = holder_text(fd)
            os.close(fd)
            return f"{printable(str(self.fifo))} is already tuned by {holder} (lock {path})"
        if os.geteuid() == 0 and dir_st.st_uid != 0 and os.fstat(fd).st_uid == 0:
            os.fchown(fd, dir_st.st_uid, dir_st.st_gid)  # the service can take it after us
        return fd

    def acquire(self) -> str | None:
        if self.fd is not None:
            return None
        trusted = trusted_uids(self.fifo, os.geteuid())
        fd = self._take(self.path, fcntl.LOCK_EX, trusted)
        if isinstance(fd, str):
            return fd
        legacy = self._take(self.legacy, fcntl.LOCK_SH, trusted)  # an old actor's, shared
        if isinstance(legacy, str):
            os.close(fd)
            return legacy
        self.marks = {}
        for f in (legacy, fd):  # an old `tune` killed mid-reload marks the legacy file only
            for pid, t in reload_marks(
                os.pread(f, MARK_BYTES, 0).decode("ascii", "replace")
            ).items():
                self.marks[pid] = max(t, self.marks.get(pid, t))
        self.left = dict(self.marks)
        self.fd, self.legacy_fd = fd, legacy
        self._write()  # our line, the marks kept under it
        return None

    def take_left(self) -> dict[int, float]:
        """The marks found when the lock was taken, once: for the holder to act on (each
        stays in the file until `clear_reload`)."""
        left, self.left = self.left, {}
        return left

    def mark_reload(self, master_pid: int, wall: float) -> None:
        """Say `master_pid`'s workers are paused for a reload, for the next holder should
        this process die before its `r` (in both files: an old daemon reads the legacy
        one). Best effort: the audit log's intent is the record."""
        self.marks[master_pid] = wall
        self._write()

    def clear_reload(self, master_pid: int) -> None:
        """`master_pid`'s pool is no longer paused by a reload (its `r` went, or a holder
        resumed it): its mark goes; any other master's stays."""
        if self.marks.pop(master_pid, None) is not None:
            self._write()

    def _fds(self) -> tuple[int, ...]:
        return tuple(f for f in (self.fd, self.legacy_fd) if f is not None)

    def _write(self) -> None:
        data = self.holder + render_marks(self.marks)
        for fd in self._fds():
            with contextlib.suppress(OSError):
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))

    def release(self) -> None:
        for fd in self._fds():
            os.close(fd)  # closing drops the flock; the files stay (harmless)
        self.fd = self.legacy_fd = None

    @property
    def held(self) -> bool:
        return self.fd is not None
