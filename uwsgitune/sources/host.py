"""Sample the host around one stats document: CPU, cgroup limits, memory, kernel backlogs.

Every reader degrades to None instead of failing (hostfiles.py): a watcher on a locked-down
host still shows what the stats socket says.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import psutil

from uwsgitune.core.model import StatsDoc
from uwsgitune.core.samples import HostSample, TcpQueue, UnixQueue
from uwsgitune.core.workerview import rss_from_proc
from uwsgitune.sources.hostfiles import (
    autogroup,
    cgroup_dirs,
    cpu_times,
    effective_cpus,
    listen_overflows,
    memory,
    memory_current,
    memory_limit,
    psutil_cpu,
    psutil_memory,
    somaxconn,
    text_of,
)
from uwsgitune.sources.kept import KeptFiles
from uwsgitune.sources.netlink import Diag, match_tcp, v4_found
from uwsgitune.sources.procfiles import ProcFiles

# Seconds the host's settings, read once, stand for the next polls: the CPUs the instance may
# use (affinity, cgroup quota), its cgroup memory limit, somaxconn and the autogroup sysctl.
# An operator's change shows within this; what they measure against is read every poll.
SETTINGS_SECONDS = 5.0


class _Settings(NamedTuple):
    master: int
    at: float  # monotonic, when read
    cpu_count: int
    effective_cpus: float
    autogroup: bool
    somaxconn: int | None
    mem_limit: int | None
    mem_dir: Path | None  # the cgroup whose limit it is: its use is read every poll


class HostSampler:
    """Reads the host for one instance. Cgroup paths are looked up once per master pid, the
    host's settings once per SETTINGS_SECONDS; the files read every poll are kept open
    (sources/kept.py) until `close`, or until the sampler is dropped (an instance removed on
    a config reload)."""

    def __init__(
        self, *, netlink: bool = True, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._dirs: dict[int, list[Path]] = {}
        self._settings: _Settings | None = None
        self._netlink = netlink
        self._inet_diag = netlink
        self._files = KeptFiles()
        self._procs = ProcFiles(self._files)
        self._diag = Diag()
        self._text = text_of(self._cgroup_read)
        self._missing: set[str] = set()  # cgroup and sysctl files this host does not have
        self._lock = threading.Lock()  # a kept descriptor is never read while closed

    def _dirs_for(self, pid: int) -> list[Path]:
        if pid not in self._dirs:
            self._dirs = {pid: cgroup_dirs(pid) if pid else []}
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

    def _settings_for(self, master: int) -> _Settings:
        now = self._clock()
        got = self._settings
        if got is not None and got.master == master and 0 <= now - got.at < SETTINGS_SECONDS:
            return got
        dirs, text = self._dirs_for(master), self._text
        got = self._settings = _Settings(
            master,
            now,
            psutil.cpu_count() or 1,
            effective_cpus(master or os.getpid(), dirs, text),
            autogroup(text=text),
            somaxconn(text),
            *memory_limit(dirs, text),
        )
        return got

    def close(self) -> None:
        with self._lock:
            self._files.close()
            self._procs.close()
            self._diag.close()

    def sample(self, doc: StatsDoc | None) -> HostSample:
        with self._lock:
            try:
                return self._sample(doc)
            finally:
                self._files.sweep()
                self._procs.sweep()

    def _cpu(self) -> tuple[float, float, float]:
        """(total, idle, nice) CPU seconds of the host, as psutil's `cpu_times()` sums them."""
        cpu = cpu_times(self._files.read)
        if cpu is None or len(cpu) < 10:
            return psutil_cpu()
        # guest and guest_nice are already counted in user and nice: do not count them twice
        return sum(cpu) - cpu[8] - cpu[9], cpu[3] + cpu[4], cpu[1]

    def _sample(self, doc: StatsDoc | None) -> HostSample:
        master = doc.pid if doc else 0
        settings = self._settings_for(master)
        total, idle, nice = self._cpu()
        mem_total, mem_available = memory(self._files.read) or psutil_memory()
        overflows, drops = listen_overflows(read=self._cgroup_read)
        pids = [master] if master else []
        no_rss = {master}  # statm only where a frame reads it (`rss_from_proc`)
        if doc:
            for w in doc.workers:
                if w.pid > 0 and w.status != "cheap":
                    pids.append(w.pid)
                    if not rss_from_proc(w):
                        no_rss.add(w.pid)
        unix: tuple[UnixQueue, ...] = ()
        if doc and self._netlink and any(s.is_unix for s in doc.sockets):
            unix = self._unix_queues({s.name for s in doc.sockets if s.is_unix})
        tcp: tuple[TcpQueue, ...] = ()
        if doc and self._inet_diag and any(not s.is_unix for s in doc.sockets):
            tcp = self._tcp_queues([s.name for s in doc.sockets if not s.is_unix])
        return HostSample(
            cpu_count=settings.cpu_count,
            effective_cpus=settings.effective_cpus,
            cpu_busy_seconds=total - idle,
            cpu_nice_seconds=nice if not settings.autogroup else 0.0,
            cpu_total_seconds=total,
            mem_total=mem_total,
            mem_available=mem_available,
            cgroup_mem_max=settings.mem_limit,
            cgroup_mem_current=memory_current(settings.mem_dir, self._text),
            somaxconn=settings.somaxconn,
            listen_overflows=overflows,
            listen_drops=drops,
            procs=self._procs.sample(pids, no_rss),
            unix_queues=unix,
            tcp_queues=tcp,
        )

    def _tcp_queues(self, names: list[str]) -> tuple[TcpQueue, ...]:
        try:
            table = self._diag.tcp((socket.AF_INET,))
            if not v4_found(names, table):  # a wildcard, a name, IPv6, or not found
                table += self._diag.tcp((socket.AF_INET6,))
        except OSError:
            self._inet_diag = False  # no inet_diag here: uWSGI's own sample will do
            return ()
        found = [(n, match_tcp(n, table)) for n in names]
        return tuple(TcpQueue(n, *qb) for n, qb in found if qb is not None)

    def _unix_queues(self, names: set[str]) -> tuple[UnixQueue, ...]:
        try:
            table = self._diag.unix()
        except OSError:
            self._netlink = False  # no netlink here (seccomp, old kernel): stop asking
            return ()
        return tuple(UnixQueue(n, *table[n]) for n in sorted(names) if n in table)
