"""The apply lock: one actor per instance, an `flock` on a lock file keyed by the FIFO's
real path, in a directory every actor shares and can trust.

Two daemons, a daemon and `uwsgitune tune --mode apply`, the TUI's `a` key, or `sweep` acting
on the same master would fight (each sees the other's `+`/`-` as the load moving). Whoever
applies holds an exclusive, non-blocking `flock` on `<lock dir>/<sanitised real FIFO
path>~<hash>.lock` and writes its pid and role there; the kernel drops the lock when the
holder dies, so a stale file never blocks anyone.

The file's name
---------------
The FIFO's real path with every character but `A-Za-z0-9._-` made `_`, its last 200
characters, then `~` and 16 hex digits of the SHA-256 of the whole real path: two FIFOs
whose sanitised names meet (`a b.fifo` and `a_b.fifo`, or the same last 200 characters)
get two locks. Before that hash, the name was `<sanitised>.lock` (the legacy name; `~` is
never in one, so no new name is ever an old one). An older uwsgitune (a daemon not yet
restarted after an upgrade) takes only the legacy name, exclusively; so a holder also
takes the legacy name's lock, shared (`LOCK_SH`): an old actor's exclusive lock and ours
exclude each other either way, while two new actors on FIFOs whose legacy names collide
both get their shared lock and are told apart by the hashed name. Both files get the
holder's line (an old actor names us from the legacy one), both get a reload's mark, and
the marks of both are read and kept: an old `tune` killed mid-reload leaves its mark in the
legacy file only. Both are released together.

The directory
-------------
Every actor must see the same file, so the directory never depends on a private /tmp
(systemd's `PrivateTmp=yes`) or on the session's environment. It is, in this order:

1. `$UWSGITUNE_LOCK_DIR`, when set;
2. `/run/uwsgitune`, when it exists (the unit's `RuntimeDirectory=uwsgitune`, owned by the
   service's user and kept with `RuntimeDirectoryPreserve=yes`) or when running as root
   (created 0755, root's);
3. `/tmp/uwsgitune-<uid>`: one user's actors on an instance of their own, with no service.
   Anyone can plant that name in /tmp before us (a link to a directory of root's, or of
   theirs, would split or steer the lock), so this one must be a real directory, checked
   with lstat before it is opened (O_NOFOLLOW|O_DIRECTORY, then the same inode), owned by
   us, and writable by nobody else: `fallback_problem`.

`$XDG_RUNTIME_DIR` is not used: a login shell has it, cron and `sudo -u` do not, so two
actors of one user could pick different directories.

A lock directory another user can write would let them swap the lock file (two holders),
or plant a link that makes us truncate a file of theirs. So the directory must belong to us,
to root or to the FIFO's owner (the instance's user, who controls the instance anyway), and
must not be writable by group or others unless sticky (the fallback: not even sticky). The
lock file is opened relative to that checked directory with O_NOFOLLOW, and must be a
regular file with one link, owned by us, root or the FIFO's owner. Root hands a lock file it
creates in the service user's directory over to that user, so the service can take the lock
after it. The holder's text is read from a file others may write: it is printed with its
control characters escaped.

A reload's mark
---------------
A reload pauses the workers before its `r` (actuate/reload.py), so a holder killed in
between leaves them paused. From its `p` until its `r` went, the holder writes a mark naming
the master's pid there, under its own line (`mark_reload`, `clear_reload`; the Reloader
does). The next holder, whoever it is (the daemon after `tune`, `sweep` or the TUI's `a`, or
the other way round; their audit logs differ), finds the marks when it takes the lock
(`left`) and resumes that master's pool before anything else (actuate/leftpaused.py). Taking
the lock keeps the marks in the file: one goes only when a holder has acted on it
(`clear_reload`), so a holder that could not resume the pool, or that sees another master,
leaves it for the next. A mark per master; at most `MARKS` are kept, the newest.

Who holds it, for `doctor`
--------------------------
`lock_info` reads the holder without taking the lock: taking it, even for a moment, could
make a daemon starting at that instant refuse to apply. The kernel lists every `flock` in
/proc/locks with the holder's pid and the file's device and inode: that is matched against
the lock file, which is only stat'ed and read.
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
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.core.redact import printable
from uwsgitune.nofollow import own_dir_problem

RUN_DIR = Path("/run/uwsgitune")
TMP = Path("/tmp")
FIX = "or set UWSGITUNE_LOCK_DIR to a directory every uwsgitune acting on this instance shares"
PROC_LOCKS = Path("/proc/locks")
HOLDER_BYTES = 200
MARK = re.compile(r"^reload master (\d+) at (\d+(?:\.\d+)?)$", re.MULTILINE)
MARK_BYTES = 1024
MARKS = 8  # marks kept in the file at most (one per master; the newest)


class LockProblem(Exception):
    """The lock cannot be used safely; `str()` names the path and the fix."""


# The directory -----------------------------------------------------------------------------------


def resolve_dir(env: Mapping[str, str], euid: int, run_dir_exists: bool) -> Path:
    """The lock directory (pure): the order in the module docstring."""
    given = env.get("UWSGITUNE_LOCK_DIR")
    if given:
        return Path(given)
    if run_dir_exists or euid == 0:
        return RUN_DIR
    return fallback_dir(euid)


def fallback_dir(euid: int) -> Path:
    """One user's lock directory when there is no service: `/tmp/uwsgitune-<uid>` (pure)."""
    return TMP / f"uwsgitune-{euid}"


def private_lock_dir(env: Mapping[str, str], directory: Path) -> str | None:
    """Under systemd (INVOCATION_ID set), a lock in /tmp is in the unit's PrivateTmp, where
    `tune`, the TUI's `a` key and `sweep` cannot see it: that directory, then (pure)."""
    if env.get("INVOCATION_ID") and directory.is_relative_to("/tmp"):
        return str(directory)
    return None


def lock_dir() -> Path:
    return resolve_dir(os.environ, os.geteuid(), RUN_DIR.is_dir())


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


def fallback_problem(path: Path, st: os.stat_result, euid: int) -> str | None:
    """Why the fallback directory `path` (its lstat `st`) is not ours alone, or None."""
    problem = own_dir_problem(st, euid)
    if problem is None:
        return None
    ours = stat.S_ISDIR(st.st_mode) and st.st_uid == euid  # only its mode is wrong
    fix = f"chmod go-w {path}" if ours else "remove it (uwsgitune makes a new one)"
    return f"the lock directory {path} {problem}, and anyone can plant that name: {fix}, {FIX}"


def _unusable(directory: Path, exc: OSError) -> LockProblem:
    return LockProblem(f"cannot use the lock directory {directory} ({exc.strerror}): {FIX}")


def _open_fallback(directory: Path) -> tuple[int, os.stat_result]:
    """`/tmp/uwsgitune-<uid>`: lstat'ed, then opened without following a link, and the same
    directory (a swap between the two fails)."""
    euid = os.geteuid()
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o755)
        st = os.lstat(directory)
        problem = fallback_problem(directory, st, euid)
        if problem:
            raise LockProblem(problem)
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _unusable(directory, exc) from None
    now = os.fstat(dfd)
    problem = fallback_problem(directory, now, euid)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or problem:
        os.close(dfd)
        raise LockProblem(problem or f"the lock directory {directory} was swapped: {FIX}")
    return dfd, now


def open_dir(directory: Path, trusted: frozenset[int]) -> tuple[int, os.stat_result]:
    """The lock directory, opened and checked, and its stat; else LockProblem."""
    if directory == fallback_dir(os.geteuid()):
        return _open_fallback(directory)
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _unusable(directory, exc) from None
    st = os.fstat(dfd)
    problem = dir_problem(directory, st, trusted)
    if problem:
        os.close(dfd)
        raise LockProblem(problem)
    return dfd, st


# The file, its holder and its marks --------------------------------------------------------------


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


# Who holds it, read without taking it (for `doctor`) ---------------------------------------------


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
