"""The apply lock's directory (actuate/lock.py): which one, and whether it can be trusted.

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
must not be writable by group or others unless sticky (the fallback: not even sticky).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from uwsgitune.nofollow import own_dir_problem

RUN_DIR = Path("/run/uwsgitune")
TMP = Path("/tmp")
FIX = "or set UWSGITUNE_LOCK_DIR to a directory every uwsgitune acting on this instance shares"


class LockProblem(Exception):
    """The lock cannot be used safely; `str()` names the path and the fix."""


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
        raise LockProblem(
            f"cannot use the lock directory {directory} ({exc.strerror}): {FIX}"
        ) from None
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
        raise LockProblem(
            f"cannot use the lock directory {directory} ({exc.strerror}): {FIX}"
        ) from None
    st = os.fstat(dfd)
    problem = dir_problem(directory, st, trusted)
    if problem:
        os.close(dfd)
        raise LockProblem(problem)
    return dfd, st
