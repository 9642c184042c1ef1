"""Reading and writing the ini files uwsgitune touches: the user's ini and the override.

Reading: every ini is read as UTF-8 (`read_ini`); anything else is refused in one line that
names the file and the byte, never a traceback.

Writing the override (`write_atomic`): a temporary file in the same directory (fsync, rename),
the previous version kept as `<file>.prev`. uWSGI re-reads the override at each reload, maybe
as another user than uwsgitune (`uid =` drops the master's privileges), so:

- a replaced file keeps the previous file's mode, and its owner and group where we may set
  them (as root; the group when it is one of ours). When the owner cannot be kept and the
  mode would then shut it out (no group or other read), nothing is written.
- a new file is 0644: it holds worker counts and `listen`, no secret, and uWSGI's user must
  read it whatever uwsgitune's umask is.
- the directory must not be writable by others (they could swap the file uWSGI reads); a
  sticky one (like /tmp) only when no other user owns the names we write.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import NamedTuple

from uwsgitune.core.ini import NotUtf8, decode_ini
from uwsgitune.errors import UwsgituneError

NEW_MODE = 0o644


class OverrideError(UwsgituneError, ValueError):
    """An override that must not be written; the message lists every problem."""


class SetupError(OverrideError):
    """The setup itself is wrong (a file missing, an include absent): no retry can succeed,
    so the tuner stops applying and says what to fix."""


class IniError(UwsgituneError, ValueError):
    """An ini that cannot be read or holds a bad number; the message names it."""


class IniEncodingError(SetupError, IniError):
    """An ini that is not UTF-8 (the user's or the override): no retry can read it."""

    code = 2


def read_ini(path: Path) -> str:
    """The text of the ini at `path`; IniEncodingError when it is not UTF-8 (an OSError as
    raised, for the caller to name)."""
    try:
        return decode_ini(path.read_bytes(), str(path))
    except NotUtf8 as exc:
        raise IniEncodingError(str(exc)) from None


class Access(NamedTuple):
    """What a written file gets: mode, and owner and group (-1: leave as created)."""

    mode: int
    uid: int
    gid: int


def access_like(path: Path, old: os.stat_result | None) -> Access:
    """The mode and owner the new `path` gets to stay readable as `old` was (see above).
    Raises SetupError when the owner cannot be kept and the mode would shut it out."""
    if old is None:
        return Access(NEW_MODE, -1, -1)
    mode, me, root = stat.S_IMODE(old.st_mode) & 0o777, os.geteuid(), os.geteuid() == 0
    uid = old.st_uid if root and old.st_uid != me else -1
    ours = old.st_gid in (os.getegid(), *os.getgroups())
    gid = old.st_gid if old.st_gid != os.getegid() and (root or ours) else -1
    kept_group = root or ours
    if old.st_uid != me and not root and not (mode & 0o004 or (kept_group and mode & 0o040)):
        raise SetupError(
            f"{path} is owned by uid {old.st_uid} (mode {mode:04o}); rewritten by uid {me} "
            f"it could not read it: run uwsgitune as uid {old.st_uid} or root, "
            f"or `chmod o+r {path}`"
        )
    return Access(mode, uid, gid)


def check_directory(path: Path) -> None:
    """Refuse (SetupError) a directory others may write, where the file uWSGI reads could be
    swapped: group or other writable without the sticky bit, or sticky (like /tmp) with a
    name we write already owned by another user."""
    where = path.parent
    st = os.stat(where)
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o022:
        return
    if not mode & stat.S_ISVTX:
        raise SetupError(
            f"{where} is writable by others (mode {mode:04o}), who could swap the override "
            f"uWSGI reads: `chmod go-w {where}`, or put the override in a private directory"
        )
    for name in (path, path.with_name(path.name + ".prev")):
        try:
            owner = os.lstat(name).st_uid
        except FileNotFoundError:
            continue
        if owner not in (0, os.geteuid()):
            raise SetupError(
                f"{name} is owned by uid {owner} in the shared directory {where}: refused; "
                "put the override in a directory only uWSGI's user and uwsgitune can write"
            )


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def write_atomic(path: Path, text: str, *, keep_prev: bool = True) -> None:
    """Replace `path` with `text` atomically; the old content (if any) goes to `<path>.prev`
    unless `keep_prev` is False (a roll-back keeps the `.prev` it found). Nothing is written
    when the directory is unsafe, the old file is not UTF-8, or its owner would lose it."""
    check_directory(path)
    old = _stat(path)
    access = access_like(path, old)
    prev = path.with_name(path.name + ".prev")
    clean_temps(path)
    if keep_prev and old is not None:
        data = path.read_bytes()
        read_ini(path)  # a file someone saved in another encoding: say so, keep it
        _replace_with(prev, data, access_like(prev, _stat(prev) or old))
    _replace_with(path, text.encode(), access)


def clean_temps(path: Path) -> None:
    """Remove temporaries a killed writer left behind (`.<name>.XXXX`; never read by uWSGI)."""
    for name in (path.name, path.name + ".prev"):
        for tmp in path.parent.glob(f".{name}.*"):
            if len(tmp.name) == len(name) + 10:  # mkstemp's 8 random characters
                tmp.unlink(missing_ok=True)


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (a file size limit, a signal): write the rest, or
    raise (the caller removes the temporary; a short file is never renamed into place)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write: nothing written")
        view = view[n:]


def _replace_with(path: Path, data: bytes, access: Access) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        try:
            if access.uid != -1 or access.gid != -1:
                os.fchown(fd, access.uid, access.gid)
            os.fchmod(fd, access.mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def restore(path: Path) -> bool:
    """Put `<path>.prev` back. False when there is no previous version."""
    prev = path.with_name(path.name + ".prev")
    if not prev.exists():
        return False
    _replace_with(path, prev.read_bytes(), access_like(path, _stat(path) or _stat(prev)))
    return True
