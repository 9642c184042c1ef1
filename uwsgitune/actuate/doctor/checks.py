"""`doctor`: is an instance ready to be tuned, and what exactly to add where it is not.

`checks` is pure: facts in, one `Check` per requirement out, each with the line to add to
the uWSGI ini. `gather` is the thin shell that reads the stats, the FIFO, /proc and the ini;
whether uWSGI's user can read its files is doctor/access.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uwsgitune.actuate.doctor.access import (
    Reader,
    reader_from_ini,
    reader_from_proc,
    why_unreadable,
)
from uwsgitune.actuate.fifo import FifoError, fifo_inode, master_reads
from uwsgitune.actuate.lock import LockInfo, lock_info
from uwsgitune.actuate.override import (
    DEFAULT_LISTEN,
    IniEncodingError,
    IniError,
    ini_from_proc,
    last_include,
    lazy_where,
    load_config,
    override_refusal,
    read_ini,
)
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.model import StatsDoc
from uwsgitune.pipeline import poll_once
from uwsgitune.sources.hostfiles import somaxconn
from uwsgitune.sources.poller import LiveSource


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: could not tell
    detail: str
    fix: str = ""
    how: str = "add"  # "add": ini lines to add; "run": a command to run


@dataclass(frozen=True)
class DoctorFacts:
    address: str
    stats_error: str | None = None
    master_pid: int = 0
    memory_report: bool | None = None
    fifo: str | None = None
    fifo_error: str | None = None  # missing, not a FIFO, a symlink
    fifo_read: bool | None = None  # None: /proc unreadable
    ini: str | None = None
    ini_error: str | None = None
    config: dict[str, str] = field(default_factory=dict)
    include: str | None = None  # the ini's last `ini =` target
    override: str | None = None
    somaxconn: int | None = None
    backlog: int | None = None  # the kernel's backlog from the stats (TCP)
    reader: str | None = None  # who uWSGI runs as: "uid 33 (master 1234)"; None: unknown
    readable: tuple[str, ...] = ()  # the files uWSGI re-reads at a reload that it can read
    unreadable: tuple[tuple[str, str], ...] = ()  # (what stops it, the fix), per file
    unsafe_dir: str | None = None  # the override's directory others can write
    unsafe_file: str | None = None  # the override or .prev a link, or with a second name
    lock: LockInfo | None = None  # the apply lock of the FIFO, read without taking it
    lazy: str | None = None  # where `lazy` is on (a reload then never reads the ini)


def _stats(f: DoctorFacts) -> Check:
    if f.stats_error:
        return Check("stats", False, f.stats_error, "stats = /run/uwsgi/app-stats.sock")
    return Check("stats", True, f"{f.address} answers (master pid {f.master_pid})")


def _fifo(f: DoctorFacts) -> Check:
    fix = f"master-fifo = {f.fifo or '/run/uwsgi/app.fifo'}"
    if f.fifo is None:
        return Check("fifo", False, "no FIFO given or found in the ini", fix)
    if f.fifo_error:
        return Check("fifo", False, f.fifo_error, fix)
    if f.fifo_read is None:
        return Check(
            "fifo", None, f"{f.fifo}: a FIFO; /proc unreadable, cannot prove this master reads it"
        )
    if not f.fifo_read:
        return Check("fifo", False, f"{f.fifo} is not open in master {f.master_pid}", fix)
    return Check("fifo", True, f"{f.fifo} is read by master {f.master_pid}")


def _cheaper(f: DoctorFacts) -> Check:
    if not f.config:
        return Check("cheaper", None, "ini unknown; pass --ini", "cheaper-algo = manual")
    cheaper, algo = f.config.get("cheaper", "0"), f.config.get("cheaper-algo", "spare")
    fix = "cheaper = 1\ncheaper-algo = manual\ncheaper-initial = 2"
    if cheaper in ("", "0"):
        return Check("cheaper", False, "cheaper mode is off: +/- do nothing", fix)
    if algo != "manual":
        return Check(
            "cheaper",
            False,
            f"cheaper-algo = {algo} fights uwsgitune's +/-",
            "cheaper-algo = manual",
        )
    return Check("cheaper", True, f"cheaper = {cheaper}, cheaper-algo = manual")


def _memory(f: DoctorFacts) -> Check:
    on = f.memory_report
    if on is None and f.config:
        on = f.config.get("memory-report", "false").lower() in ("1", "true", "yes", "on", "")
    if on is None:
        return Check("memory-report", None, "unknown (no stats, no ini)", "memory-report = true")
    if not on:
        return Check("memory-report", False, "off: no RSS in the stats", "memory-report = true")
    return Check("memory-report", True, "on")


def _include(f: DoctorFacts) -> Check:
    want = f.override or "/var/lib/uwsgitune/app.ini"
    fix = f"ini = {want}   (as the LAST line of {f.ini or 'the ini'}; create the file)"
    if f.ini is None:
        return Check("override", None, f"ini unknown: {f.ini_error or 'pass --ini'}", fix)
    if f.ini_error:
        return Check("override", False, f.ini_error, fix)
    if f.include is None:
        return Check("override", False, f"{f.ini} does not end with an `ini =` include", fix)
    inc = Path(f.include) if Path(f.include).is_absolute() else Path(f.ini).parent / f.include
    if f.override and inc.resolve() != Path(f.override).resolve():
        return Check("override", False, f"last line includes {f.include}, not {f.override}", fix)
    if not inc.exists():
        return Check(
            "override",
            False,
            f"{inc} does not exist (uWSGI fails to start)",
            f"printf '[uwsgi]\\n' > {inc}",
        )
    return Check("override", True, f"{f.ini} ends with `ini = {f.include}`")


def _listen(f: DoctorFacts) -> Check:
    if not f.config:
        return Check("listen", None, f"ini unknown (somaxconn {f.somaxconn}); pass --ini")
    text = f.config.get("listen", str(DEFAULT_LISTEN))
    listen = int(text) if text.isdigit() else None
    if f.somaxconn is None or listen is None:
        return Check("listen", None, "somaxconn or listen unknown")
    fix = f"listen = {f.somaxconn}   (or raise net.core.somaxconn)"
    if listen > f.somaxconn:
        return Check(
            "listen", False, f"listen {listen} > somaxconn {f.somaxconn}: uWSGI refuses it", fix
        )
    live = f" (kernel backlog {f.backlog})" if f.backlog else ""
    return Check("listen", True, f"listen {listen} <= somaxconn {f.somaxconn}{live}")


def _access(f: DoctorFacts) -> Check:
    """uWSGI re-reads its ini and the override at every reload, as the user it runs as."""
    if f.unsafe_dir:
        where = Path(f.override or ".").parent
        return Check("access", False, f.unsafe_dir, f"chmod go-w {where}", "run")
    if f.unsafe_file:  # the line names the fix: a regular file there, or the link's target
        return Check("access", False, f.unsafe_file)
    if f.unreadable:
        why, fix = f.unreadable[0]
        return Check("access", False, f"{f.reader}: {why}", fix, "run")
    if f.reader is None or not f.readable:
        return Check("access", None, "uWSGI's user or its files unknown (no stats, no --ini)")
    return Check("access", True, f"{f.reader} can read {', '.join(f.readable)}")


def _reload(f: DoctorFacts) -> Check:
    """Under `lazy`, `r` only respawns the workers: the override is never read again
    (actuate/override.py)."""
    if f.lazy:
        fix = "lazy-apps = true   (in place of `lazy`; then restart uWSGI)"
        return Check("reload", False, f"{f.lazy}: a reload never reads the ini again", fix)
    if not f.config and not f.master_pid:
        return Check("reload", None, "ini and master unknown")
    return Check("reload", True, "a reload reads the ini again (no `lazy`)")


def _lock(f: DoctorFacts) -> Check:
    if f.lock is None:
        return Check("lock", None, "no FIFO, so no apply lock")
    if f.lock.problem:
        return Check("lock", False, f.lock.problem)
    if f.lock.holder_pid is not None:
        said = f.lock.holder  # "pid N (role)", as the holder wrote it
        who = f"held by {said}" if said.startswith("pid ") else f"held by pid {f.lock.holder_pid}"
        return Check("lock", True, f"{f.lock.path}: {who}; apply elsewhere is refused")
    return Check("lock", True, f"{f.lock.path}: free")


CHECKS = (_stats, _fifo, _cheaper, _memory, _include, _reload, _listen, _access, _lock)


def checks(f: DoctorFacts) -> list[Check]:
    return [check(f) for check in CHECKS]


def _doc(address: StatsAddress) -> tuple[StatsDoc | None, str | None]:
    """One poll of the instance through the pipeline's stages (the host not sampled)."""
    state = poll_once(LiveSource(address, timeout=2.0, sample_host=False))
    if state.poll is not None and state.poll.doc is not None:
        return state.poll.doc, None
    error = state.frame.error if state.frame is not None else None
    return None, (error or "no answer").splitlines()[0]


def served(address: StatsAddress) -> int | None:
    """The requests the instance's workers have served (None: no answer)."""
    doc, _ = _doc(address)
    return None if doc is None else sum(w.requests for w in doc.workers)


def _memory_report(doc: StatsDoc | None) -> bool | None:
    """RSS shows after a worker's first request: before any request, nobody can tell."""
    if doc is None:
        return None
    if any(w.rss > 0 for w in doc.workers):
        return True
    return False if any(w.requests > 0 for w in doc.workers) else None


def _ini_facts(path: Path | None) -> tuple[dict[str, str], str | None, str | None]:
    """(merged config, last include, error) of the instance's ini."""
    if path is None:
        return {}, None, None
    try:
        return load_config(path), last_include(read_ini(path)), None
    except IniEncodingError:
        raise  # not a missing line: the file itself must be saved again (exit 2)
    except (IniError, OSError) as exc:
        return {}, None, str(exc)


def _fifo_facts(fifo: str | None, pid: int) -> tuple[str | None, bool | None]:
    """(what is wrong with the FIFO, whether the master reads it: None if unknowable)."""
    if not fifo:
        return None, None
    try:
        fifo_inode(Path(fifo))
        return None, (master_reads(Path(fifo), pid) if pid else False)
    except FifoError as exc:
        return (None, None) if "cannot read" in str(exc) else (str(exc), None)


def gather(
    address: StatsAddress, fifo: str | None, ini: str | None, override: str | None
) -> DoctorFacts:
    doc, err = _doc(address)
    pid = doc.pid if doc else 0
    ini_path = Path(ini) if ini else (ini_from_proc(pid) if pid else None)
    config, include, ini_error = _ini_facts(ini_path)
    fifo = fifo or config.get("master-fifo")
    fifo_error, fifo_read = _fifo_facts(fifo, pid)
    sockets = doc.sockets if doc else ()
    access = _access_facts(pid, config, ini_path, override or _included(ini_path, include))
    return DoctorFacts(
        address=str(address),
        stats_error=err,
        master_pid=pid,
        memory_report=_memory_report(doc),
        fifo=fifo,
        fifo_error=fifo_error,
        fifo_read=fifo_read,
        ini=str(ini_path) if ini_path else None,
        ini_error=ini_error,
        config=config,
        include=include,
        override=override,
        somaxconn=somaxconn(),
        backlog=next((s.max_queue for s in sockets if not s.is_unix and s.max_queue), None),
        lock=lock_info(Path(fifo)) if fifo else None,
        lazy=lazy_where(config, pid),
        **access,
    )


def _included(ini: Path | None, include: str | None) -> str | None:
    if ini is None or include is None:
        return None
    return str(ini.parent / include)  # an absolute include stays as it is


def _access_facts(
    pid: int, config: dict[str, str], ini: Path | None, override: str | None
) -> dict[str, Any]:
    """Who uWSGI runs as, which of its ini and override it can read, and what a write of
    the override would refuse (its directory, a link or a second name)."""
    where, why = override_refusal(Path(override)) if override else (None, None)
    unsafe = {
        "unsafe_dir": why if where == "dir" else None,
        "unsafe_file": why if where == "file" else None,
    }
    reader: Reader | None = (reader_from_proc(pid) if pid else None) or reader_from_ini(config)
    if reader is None:
        return unsafe
    files = [str(p) for p in (ini, override) if p]
    problems = {name: why_unreadable(Path(name), reader) for name in files}
    return {
        **unsafe,
        "reader": f"uid {reader.uid} ({reader.source})",
        "readable": tuple(name for name, why in problems.items() if why is None),
        "unreadable": tuple(why for why in problems.values() if why is not None),
    }
