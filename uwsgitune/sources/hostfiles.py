"""The host's files a poll reads, one reader each: /proc/stat, /proc/meminfo, the cgroup
limits on the way up from a process, /proc/net/netstat's listen counters and two sysctls.

Every reader here degrades to None instead of failing: a watcher on a locked-down host still
shows what the stats socket says. `HostSampler` (host.py) calls them with its kept reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import psutil

from uwsgitune.sources.kept import read_once
from uwsgitune.sources.procfs import CLOCK_TICKS, Read

CGROUP_ROOT = Path("/sys/fs/cgroup")
Text = Callable[[Path | str], str | None]


def text_of(read: Read) -> Text:
    def text(path: Path | str) -> str | None:
        data = read(str(path))
        return None if data is None else data.decode("utf-8", "replace").strip()

    return text


_read = text_of(read_once)


def cpu_times(read: Read = read_once) -> list[float] | None:
    """The host's CPU seconds from /proc/stat's first line, as psutil's `cpu_times()` reads
    them: user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice."""
    data = read("/proc/stat")
    line = data[: data.find(b"\n")].split() if data else []
    if len(line) < 5 or line[0] != b"cpu":
        return None
    return [float(x) / CLOCK_TICKS for x in line[1:11]]


def memory(read: Read = read_once) -> tuple[int, int] | None:
    """(total, available) bytes from /proc/meminfo, as psutil's `virtual_memory()` gives
    them where the kernel reports MemAvailable (3.14 and later)."""
    data = read("/proc/meminfo")
    found: dict[bytes, int] = {}
    for line in data.splitlines() if data else ():
        key, _, rest = line.partition(b":")
        if key in (b"MemTotal", b"MemAvailable"):
            found[key] = int(rest.split()[0]) * 1024
            if len(found) == 2:
                return found[b"MemTotal"], found[b"MemAvailable"]
    return None


def autogroup(proc: Path = Path("/proc"), text: Text = _read) -> bool:
    """Whether the scheduler groups tasks by session (`kernel.sched_autogroup_enabled`).
    Then a process's nice weighs only within its session: niced work started elsewhere (a
    build in a shell, another service) competes with the workers as a whole group, so its
    CPU is not CPU the workers can have."""
    return text(proc / "sys" / "kernel" / "sched_autogroup_enabled") == "1"


def cgroup_dirs(pid: int, root: Path = CGROUP_ROOT) -> list[Path]:
    """The cgroup directories of a process, from its own dir up to the root (v2 and v1)."""
    text = _read(Path(f"/proc/{pid}/cgroup")) or _read(Path("/proc/self/cgroup")) or ""
    dirs: list[Path] = []
    for line in text.splitlines():
        _, controllers, rel = line.split(":", 2)
        if controllers == "":
            base = root
        elif "cpu" in controllers.split(",") or "memory" in controllers.split(","):
            base = root / controllers
            if not base.exists():
                continue
        else:
            continue
        path = base / rel.lstrip("/")
        while True:
            dirs.append(path)
            if path == base or path == path.parent:
                break
            path = path.parent
    return dirs


def cgroup_cpu_limit(dirs: list[Path], text: Text = _read) -> float | None:
    """The tightest CPU quota on the way up: v2 `cpu.max`, or v1 cfs quota/period."""
    best: float | None = None
    for d in dirs:
        got = text(f"{d}/cpu.max")
        quota = period = None
        if got:
            q, _, p = got.partition(" ")
            if q != "max" and p:
                quota, period = int(q), int(p)
        else:
            q1, p1 = text(f"{d}/cpu.cfs_quota_us"), text(f"{d}/cpu.cfs_period_us")
            if q1 and p1 and int(q1) > 0:
                quota, period = int(q1), int(p1)
        if quota and period:
            limit = quota / period
            best = limit if best is None else min(best, limit)
    return best


def memory_limit(dirs: list[Path], text: Text = _read) -> tuple[int | None, Path | None]:
    """The tightest memory cgroup limit on the way up, and its directory; None = unlimited."""
    limit: int | None = None
    where: Path | None = None
    for d in dirs:
        got = text(f"{d}/memory.max") or text(f"{d}/memory.limit_in_bytes")
        if not (got and got.isdigit() and int(got) < 1 << 60):
            continue  # "max", or v1's "unlimited" (a huge number)
        if limit is None or int(got) < limit:
            limit, where = int(got), d
    return limit, where


def memory_current(where: Path | None, text: Text = _read) -> int | None:
    """What the cgroup of `memory_limit` uses now (v2 `memory.current`, v1 usage)."""
    if where is None:
        return None
    cur = text(f"{where}/memory.current") or text(f"{where}/memory.usage_in_bytes")
    return int(cur) if cur and cur.isdigit() else None


def effective_cpus(pid: int, dirs: list[Path], text: Text = _read) -> float:
    try:
        cpus = float(len(os.sched_getaffinity(pid)))
    except OSError:
        cpus = float(os.cpu_count() or 1)
    quota = cgroup_cpu_limit(dirs, text)
    return min(cpus, quota) if quota else cpus


_OVERFLOWS = (b"ListenOverflows", b"ListenDrops")


def listen_overflows(
    path: Path | str = "/proc/net/netstat", read: Read = read_once
) -> tuple[int | None, int | None]:
    """(ListenOverflows, ListenDrops) of /proc/net/netstat's TcpExt table: its first line
    names the columns, its second holds the values. Read as bytes, two lines split: the
    file has some 150 counters, and this runs every poll."""
    data = read(str(path)) or b""
    at = data.find(b"\nTcpExt:")  # at a line's start: not inside "MPTcpExt:"
    head = 0 if data.startswith(b"TcpExt:") else at + 1 if at >= 0 else -1
    if head < 0:
        return None, None
    cut = data.find(b"\n", head)
    end = data.find(b"\n", cut + 1) if cut > 0 else -1
    values = data[cut + 1 : end if end > 0 else None].split() if cut > 0 else []
    if values[:1] != [b"TcpExt:"]:
        return None, None
    names, n = data[head:cut].split(), len(values)
    ov, dr = (names.index(key) if key in names else n for key in _OVERFLOWS)
    return int(values[ov]) if ov < n else None, int(values[dr]) if dr < n else None


def somaxconn(text: Text = _read) -> int | None:
    got = text(Path("/proc/sys/net/core/somaxconn"))
    return int(got) if got and got.isdigit() else None


def psutil_cpu() -> tuple[float, float, float]:
    """A /proc/stat without the ten fields (an old or odd kernel): psutil's own reading."""
    cpu = psutil.cpu_times()
    total = sum(cpu) - getattr(cpu, "guest", 0.0) - getattr(cpu, "guest_nice", 0.0)
    return total, cpu.idle + getattr(cpu, "iowait", 0.0), getattr(cpu, "nice", 0.0)


def psutil_memory() -> tuple[int, int]:
    vm = psutil.virtual_memory()
    return vm.total, vm.available
