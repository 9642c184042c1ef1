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

Root rewrites the override in a directory uWSGI's user may write (the unit's
`StateDirectory=`), and that user may be compromised. So nothing here resolves a name
through a link (uwsgitune/nofollow.py): the directory is opened once, and the override,
`.prev` and the temporary file are opened relative to its fd with O_NOFOLLOW. The override
and `.prev` must be regular files with one link (a link to /etc/shadow, or a second name
of it, would have root copy it), and their owner and mode are their own (fstat), never a
link's target's. `.prev` gets the owner and mode of the file whose bytes it keeps (the old
override), never those of whatever sat at `.prev`. A temporary is created
O_CREAT|O_EXCL|O_NOFOLLOW and renamed over its target within the directory fd (renameat:
a link planted at `.prev` is replaced, never followed). Anything else is a SetupError whose
one line names the file and the fix: an override configuration management installed as a
symlink is refused too (give the link's target as the override).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from uwsgitune.core.ini import NotUtf8, decode_ini
from uwsgitune.errors import UwsgituneError
from uwsgitune.nofollow import Directory, UnsafeFile, open_dir

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
    return decode_or_refuse(path.read_bytes(), path)


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


OVERRIDE_FIX = (
    "the override must be a regular file with one name (a link could point root at any "
    "file): install it as one, or give the link's target as the override"
)
PREV_FIX = "the previous override is kept only as a regular file of its own: remove it"


def _check_directory(d: Directory, path: Path) -> None:
    """Refuse (SetupError) the open directory `d` when others may write it and could swap
    the file uWSGI reads: group or other writable without the sticky bit, or sticky (like
    /tmp) with a name we write already owned by another user. Checked on the fd we write
    through, not on a path."""
    where, mode = path.parent, stat.S_IMODE(d.stat.st_mode)
    if not mode & 0o022:
        return
    if not mode & stat.S_ISVTX:
        raise SetupError(
            f"{where} is writable by others (mode {mode:04o}), who could swap the override "
            f"uWSGI reads: `chmod go-w {where}`, or put the override in a private directory"
        )
    for name in (path.name, path.name + ".prev"):
        st = d.lstat(name)
        if st is not None and st.st_uid not in (0, os.geteuid()):
            raise SetupError(
                f"{where / name} is owned by uid {st.st_uid} in the shared directory {where}: "
                "refused; put the override in a directory only uWSGI's user and uwsgitune "
                "can write"
            )


@contextmanager
def override_dir(path: Path, *, writing: bool = True) -> Iterator[Directory]:
    """The override's directory, open, and checked for `writing` (`_check_directory`);
    UnsafeFile becomes SetupError (the setup is wrong: no retry can succeed). OSError as
    raised."""
    with open_dir(path.parent) as d:
        if writing:
            _check_directory(d, path)
        try:
            yield d
        except UnsafeFile as exc:
            raise SetupError(str(exc)) from None


def check_directory(path: Path) -> None:
    """Refuse (SetupError) the directory of the override `path` others may write."""
    with override_dir(path):
        pass


def _fix(name: str) -> str:
    return PREV_FIX if name.endswith(".prev") else OVERRIDE_FIX


def _read(d: Directory, name: str) -> tuple[bytes, os.stat_result] | None:
    """The override (or `.prev`) and its own fstat, never through a link; None if missing."""
    return d.read(name, fix=_fix(name))


def check_override(path: Path) -> None:
    """Refuse (SetupError), before anything is written, an override or `.prev` that is a
    link or has a second name, or a directory others could swap them in (doctor, plan)."""
    with override_dir(path) as d:
        for name in (path.name, path.name + ".prev"):
            if d.lstat(name) is not None:
                fd, _ = d.open(name, os.O_RDONLY, fix=_fix(name))
                os.close(fd)


def override_refusal(path: Path) -> tuple[str | None, str | None]:
    """What a write of the override would refuse, as the tuner says it (for doctor):
    ("dir", line) for its directory, ("file", line) for the override or `.prev`, (None,
    None) for nothing, or no directory yet (the include check names the file to create)."""
    for where, check in (("dir", check_directory), ("file", check_override)):
        try:
            check(path)
        except SetupError as exc:
            return where, str(exc)
        except OSError:
            break
    return None, None


def override_bytes(path: Path) -> bytes | None:
    """The override's bytes, never through a link (SetupError); None when it is missing."""
    with override_dir(path, writing=False) as d:
        found = _read(d, path.name)
    return None if found is None else found[0]


def write_atomic(path: Path, text: str, *, keep_prev: bool = True) -> None:
    """Replace `path` with `text` atomically; the old content (if any) goes to `<path>.prev`
    unless `keep_prev` is False (a roll-back keeps the `.prev` it found). Nothing is written
    when the directory is unsafe, the old file is a link, has a second name or is not UTF-8,
    or its owner would lose it."""
    with override_dir(path) as d:
        access_like(path, d.lstat(path.name))  # an owner shut out: said before a read fails
        old = _read(d, path.name)
        access = access_like(path, old[1] if old else None)
        _clean_temps(d, path.name)
        if keep_prev and old is not None:
            decode_or_refuse(old[0], path)  # a file someone saved in another encoding: keep it
            prev = path.with_name(path.name + ".prev")
            _replace_with(d, prev.name, old[0], access_like(prev, old[1]))
        _replace_with(d, path.name, text.encode(), access)


def decode_or_refuse(data: bytes, path: Path) -> str:
    """The text of the ini `path` (its bytes `data`); IniEncodingError unless UTF-8."""
    try:
        return decode_ini(data, str(path))
    except NotUtf8 as exc:
        raise IniEncodingError(str(exc)) from None


def clean_temps(path: Path) -> None:
    """Remove temporaries a killed writer left behind (`.<name>.XXXXXXXX`; never read by
    uWSGI), in the override's directory."""
    with override_dir(path) as d:
        _clean_temps(d, path.name)


def _clean_temps(d: Directory, base: str) -> None:
    names = d.names()
    for name in (base, base + ".prev"):
        for found in names:
            if found.startswith(f".{name}.") and len(found) == len(name) + 10:
                d.unlink(found)  # 8 random characters, as `Directory.temp` makes them


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (a file size limit, a signal): write the rest, or
    raise (the caller removes the temporary; a short file is never renamed into place)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write: nothing written")
        view = view[n:]


def _replace_with(d: Directory, name: str, data: bytes, access: Access) -> None:
    """`name` in `d` replaced by a new file holding `data`: a temporary created O_EXCL and
    O_NOFOLLOW, written, fsynced, renamed over `name` (renameat: a link there is replaced)."""
    fd, tmp = d.temp(f".{name}.")
    try:
        try:
            if access.uid != -1 or access.gid != -1:
                os.fchown(fd, access.uid, access.gid)
            os.fchmod(fd, access.mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        d.replace(tmp, name)
    except BaseException:
        d.unlink(tmp)
        raise
    d.fsync()


def restore(path: Path) -> bool:
    """Put `<path>.prev` back. False when there is no previous version. Neither file is
    read or stat'ed through a link (SetupError)."""
    with override_dir(path) as d:
        prev = _read(d, path.name + ".prev")
        if prev is None:
            return False
        current = _read(d, path.name)
        _replace_with(d, path.name, prev[0], access_like(path, (current or prev)[1]))
    return True
