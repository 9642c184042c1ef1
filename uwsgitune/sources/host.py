"""Sample the host around one stats document: CPU, cgroup limits, memory, kernel backlogs.

Every reader here degrades to None instead of failing: a watcher on a locked-down host still
shows what the stats socket says.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import psutil

from uwsgitune.core.model import StatsDoc
from uwsgitune.core.samples import HostSample, TcpQueue, UnixQueue
from uwsgitune.sources.kept import KeptFiles, read_once
from uwsgitune.sources.netlink import match_tcp, tcp_listen_queues, unix_listen_queues
from uwsgitune.sources.procfs import CLOCK_TICKS, Read, proc_samples

CGROUP_ROOT = Path("/sys/fs/cgroup")
Text = Callable[[Path | str], str | None]


def _text(read: Read) -> Text:
    def text(path: Path | str) -> str | None:
        data = read(str(path))
        return None if data is None else data.decode("utf-8", "replace").strip()

    return text


_read = _text(read_once)


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


def _cgroup_dirs(pid: int, root: Path = CGROUP_ROOT) -> list[Path]:
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


def cgroup_memory(dirs: list[Path], text: Text = _read) -> tuple[int | None, int | None]:
    """(limit, current) of the tightest memory cgroup on the way up; None = unlimited."""
    limit: int | None = None
    current: int | None = None
    for d in dirs:
        got = text(f"{d}/memory.max") or text(f"{d}/memory.limit_in_bytes")
        if not (got and got.isdigit() and int(got) < 1 << 60):
            continue  # "max", or v1's "unlimited" (a huge number)
        if limit is None or int(got) < limit:
            limit = int(got)
            cur = text(f"{d}/memory.current") or text(f"{d}/memory.usage_in_bytes")
            current = int(cur) if cur and cur.isdigit() else None
    return limit, current


def effective_cpus(pid: int, dirs: list[Path], text: Text = _read) -> float:
    try:
        cpus = float(len(os.sched_getaffinity(pid)))
    except OSError:
        cpus = float(os.cpu_count() or 1)
    quota = cgroup_cpu_limit(dirs, text)
    return min(cpus, quota) if quota else cpus


def listen_overflows(
    path: Path = Path("/proc/net/netstat"), text: Text = _read
) -> tuple[int | None, int | None]:
    got = text(path)
    if not got:
        return None, None
    lines = got.splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if head.startswith("TcpExt:"):
            table = dict(zip(head.split()[1:], values.split()[1:], strict=False))
            ov, dr = table.get("ListenOverflows"), table.get("ListenDrops")
            return (int(ov) if ov else None, int(dr) if dr else None)
    return None, None


def somaxconn(text: Text = _read) -> int | None:
    got = text(Path("/proc/sys/net/core/somaxconn"))
    return int(got) if got and got.isdigit() else None


def _psutil_cpu() -> tuple[float, float, float]:
    """A /proc/stat without the ten fields (an old or odd kernel): psutil's own reading."""
    cpu = psutil.cpu_times()
    total = sum(cpu) - getattr(cpu, "guest", 0.0) - getattr(cpu, "guest_nice", 0.0)
    return total, cpu.idle + getattr(cpu, "iowait", 0.0), getattr(cpu, "nice", 0.0)


def _psutil_memory() -> tuple[int, int]:
    vm = psutil.virtual_memory()
    return vm.total, vm.available


class HostSampler:
    """Reads the host for one instance. Cgroup paths are looked up once per master pid; the
    files read every poll are kept open (sources/kept.py) until `close`, or until the
    sampler is dropped (an instance removed on a config reload)."""

    def __init__(self, *, netlink: bool = True) -> None:
        self._dirs: dict[int, list[Path]] = {}
        self._netlink = netlink
        self._inet_diag = netlink
        self._files = KeptFiles()
        self._text = _text(self._cgroup_read)
        self._missing: set[str] = set()  # cgroup and sysctl files this host does not have
        self._lock = threading.Lock()  # a kept descriptor is never read while closed

    def _dirs_for(self, pid: int) -> list[Path]:
        if pid not in self._dirs:
            self._dirs = {pid: _cgroup_dirs(pid) if pid else []}
            self._missing.clear()  # a new master: its cgroup may have other files
        return self._dirs[pid]

    def _cgroup_read(self, path: str) -> bytes | None:
        """A kept read that remembers files the host lacks (v1 has no `cpu.max`, v2 no
        `memory.limit_in_bytes`): a dozen failed opens a poll otherwise."""
        if path in self._missing:
            return None
        data = self._files.read(path)
        if data is None and not os.path.exists(path):
            self._missing.add(path)
        return data

    def close(self) -> None:
        with self._lock:
            self._files.close()

    def sample(self, doc: StatsDoc | None) -> HostSample:
        with self._lock:
            try:
                return self._sample(doc)
            finally:
                self._files.sweep()

    def _cpu(self) -> tuple[float, float, float]:
        """(total, idle, nice) CPU seconds of the host, as psutil's `cpu_times()` sums them."""
        cpu = cpu_times(self._files.read)
        if cpu is None or len(cpu) < 10:
            return _psutil_cpu()
        # guest and guest_nice are already counted in user and nice: do not count them twice
        return sum(cpu) - cpu[8] - cpu[9], cpu[3] + cpu[4], cpu[1]

    def _sample(self, doc: StatsDoc | None) -> HostSample:
        master = doc.pid if doc else 0
        dirs = self._dirs_for(master)
        total, idle, nice = self._cpu()
        mem_total, mem_available = memory(self._files.read) or _psutil_memory()
        limit, current = cgroup_memory(dirs, self._text)
        overflows, drops = listen_overflows(text=self._text)
        pids = [master] if master else []
        if doc:
            pids += [w.pid for w in doc.workers if w.pid > 0 and w.status != "cheap"]
        unix: tuple[UnixQueue, ...] = ()
        if doc and self._netlink and any(s.is_unix for s in doc.sockets):
            unix = self._unix_queues({s.name for s in doc.sockets if s.is_unix})
        tcp: tuple[TcpQueue, ...] = ()
        if doc and self._inet_diag and any(not s.is_unix for s in doc.sockets):
            tcp = self._tcp_queues([s.name for s in doc.sockets if not s.is_unix])
        return HostSample(
            cpu_count=psutil.cpu_count() or 1,
            effective_cpus=effective_cpus(master or os.getpid(), dirs, self._text),
            cpu_busy_seconds=total - idle,
            cpu_nice_seconds=nice if not autogroup(text=self._text) else 0.0,
            cpu_total_seconds=total,
            mem_total=mem_total,
            mem_available=mem_available,
            cgroup_mem_max=limit,
            cgroup_mem_current=current,
            somaxconn=somaxconn(self._text),
            listen_overflows=overflows,
            listen_drops=drops,
            procs=proc_samples(pids, read=self._files.read),
            unix_queues=unix,
            tcp_queues=tcp,
        )

    def _tcp_queues(self, names: list[str]) -> tuple[TcpQueue, ...]:
        try:
            table = tcp_listen_queues()
        except OSError:
            self._inet_diag = False  # no inet_diag here: uWSGI's own sample will do
            return ()
        found = [(n, match_tcp(n, table)) for n in names]
        return tuple(TcpQueue(n, *qb) for n, qb in found if qb is not None)

    def _unix_queues(self, names: set[str]) -> tuple[UnixQueue, ...]:
        try:
            table = unix_listen_queues()
        except OSError:
            self._netlink = False  # no netlink here (seccomp, old kernel): stop asking
            return ()
        return tuple(UnixQueue(n, *table[n]) for n in sorted(names) if n in table)
