"""Sample the host around one stats document: CPU, cgroup limits, memory, kernel backlogs.

Every reader here degrades to None instead of failing: a watcher on a locked-down host still
shows what the stats socket says.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from uwsgitune.core.model import StatsDoc
from uwsgitune.core.samples import HostSample, TcpQueue, UnixQueue
from uwsgitune.sources.netlink import match_tcp, tcp_listen_queues, unix_listen_queues
from uwsgitune.sources.procfs import proc_samples, read_bytes

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read(path: Path | str) -> str | None:
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace").strip()


def autogroup(proc: Path = Path("/proc")) -> bool:
    """Whether the scheduler groups tasks by session (`kernel.sched_autogroup_enabled`).
    Then a process's nice weighs only within its session: niced work started elsewhere (a
    build in a shell, another service) competes with the workers as a whole group, so its
    CPU is not CPU the workers can have."""
    return _read(proc / "sys" / "kernel" / "sched_autogroup_enabled") == "1"


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


def cgroup_cpu_limit(dirs: list[Path]) -> float | None:
    """The tightest CPU quota on the way up: v2 `cpu.max`, or v1 cfs quota/period."""
    best: float | None = None
    for d in dirs:
        text = _read(d / "cpu.max")
        quota = period = None
        if text:
            q, _, p = text.partition(" ")
            if q != "max" and p:
                quota, period = int(q), int(p)
        else:
            q1, p1 = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
            if q1 and p1 and int(q1) > 0:
                quota, period = int(q1), int(p1)
        if quota and period:
            limit = quota / period
            best = limit if best is None else min(best, limit)
    return best


def cgroup_memory(dirs: list[Path]) -> tuple[int | None, int | None]:
    """(limit, current) of the tightest memory cgroup on the way up; None = unlimited."""
    limit: int | None = None
    current: int | None = None
    for d in dirs:
        text = _read(d / "memory.max") or _read(d / "memory.limit_in_bytes")
        if not (text and text.isdigit() and int(text) < 1 << 60):
            continue  # "max", or v1's "unlimited" (a huge number)
        if limit is None or int(text) < limit:
            limit = int(text)
            cur = _read(d / "memory.current") or _read(d / "memory.usage_in_bytes")
            current = int(cur) if cur and cur.isdigit() else None
    return limit, current


def effective_cpus(pid: int, dirs: list[Path]) -> float:
    try:
        cpus = float(len(os.sched_getaffinity(pid)))
    except OSError:
        cpus = float(os.cpu_count() or 1)
    quota = cgroup_cpu_limit(dirs)
    return min(cpus, quota) if quota else cpus


def listen_overflows(path: Path = Path("/proc/net/netstat")) -> tuple[int | None, int | None]:
    text = _read(path)
    if not text:
        return None, None
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if head.startswith("TcpExt:"):
            table = dict(zip(head.split()[1:], values.split()[1:], strict=False))
            ov, dr = table.get("ListenOverflows"), table.get("ListenDrops")
            return (int(ov) if ov else None, int(dr) if dr else None)
    return None, None


def somaxconn() -> int | None:
    text = _read(Path("/proc/sys/net/core/somaxconn"))
    return int(text) if text and text.isdigit() else None


class HostSampler:
    """Reads the host for one instance. Cgroup paths are looked up once per master pid."""

    def __init__(self, *, netlink: bool = True) -> None:
        self._dirs: dict[int, list[Path]] = {}
        self._netlink = netlink
        self._inet_diag = netlink

    def _dirs_for(self, pid: int) -> list[Path]:
        if pid not in self._dirs:
            self._dirs = {pid: _cgroup_dirs(pid) if pid else []}
        return self._dirs[pid]

    def sample(self, doc: StatsDoc | None) -> HostSample:
        master = doc.pid if doc else 0
        dirs = self._dirs_for(master)
        cpu = psutil.cpu_times()
        idle = cpu.idle + getattr(cpu, "iowait", 0.0)
        # guest and guest_nice are already counted in user and nice: do not count them twice
        total = sum(cpu) - getattr(cpu, "guest", 0.0) - getattr(cpu, "guest_nice", 0.0)
        vm = psutil.virtual_memory()
        limit, current = cgroup_memory(dirs)
        overflows, drops = listen_overflows()
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
            effective_cpus=effective_cpus(master or os.getpid(), dirs),
            cpu_busy_seconds=total - idle,
            cpu_nice_seconds=getattr(cpu, "nice", 0.0) if not autogroup() else 0.0,
            cpu_total_seconds=total,
            mem_total=vm.total,
            mem_available=vm.available,
            cgroup_mem_max=limit,
            cgroup_mem_current=current,
            somaxconn=somaxconn(),
            listen_overflows=overflows,
            listen_drops=drops,
            procs=proc_samples(pids),
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
