"""Files uwsgitune writes where another user may write: opened without following a link.

uwsgitune often runs as root beside an app server whose user can be compromised, and it
writes into directories that user can write (the unit's `StateDirectory=`, /tmp, a shared
directory given as `--out`). Whoever writes a directory decides what its names are: a
symlink to /etc/shadow, a hard link to a sudoers drop-in, a FIFO that never opens. A path
that root resolves from the top at each step lets them steer every write and every read.

So every file uwsgitune writes goes through one shape:

1. The directory is opened once (`open_dir`), and everything after is relative to that fd:
   a directory renamed or swapped after the open does not move our files with it. Where the
   directory itself sits under a name another user controls (/tmp's `uwsgitune-<uid>`, a
   sweep's `--out`), its last component is opened with O_NOFOLLOW too (`follow=False`).
2. A file is opened relative to the directory fd with O_NOFOLLOW (a link there fails with
   ELOOP, whatever it points to) and O_NONBLOCK (a planted FIFO cannot hang the open), then
   checked with `fstat` on the fd we hold, never by path: a regular file, with one link (a
   second name could be anyone's file), and, where the caller asks, owned by one of the
   given uids. Owner and mode are always those of the name itself (lstat/fstat), never a
   link's target.
3. A new file is created O_CREAT|O_EXCL|O_NOFOLLOW: it is ours and empty, or the create
   fails. A temporary file gets a random name the same way (`Directory.temp`), and is
   renamed over the target within the directory fd (`os.replace` with `src_dir_fd` and
   `dst_dir_fd`, renameat(2)): a rename replaces a link at the target, it never follows it.

A refusal is an `UnsafeFile`: one line naming the file, what is wrong with it, and the fix
the caller gives for that file. A directory where a file was expected stays the ordinary
IsADirectoryError (nobody's attack: say it as the OSError it is).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Collection
from pathlib import Path
from types import TracebackType

from uwsgitune.core.redact import printable
from uwsgitune.errors import UwsgituneError

FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
TEMP_TRIES = 100


class UnsafeFile(UwsgituneError):
    """A file (or directory) uwsgitune must not use: one line, the name, why and the fix."""

    code = 2  # a file the user named or set up: bad input, not a failure of the run


def kind(st: os.stat_result) -> str:
    """What a name is, for a message: "a FIFO", "a directory", ... (pure)."""
    mode = st.st_mode
    for test, what in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return what
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def file_problem(st: os.stat_result, owners: Collection[int] | None = None) -> str | None:
    """Why the opened file `st` (its fstat) must not be used, or None (pure)."""
    if not stat.S_ISREG(st.st_mode):
        return f"is not a regular file ({kind(st)})"
    if st.st_nlink != 1:
        return f"has {st.st_nlink} hard links (another name of the same file could be anyone's)"
    if owners is not None and st.st_uid not in owners:
        who = " or ".join(f"uid {u}" if u else "root" for u in sorted(set(owners)))
        return f"belongs to uid {st.st_uid}, not to {who}"
    return None


def writable_by_others(st: os.stat_result) -> bool:
    """Group or others may write (pure)."""
    return bool(stat.S_IMODE(st.st_mode) & 0o022)


class Directory:
    """An open directory: its files are opened, created, renamed and removed relative to
    its fd, never through a link. A context manager (closes the fd)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.stat = os.fstat(fd)

    def __enter__(self) -> Directory:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def lstat(self, name: str) -> os.stat_result | None:
        """The name itself (a link is not followed); None when there is none."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def refusal(self, name: str, why: str, fix: str) -> UnsafeFile:
        return UnsafeFile(f"{printable(str(self.path / name))} {why}: refused; {fix}")

    def link_why(self, name: str) -> str:
        """`is a symlink (to TARGET)`, for a message."""
        try:
            target = os.readlink(name, dir_fd=self.fd)
        except OSError:
            return "is a symlink"
        return f"is a symlink (to {printable(target)})"

    def open(
        self,
        name: str,
        flags: int,
        *,
        fix: str,
        owners: Collection[int] | None = None,
        mode: int = 0o600,
    ) -> tuple[int, os.stat_result]:
        """`name` opened with `flags` (O_NOFOLLOW, O_NONBLOCK added) and its fstat; refused
        (UnsafeFile) unless a regular file with one link, owned by one of `owners` if given.
        FileNotFoundError as raised, for the caller to decide."""
        try:
            fd = os.open(name, flags | FILE_FLAGS, mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self.refusal(name, self.link_why(name), fix) from None
            if exc.errno == errno.ENXIO:  # a FIFO no one reads, opened for writing
                raise self.refusal(name, "is not a regular file (a FIFO)", fix) from None
            raise
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(self.path / name))
        problem = file_problem(st, owners)
        if problem is not None:
            os.close(fd)
            raise self.refusal(name, problem, fix)
        return fd, st

    def read(
        self, name: str, *, fix: str, owners: Collection[int] | None = None
    ) -> tuple[bytes, os.stat_result] | None:
        """The bytes and fstat of `name` (checked as `open` does); None when it is missing."""
        try:
            fd, st = self.open(name, os.O_RDONLY, fix=fix, owners=owners)
        except FileNotFoundError:
            return None
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            return b"".join(chunks), st
        finally:
            os.close(fd)

    def create(self, name: str, flags: int = os.O_WRONLY, mode: int = 0o600) -> int:
        """A new file, ours and empty: O_CREAT|O_EXCL|O_NOFOLLOW. FileExistsError when any
        name is there (a link too, dangling or not)."""
        return os.open(name, flags | os.O_CREAT | os.O_EXCL | FILE_FLAGS, mode, dir_fd=self.fd)

    def temp(self, prefix: str, mode: int = 0o600) -> tuple[int, str]:
        """A new temporary file `<prefix>XXXXXXXX` (8 random characters, as mkstemp), opened
        for writing; its fd and name."""
        for _ in range(TEMP_TRIES):
            name = prefix + secrets.token_hex(4)
            try:
                return self.create(name, os.O_RDWR, mode), name
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no free temporary name", str(self.path / prefix))

    def replace(self, src: str, dst: str) -> None:
        """Rename `src` over `dst` within this directory (a link at `dst` is replaced, not
        followed)."""
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def fsync(self) -> None:
        os.fsync(self.fd)


def open_dir(path: Path, *, follow: bool = True, fix: str = "") -> Directory:
    """The directory `path`, open. `follow=False`: its last component must not be a link
    (UnsafeFile naming it, with `fix`). OSError as raised otherwise (a missing directory)."""
    try:
        fd = os.open(path, DIR_FLAGS | (0 if follow else os.O_NOFOLLOW))
    except OSError as exc:
        if follow or exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:
            st = os.lstat(path)
        except OSError:
            raise exc from None
        why = "is a symlink" if stat.S_ISLNK(st.st_mode) else f"is {kind(st)}"
        raise UnsafeFile(f"{printable(str(path))} {why}: refused; {fix}") from None
    return Directory(path, fd)


def own_dir_problem(st: os.stat_result, euid: int) -> str | None:
    """Why the directory `st` (lstat or fstat) is not one only we write, or None (pure):
    a link, not a directory, another owner, group or other write (sticky or not)."""
    if not stat.S_ISDIR(st.st_mode):
        return f"is {kind(st)}"
    if st.st_uid != euid:
        return f"belongs to uid {st.st_uid}, not to uid {euid}"
    if writable_by_others(st):
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def own_dir(path: Path, *, fix: str) -> Directory:
    """The existing directory `path`, opened with O_NOFOLLOW|O_DIRECTORY and checked on the
    fd (`own_dir_problem`): a real directory we own that nobody else can write. UnsafeFile
    naming it and `fix` otherwise; OSError (FileNotFoundError) as raised."""
    d = open_dir(path, follow=False, fix=fix)
    problem = own_dir_problem(d.stat, os.geteuid())
    if problem is not None:
        d.close()
        raise UnsafeFile(f"{printable(str(path))} {problem}: refused; {fix}")
    return d


def new_dir(path: Path, *, fix: str, mode: int = 0o700) -> Directory:
    """A directory made now at `path` (mode 0700: nobody else can enter it), opened and
    checked as `own_dir` (a name swapped in between is refused). FileExistsError when any
    name is there already."""
    os.mkdir(path, mode)
    return own_dir(path, fix=fix)
