"""The ini files uwsgitune reads and writes: the user's ini, found where /proc says, read
as uWSGI merges it; the options a master was given outside it; the override uwsgitune owns,
validated and written without following a link.

The user's ini ends with `ini = <override>`, so the keys of the override win at the next
reload; the user's own file is never edited.

Reading
-------
Every ini is read as UTF-8 (`read_ini`); anything else is refused in one line that names the
file and the byte, never a traceback. The user's ini is read as uWSGI reads it, includes
expanded in place and the last value winning (`load_config`). When it is not given, it is
the one on the master's command line (`ini_from_proc`). A master may also be given options
on its command line (`--key` or `--key=value`) and in its environment (`UWSGI_KEY=value`,
which uWSGI reads as `key`): `master_options`, pure but for the two reads of /proc.

`lazy` (not `lazy-apps`) is the one that matters to a reload: under it, uWSGI's `r`
(`grace_them_all`, core/uwsgi.c) only sends each worker SIGHUP and returns. The master is
not executed again and never reads its ini again, so an override written for a reload
changes nothing: processes and cheaper stay as they were (measured). `lazy-apps` loads the
app in each worker the same way and reloads normally (`lazy_where`, `lazy_refusal`).

Validating
----------
Before a file is written, the configuration uWSGI would read (the user's merged ini with the
override's keys on top) is validated, because a bad ini plus `r` kills the instance:
cheaper >= processes, listen > somaxconn, a thread count uWSGI refuses (`problems`).

Writing the override
--------------------
`write_atomic`: a temporary file in the same directory (fsync, rename), the previous version
kept as `<file>.prev` for `restore`. uWSGI re-reads the override at each reload, maybe as
another user than uwsgitune (`uid =` drops the master's privileges), so:

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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from uwsgitune.core.ini import NotUtf8, decode_ini, parse_ini
from uwsgitune.errors import UwsgituneError
from uwsgitune.nofollow import Directory, UnsafeFile, open_dir
from uwsgitune.sources.procfs import PROC

NEW_MODE = 0o644
KNOWN_ALGOS = ("spare", "backlog", "busyness", "manual")
DEFAULT_LISTEN = 100
MAX_THREADS = 256  # per worker; each thread is a core with its own buffers and stack
OFF = ("false", "off", "no")  # uwsgi_opt_true: these (any case) or "0" turn a flag off


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


# Reading: the user's ini, where the master says it is, and what it was given besides -------------


def read_ini(path: Path) -> str:
    """The text of the ini at `path`; IniEncodingError when it is not UTF-8 (an OSError as
    raised, for the caller to name)."""
    return decode_or_refuse(path.read_bytes(), path)


def decode_or_refuse(data: bytes, path: Path) -> str:
    """The text of the ini `path` (its bytes `data`); IniEncodingError unless UTF-8."""
    try:
        return decode_ini(data, str(path))
    except NotUtf8 as exc:
        raise IniEncodingError(str(exc)) from None


def load_config(path: Path) -> dict[str, str]:
    """The user's ini as uWSGI reads it: includes expanded in place, the last value wins.

    Relative includes resolve against the directory of `path` (uWSGI resolves them against
    its working directory, which is usually the same).
    """
    return dict(load_pairs(path))


def load_pairs(path: Path) -> list[tuple[str, str]]:
    """The user's ini as uWSGI reads it, every line in order with includes expanded in
    place (for keys that repeat, such as `req-logger`)."""

    def loader(value: str) -> str:
        target = Path(value.split(":", 1)[0]) if ":" in value else Path(value)
        target = target if target.is_absolute() else path.parent / target
        return read_ini(target)

    try:
        return parse_ini(read_ini(path), loader)
    except OSError as exc:
        raise IniError(f"{exc.filename or path}: cannot read ({exc.strerror})") from None


def last_include(text: str) -> str | None:
    """The target of the file's last entry when it is an `ini =` include, else None."""
    pairs = parse_ini(text)
    return pairs[-1][1] if pairs and pairs[-1][0] == "ini" else None


def as_int(config: Mapping[str, str], key: str, default: int | None = None) -> int | None:
    value = config.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise IniError(f"{key} = {value!r} is not a number") from None


def _launch_dirs(base: Path) -> list[Path]:
    """Where a relative ini path may be relative to: the master's cwd, and the directory
    it was started from (`PWD` in its environment). An ini with `chdir` moves the cwd:
    `uwsgi --ini examples/uwsgi.ini` from a checkout, `chdir = %d`, runs in examples/."""
    dirs = [Path(os.readlink(base / "cwd"))]
    try:
        env = (base / "environ").read_bytes().split(b"\0")
    except OSError:
        env = []
    for entry in env:
        if entry.startswith(b"PWD=") and len(entry) > 4:
            dirs.append(Path(entry[4:].decode(errors="replace")))
    return dirs


def ini_from_proc(pid: int, proc: Path = Path("/proc")) -> Path | None:
    """The ini the master was started with, from its command line: a relative path from its
    cwd, or else from the directory it was started in (the first that exists)."""
    try:
        args = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        dirs = _launch_dirs(proc / str(pid))
    except OSError:
        return None
    words = [a.decode(errors="replace") for a in args if a]
    for i, word in enumerate(words):
        value = words[i + 1] if word == "--ini" and i + 1 < len(words) else None
        value = value or (word if word.endswith(".ini") and not word.startswith("-") else None)
        if value:
            path = Path(value)
            if path.is_absolute():
                return path
            found = [d / path for d in dirs if (d / path).is_file()]
            return found[0] if found else dirs[0] / path
    return None


def flag_on(value: str) -> bool:
    """A boolean option's value as uWSGI reads it: on unless false/off/no/0 (bare: on)."""
    value = value.strip()
    return value != "0" and value.lower() not in OFF


def master_options(pid: int, proc: Path = PROC) -> dict[str, tuple[str, str]] | None:
    """{key: (value, as given)} from the master's command line and environment ("" for a
    bare flag; "as given": `--key` or `UWSGI_KEY`); None when /proc cannot be read."""
    try:
        words = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        env = (proc / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    out: dict[str, tuple[str, str]] = {}
    for word in (w.decode(errors="replace") for w in words if w.startswith(b"--")):
        key, _, value = word[2:].partition("=")
        out[key] = (value, f"--{key}")
    for entry in (e.decode(errors="replace") for e in env if e.startswith(b"UWSGI_")):
        key, _, value = entry.partition("=")
        out[key[6:].lower().replace("_", "-")] = (value, key)
    return out


def lazy_where(config: Mapping[str, str] | None, pid: int, proc: Path = PROC) -> str | None:
    """Where `lazy` is turned on for this master (its ini, its command line or its
    environment), else None. Unreadable places count as not setting it."""
    if config and "lazy" in config and flag_on(config["lazy"]):
        return "`lazy` in its ini"
    given = (master_options(pid, proc) or {}).get("lazy") if pid else None
    if given and flag_on(given[0]):
        return f"`{given[1]}` on master {pid}"
    return None


def lazy_refusal(where: str) -> str:
    """The one line that refuses a reload under `lazy`, with the fix."""
    return (
        f"{where}: uWSGI's `r` then respawns the workers without reading the ini again, so "
        "no reload can change processes or cheaper; use `lazy-apps = true` in its "
        "place and restart uWSGI"
    )


# The override and its validation -----------------------------------------------------------------


def render_keys(keys: Mapping[str, str]) -> str:
    """The override file for `keys`, in a fixed order."""
    body = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return (
        "; Owned by uwsgitune: rewritten on every change, the previous kept as .prev.\n"
        f"[uwsgi]\n{body}"
    )


@dataclass(frozen=True)
class Override:
    processes: int
    cheaper: int
    cheaper_initial: int
    cheaper_algo: str = "manual"
    listen: int | None = None  # carried over from a listen change: a reload keeps the bind
    threads: int | None = None  # threads per worker (sweep --threads); None: the user's

    def render(self) -> str:
        return render_keys(self.keys())

    def keys(self) -> dict[str, str]:
        out = {
            "processes": str(self.processes),
            "cheaper": str(self.cheaper),
            "cheaper-initial": str(self.cheaper_initial),
            "cheaper-algo": self.cheaper_algo,
        }
        if self.listen is not None:
            out["listen"] = str(self.listen)
        if self.threads is not None:
            out["threads"] = str(self.threads)
        return out


def problems(
    config: Mapping[str, str],
    *,
    somaxconn: int | None,
    mem_per_worker: int | None = None,
    memory_budget: int | None = None,
) -> list[str]:
    """What uWSGI would refuse (or die on) in `config`, one phrase each. Empty: safe."""
    out: list[str] = []
    try:
        processes = as_int(config, "processes", 1) or 1
        cheaper = as_int(config, "cheaper", 0) or 0
        initial = as_int(config, "cheaper-initial", cheaper) or cheaper
        listen = as_int(config, "listen", DEFAULT_LISTEN) or DEFAULT_LISTEN
    except IniError as exc:
        return [str(exc)]
    if cheaper < 1:
        out.append(f"cheaper = {cheaper}: cheaper mode needs cheaper >= 1")
    if cheaper >= processes:
        out.append(f"cheaper = {cheaper} >= processes = {processes}: uWSGI dies on reload")
    if not cheaper <= initial <= processes:
        out.append(
            f"cheaper-initial = {initial} outside [cheaper {cheaper}, processes {processes}]"
        )
    if somaxconn is None:
        out.append("somaxconn unknown: cannot prove listen fits")
    elif listen > somaxconn:
        out.append(f"listen = {listen} > somaxconn = {somaxconn}: uWSGI refuses it")
    out += thread_problems(config)
    algo = config.get("cheaper-algo", "spare")
    if algo not in KNOWN_ALGOS:
        out.append(f"cheaper-algo = {algo}: unknown (uWSGI silently falls back to spare)")
    if memory_budget is not None and mem_per_worker and initial * mem_per_worker > memory_budget:
        mib = initial * mem_per_worker // 2**20
        out.append(f"{initial} workers need ~{mib} MiB > budget {memory_budget // 2**20} MiB")
    return out


def thread_problems(config: Mapping[str, str]) -> list[str]:
    """`threads` must be a whole number in 1..MAX_THREADS (0 or text is not a thread count)."""
    value = config.get("threads")
    if value is None:
        return []
    if not value.strip().isdigit() or not 1 <= int(value) <= MAX_THREADS:
        return [f"threads = {value}: use a whole number from 1 to {MAX_THREADS}"]
    return []


def validate(user_config: Mapping[str, str], override: Override, **limits: int | None) -> None:
    """Raise OverrideError unless the user's config with `override` on top is safe."""
    found = problems({**user_config, **override.keys()}, **limits)
    if found:
        raise OverrideError("; ".join(found))


def read_keys(path: Path) -> dict[str, str]:
    """Every key the override file sets ({} when it is missing or unreadable, or is a link
    or a second name, which the next write refuses). Raises IniEncodingError when it is not
    UTF-8 (a rewrite would lose what it holds)."""
    try:
        data = override_bytes(path)
    except (OSError, SetupError):
        return {}
    return {} if data is None else dict(parse_ini(decode_or_refuse(data, path)))


def read_override(path: Path) -> Override | None:
    """The values the current override file sets, or None when it sets none (or is not
    readable as an ini)."""
    try:
        cfg = read_keys(path)
        p, c, listen = as_int(cfg, "processes"), as_int(cfg, "cheaper"), as_int(cfg, "listen")
    except IniError:
        return None
    if p is None or c is None:
        return None
    initial = as_int(cfg, "cheaper-initial", c) or c
    return Override(p, c, initial, cfg.get("cheaper-algo", "manual"), listen)


# Writing the override: never through a link ------------------------------------------------------


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
