"""One actor per instance: an `flock` on a lock file keyed by the FIFO's real path.

Two daemons, a daemon and `uwsgitune tune --mode apply`, the TUI's `a` key, or `sweep` acting
on the same master would fight (each sees the other's `+`/`-` as the load moving). Whoever
applies holds an exclusive, non-blocking `flock` on `<lock dir>/<sanitised real FIFO
path>.lock` and writes its pid and role there; the kernel drops the lock when the holder
dies, so a stale file never blocks anyone.

Every actor must see the same file, so the directory never depends on a private /tmp
(systemd's `PrivateTmp=yes`) or on the session's environment. It is, in this order:

1. `$UWSGITUNE_LOCK_DIR`, when set;
2. `/run/uwsgitune`, when it exists (the unit's `RuntimeDirectory=uwsgitune`, owned by the
   service's user and kept with `RuntimeDirectoryPreserve=yes`) or when running as root
   (created 0755, root's);
3. `/tmp/uwsgitune-<uid>`: one user's actors on an instance of their own, with no service.

`$XDG_RUNTIME_DIR` is not used: a login shell has it, cron and `sudo -u` do not, so two
actors of one user could pick different directories.

A lock directory another user can write would let them swap the lock file (two holders),
or plant a link that makes us truncate a file of theirs. So the directory must belong to us,
to root or to the FIFO's owner (the instance's user, who controls the instance anyway), and
must not be writable by group or others unless sticky. The lock file is opened relative to
that checked directory with O_NOFOLLOW, and must be a regular file with one link, owned by
one of those uids. Root hands a lock file it creates in the service user's directory over
to that user, so the service can take the lock after it. The holder's text is read from a
file others may write: it is printed with its control characters escaped.

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
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from uwsgitune.core.redact import printable

RUN_DIR = Path("/run/uwsgitune")
HOLDER_BYTES = 200
FIX = "or set UWSGITUNE_LOCK_DIR to a directory every uwsgitune acting on this instance shares"


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


class LockProblem(Exception):
    """The lock cannot be used safely; `str()` names the path and the fix."""


def resolve_dir(env: Mapping[str, str], euid: int, run_dir_exists: bool) -> Path:
    """The lock directory (pure): the order in the module docstring."""
    given = env.get("UWSGITUNE_LOCK_DIR")
    if given:
        return Path(given)
    if run_dir_exists or euid == 0:
        return RUN_DIR
    return Path(f"/tmp/uwsgitune-{euid}")


def private_lock_dir(env: Mapping[str, str], directory: Path) -> str | None:
    """Under systemd (INVOCATION_ID set), a lock in /tmp is in the unit's PrivateTmp, where
    `tune`, the TUI's `a` key and `sweep` cannot see it: that directory, then (pure)."""
    if env.get("INVOCATION_ID") and directory.is_relative_to("/tmp"):
        return str(directory)
    return None


def lock_dir() -> Path:
    return resolve_dir(os.environ, os.geteuid(), RUN_DIR.is_dir())


def lock_path(fifo: Path, directory: Path | None = None) -> Path:
    real = os.path.realpath(fifo)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", real.strip("/")) or "root"
    return (directory or lock_dir()) / f"{name[-200:]}.lock"


def trusted_uids(fifo: Path, euid: int) -> frozenset[int]:
    """Who may own the lock directory and file: us, root and the FIFO's owner."""
    try:
        return frozenset({euid, 0, os.stat(fifo).st_uid})
    except OSError:
        return frozenset({euid, 0})


def dir_problem(path: Path, st: os.stat_result, trusted: frozenset[int]) -> str | None:
    """Why `path` (stat `st`) is not a safe lock directory, or None."""
    if not stat.S_ISDIR(st.st_mode):
        return f"the lock directory {path} is not a directory: remove it, {FIX}"
    if st.st_uid not in trusted:
        return (
            f"the lock directory {path} belongs to uid {st.st_uid}, not to you, root or the "
            f"instance's user, who could swap the lock file: chown it, {FIX}"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return (
            f"the lock directory {path} is writable by group or others (mode {mode:04o}), "
            f"who could swap the lock file: chmod go-w {path}, {FIX}"
        )
    return None


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


def _open_dir(directory: Path, trusted: frozenset[int]) -> tuple[int, os.stat_result]:
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise LockProblem(
            f"cannot use the lock directory {directory} ({exc.strerror}): {FIX}"
        ) from None
    st = os.fstat(dfd)
    problem = dir_problem(directory, st, trusted)
    if problem:
        os.close(dfd)
        raise LockProblem(problem)
    return dfd, st


def open_lock(path: Path, trusted: frozenset[int]) -> tuple[int, os.stat_result]:
    """The lock file, opened and checked, and its directory's stat; else LockProblem."""
    dfd, dir_st = _open_dir(path.parent, trusted)
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
        self.fifo = fifo
        self.role = role
        self.fd: int | None = None
        self.holder = f"pid {os.getpid()} ({role})\n".encode()
        # {master pid: wall time}: the reloads the file marks as under way, ours and those
        # earlier holders left, until acted on (`clear_reload`)
        self.marks: dict[int, float] = {}
        # the marks found when the lock was taken, not yet handed to a resumer (`take_left`)
        self.left: dict[int, float] = {}

    def acquire(self) -> str | None:
        if self.fd is not None:
            return None
        euid = os.geteuid()
        try:
            fd, dir_st = open_lock(self.path, trusted_uids(self.fifo, euid))
        except LockProblem as exc:
            return str(exc)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = holder_text(fd)
            os.close(fd)
            return f"{printable(str(self.fifo))} is already tuned by {holder} (lock {self.path})"
        if euid == 0 and dir_st.st_uid != 0 and os.fstat(fd).st_uid == 0:
            os.fchown(fd, dir_st.st_uid, dir_st.st_gid)  # the service can take it after us
        self.marks = reload_marks(os.pread(fd, MARK_BYTES, 0).decode(errors="replace"))
        self.left = dict(self.marks)
        self.fd = fd
        self._write()  # our line, the marks kept under it
        return None

    def take_left(self) -> dict[int, float]:
        """The marks found when the lock was taken, once: for the holder to act on (each
        stays in the file until `clear_reload`)."""
        left, self.left = self.left, {}
        return left

    def mark_reload(self, master_pid: int, wall: float) -> None:
        """Say `master_pid`'s workers are paused for a reload, for the next holder should
        this process die before its `r`. Best effort: the audit log's intent is the record."""
        self.marks[master_pid] = wall
        self._write()

    def clear_reload(self, master_pid: int) -> None:
        """`master_pid`'s pool is no longer paused by a reload (its `r` went, or a holder
        resumed it): its mark goes; any other master's stays."""
        if self.marks.pop(master_pid, None) is not None:
            self._write()

    def _write(self) -> None:
        if self.fd is not None:
            data = self.holder + render_marks(self.marks)
            with contextlib.suppress(OSError):
                os.pwrite(self.fd, data, 0)
                os.ftruncate(self.fd, len(data))

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock; the file stays (harmless)
            self.fd = None

    @property
    def held(self) -> bool:
        return self.fd is not None
