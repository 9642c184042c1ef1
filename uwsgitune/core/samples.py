"""What one poll brings in: the stats document and a host sample, with the time they were taken.

These are the inputs of the pure core. The shell (`uwsgitune.sources`) builds them; a recording
stores them; a replay rebuilds them. Nothing here reads the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import msgspec

from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.model import StatsDoc


class ProcSample(msgspec.Struct, frozen=True, gc=False):
    """One process of the instance (master or worker), read from /proc (sources/procfs.py).
    A frozen struct (msgspec), not a dataclass: a poll builds one per process, 1,000 at
    1,000 workers, and this builds in a fifth of the time."""

    pid: int
    cpu_seconds: float  # user + system, cumulative
    rss: int | None  # bytes; None: not read (its RSS comes from the stats, or nothing reads it)
    num_threads: int = 1
    # seconds its threads waited for a CPU, cumulative (/proc/PID/schedstat); None: unknown
    runq_seconds: float | None = None
    nice: int = 0  # its nice value: above 0, the host counts its user CPU as niced
    # its main thread's scheduler state when read (/proc/PID/stat): "R" running or waiting
    # for a CPU, "S" asleep, "D" asleep on disk, ...; "" not read
    state: str = ""
    # user CPU seconds of `cpu_seconds`, cumulative: the host's niced CPU (/proc/stat) counts a
    # niced process's user time only (its system time as system); None: not read (old
    # recordings)
    user_seconds: float | None = None


# What a process had used when it was born: a pid new to the instance (or to its slot) since
# the last poll was spawned since (uWSGI forks a worker for each `+`, respawn and reload; a
# child's CPU counts from 0), so all its CPU and run-queue time fall in the interval.
# Counting none of it read the poll after `+20` as a tenth of the CPU a request takes
# (drop: 0.26 ms against 2.5). Used through `workerview.baseline`.
BORN = ProcSample(0, 0.0, None, 1, 0.0, user_seconds=0.0)


@dataclass(frozen=True)
class UnixQueue:
    """A listening unix socket as the kernel sees it (netlink sock_diag, UNIX_DIAG_RQLEN)."""

    path: str  # as uWSGI names it: a path, or "@name" for an abstract socket
    queue: int  # rqueue: connections waiting for accept()
    backlog: int  # wqueue: the listen backlog


@dataclass(frozen=True)
class TcpQueue:
    """A listening TCP socket as the kernel sees it now (netlink inet_diag); uWSGI's own
    `queue` is its master's sample from up to a second ago."""

    name: str  # as uWSGI names the socket: "127.0.0.1:9000", ":9000"
    queue: int  # connections waiting for accept()
    backlog: int


@dataclass(frozen=True)
class HostSample:
    """Host facts next to one stats document. Any field the host cannot give is None."""

    cpu_count: int  # logical CPUs of the host
    effective_cpus: float  # min(master's affinity, cgroup CPU quota)
    cpu_busy_seconds: float  # host, cumulative, all CPUs (non-idle, non-iowait)
    cpu_total_seconds: float  # host, cumulative, all CPUs
    mem_total: int  # bytes
    mem_available: int  # bytes, the host's MemAvailable
    cgroup_mem_max: int | None = None  # the instance's cgroup memory limit, None = unlimited
    cgroup_mem_current: int | None = None
    somaxconn: int | None = None
    listen_overflows: int | None = None  # TcpExtListenOverflows, host-wide, cumulative
    listen_drops: int | None = None  # TcpExtListenDrops, host-wide, cumulative
    procs: tuple[ProcSample, ...] = ()
    unix_queues: tuple[UnixQueue, ...] = ()
    tcp_queues: tuple[TcpQueue, ...] = ()
    # host, cumulative: busy at a positive nice (batch work that gives way to the workers;
    # 0 under session autogrouping, where nice does not reach across sessions)
    cpu_nice_seconds: float = 0.0

    @property
    def available_memory(self) -> int:
        """Memory the instance can still take: the host's, bounded by its cgroup limit."""
        avail = self.mem_available
        if self.cgroup_mem_max is not None:
            room = self.cgroup_mem_max - (self.cgroup_mem_current or 0)
            avail = min(avail, max(room, 0))
        return avail

    @property
    def memory_limit(self) -> int:
        """Total memory the instance may use: the cgroup limit, or the host's RAM."""
        if self.cgroup_mem_max is not None:
            return min(self.cgroup_mem_max, self.mem_total)
        return self.mem_total

    @cached_property
    def by_pid(self) -> dict[int, ProcSample]:
        """The processes by pid, built once per sample (each is read by two polls' derives:
        as the newest, then as the one before). Do not change it."""
        return {p.pid: p for p in self.procs}


@dataclass(frozen=True)
class Poll:
    """One poll of one instance: a parsed document or an error, plus the host around it."""

    source: str  # the address as the user gave it
    t: float  # wall clock, epoch seconds, when the document was read
    mono: float  # monotonic seconds, for intervals (immune to wall-clock jumps)
    doc: StatsDoc | None = None
    error: str | None = None  # one line, when the poll failed
    host: HostSample | None = None
    raw_size: int = 0
    read_seconds: float = 0.0  # connect + read
    parse_seconds: float = 0.0
    repairs: int = 0  # request `vars` strings repaired to make the document valid JSON
    peer_uid: int | None = None  # SO_PEERCRED of a unix stats socket: who serves it
    extra: dict[str, str] = field(default_factory=dict)
    # A replayed poll's latency, as recorded (a live poll's comes from its driver's
    # `LatencyStage`, after the poll): None when none was recorded.
    latency: LatencyView | None = None

    @property
    def ok(self) -> bool:
        return self.doc is not None
