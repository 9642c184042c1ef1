"""Can uWSGI's user read a file? For `doctor`: at a reload the master re-reads its ini and
the override as the user it runs as (`uid =` drops root), so a file only uwsgitune's user
can read kills the instance at the next reload.

The user comes from the master's /proc/<pid>/status (its filesystem uid and groups), else
from the ini's `uid =`/`gid =`. The answer follows the mode bits of the file and of every
directory above it (search permission); ACLs are not read, so a file an ACL opens is
reported as unreadable (the message names the bits it looked at).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path
from typing import NamedTuple


class Reader(NamedTuple):
    uid: int
    gids: frozenset[int]
    source: str  # where it came from, for the message: "master 1234", "the ini's uid ="


def reader_from_proc(pid: int, proc: Path = Path("/proc")) -> Reader | None:
    """The master's filesystem uid and groups (None when /proc cannot tell)."""
    try:
        lines = (proc / str(pid) / "status").read_text(errors="replace").splitlines()
    except OSError:
        return None
    fields = {k: v.split() for k, _, v in (line.partition(":") for line in lines)}
    try:
        uid, gid = int(fields["Uid"][3]), int(fields["Gid"][3])
        groups = {int(g) for g in fields.get("Groups", [])}
    except (KeyError, IndexError, ValueError):
        return None
    return Reader(uid, frozenset({gid, *groups}), f"master {pid}")


def _id(value: str, table: str) -> int | None:
    if value.isdigit():
        return int(value)
    try:
        return pwd.getpwnam(value).pw_uid if table == "passwd" else grp.getgrnam(value).gr_gid
    except KeyError:
        return None


def reader_from_ini(config: dict[str, str]) -> Reader | None:
    """The user the ini's `uid =` (and `gid =`) names; None without `uid =`."""
    uid = _id(config.get("uid", ""), "passwd") if config.get("uid") else None
    if uid is None:
        return None
    gid = _id(config.get("gid", ""), "group") if config.get("gid") else None
    if gid is None:
        try:
            gid = pwd.getpwuid(uid).pw_gid
        except KeyError:
            gid = None
    return Reader(uid, frozenset() if gid is None else frozenset({gid}), "the ini's `uid =`")


def _allows(st: os.stat_result, reader: Reader, bit: int) -> bool:
    """`bit` is the owner's (0o400 read, 0o100 search); the group and other bits follow."""
    if reader.uid == 0:
        return True
    if st.st_uid == reader.uid:
        return bool(st.st_mode & bit)
    if st.st_gid in reader.gids:
        return bool(st.st_mode & (bit >> 3))
    return bool(st.st_mode & (bit >> 6))


def _blocked(path: Path, reader: Reader, bit: int) -> tuple[str, os.stat_result | None]:
    """("", stat) when `reader` has `bit` on `path`; else what stops it (and the stat)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}", None
    if _allows(st, reader, bit):
        return "", st
    mode = stat.S_IMODE(st.st_mode)
    verb = "enter" if bit == 0o100 else "read"
    return (
        f"uid {reader.uid} cannot {verb} {path} (mode {mode:04o}, owner {st.st_uid}:{st.st_gid})",
        st,
    )


def why_unreadable(path: Path, reader: Reader) -> tuple[str, str] | None:
    """None when `reader` can read `path`; else (what stops it, the fix)."""
    target = Path(os.path.abspath(path))
    for parent in reversed(target.parents):
        why, st = _blocked(parent, reader, 0o100)
        if why:
            return why, (f"chmod o+x {parent}" if st else f"create {parent}")
    why, st = _blocked(target, reader, 0o400)
    if not why:
        return None
    if st is None:
        return why, f"create {target}"
    return (
        f"{why}: the next reload fails",
        f"chown {reader.uid} {target}   (or: chmod o+r {target})",
    )
