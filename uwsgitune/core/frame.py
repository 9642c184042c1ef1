"""Derived, frozen views of one instance at one poll: what every sink and rule reads.

A `Frame` is published once per poll. Rates are None when they cannot be known honestly: on the
first poll, after a reload (`r` resets every counter), after a restart, or on an error. They
are never negative and never spike.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Literal

import msgspec

FrameKind = Literal["first", "ok", "reload", "restart", "error"]


class RequestView(msgspec.Struct, frozen=True, gc=False):
    """The request a core is serving. Method and path only: `vars` never leave the core."""

    core: int
    method: str
    path: str
    age: float | None  # seconds since request_start


class WorkerView(msgspec.Struct, frozen=True, gc=False):
    """One worker slot at one poll. A frozen struct (msgspec), not a dataclass: a poll builds
    one per worker, and this builds in a sixth of the time (0.7 against 4.2 us)."""

    slot: int  # index in the stats `workers` array (stable across respawns)
    id: int
    pid: int
    status: str
    requests: int
    exceptions: int
    signals: int
    tx: int
    avg_rt_us: int  # uWSGI's running half-life average, not a mean
    running_time_us: int
    rss: int | None  # bytes: stats with --memory-report, else psutil, else None
    vsz: int | None
    respawn_count: int
    harakiri_count: int
    last_spawn: float
    rps: float | None = None
    eps: float | None = None
    busy_pct: float | None = None  # Δrunning_time/(Δt·threads), 0-100
    cpu_pct: float | None = None  # of one core
    mean_rt_ms: float | None = None
    request_age: float | None = None  # oldest in-flight request on this worker, seconds
    requests_in_flight: tuple[RequestView, ...] = ()
    cores_requests: tuple[int, ...] = ()
    static_requests: int = 0
    # 0 from the master's respawn until the worker enters its loop (core/uwsgi.c
    # `uwsgi_ignition`), after its own signal handlers and, under lazy-apps, the app's load
    accepting: bool = True

    @property
    def live(self) -> bool:
        return self.status != "cheap" and self.pid > 0


@dataclass(frozen=True)
class SocketView:
    name: str
    proto: str
    unix: bool
    queue: int | None  # connections waiting; None when unknown
    backlog: int | None  # the kernel's backlog; None when unknown
    source: Literal["stats", "kernel", "none"]  # where queue/backlog come from

    @property
    def fill(self) -> float | None:
        if self.queue is None or not self.backlog:
            return None
        return self.queue / self.backlog

    @property
    def full(self) -> bool:
        """A queue peaks at backlog+1: at the backlog it is full and the kernel drops."""
        return (
            self.backlog is not None and self.queue is not None and self.queue >= self.backlog > 0
        )


@dataclass(frozen=True)
class VassalView:
    name: str
    pid: int
    ready: bool
    accepting: bool
    respawns: int
    born: float
    last_mod: float


@dataclass(frozen=True, slots=True)  # slots: the window holds thousands
class Frame:
    source: str
    t: float
    mono: float
    kind: FrameKind
    dt: float | None = None  # seconds since the previous good poll
    error: str | None = None
    disconnected_since: float | None = None
    version: str = ""
    master_pid: int = 0
    loaded_at: float | None = None  # epoch of the last (re)load, best estimate
    reloads_seen: int = 0
    emperor: bool = False
    stats_repairs: int = 0  # request strings repaired in this poll's document (core/repair.py)
    vassals: tuple[VassalView, ...] = ()
    # workers
    workers_max: int = 0
    live: int = 0
    busy: int = 0
    idle: int = 0
    cheap: int = 0
    threads: int = 1
    workers: tuple[WorkerView, ...] = ()
    # traffic
    requests_total: int = 0
    exceptions_total: int = 0
    rps: float | None = None
    eps: float | None = None
    mean_rt_ms: float | None = None  # Δrunning_time/Δrequests: the true mean
    avg_rt_ms: float | None = None  # uWSGI's avg_rt, a running half-life average
    littles_l: float | None = None  # mean requests in service, Δrunning_time/Δt
    busy_ratio: float | None = None  # littles_l / (live · threads)
    static_share: float | None = None  # share of requests served as static files
    # queues
    sockets: tuple[SocketView, ...] = ()
    listen_overflows_delta: int | None = None  # host-wide TcpExtListenOverflows growth
    listen_drops_delta: int | None = None
    # host
    cpu_count: int | None = None
    effective_cpus: float | None = None
    host_cpu_pct: float | None = None  # of all host CPUs, 0-100
    # of that, at a positive nice: batch work the kernel gives way to ours
    host_nice_pct: float | None = None
    instance_cpu_cores: float | None = None  # cores the instance used (1.0 = one full core)
    # of that, what the host counts as niced: the user time of its processes at a positive
    # nice (`uwsgi --prio`, or started under `nice`; the kernel counts their system time as
    # system), which is in the host's niced CPU and not the instance's to take
    instance_niced_cores: float | None = None
    # mean number of requests waiting for a CPU: the workers' run-queue wait / Δt, each in its
    # busy share (an idle worker woken for a new connection waits outside any request)
    runq_cores: float | None = None
    # with threads: the mean share of the poll each process's GIL was held or wanted, its
    # threads' CPU plus run-queue time over the poll, at most 1 (None: one thread each)
    gil_busy: float | None = None
    # busy workers (status "busy" in the stats) asleep, S or D, when /proc was read just after
    # the stats: in a request and waiting on IO, not on a CPU or for one (a snapshot, one a
    # poll; from Prometheus, their mean over the step); None: threaded processes (a
    # process's state is its main thread's), or unread
    busy_blocked: float | None = None
    somaxconn: int | None = None
    mem_total_rss: int | None = None
    mem_per_worker: int | None = None
    mem_source: Literal["stats", "psutil", "none"] = "none"
    mem_available: int | None = None
    mem_limit: int | None = None
    memory_report: bool = False
    # health
    harakiri_total: int = 0
    respawns_total: int = 0
    harakiri_delta: int | None = None
    respawns_delta: int | None = None
    signal_queue: int = 0
    read_ms: float | None = None

    @property
    def ok(self) -> bool:
        return self.kind != "error"

    @property
    def has_rates(self) -> bool:
        return self.kind == "ok"

    @property
    def queue_full(self) -> bool:
        return any(s.full for s in self.sockets)

    @property
    def paused(self) -> int:
        """Live workers that read `pause`: someone sent `p` on the FIFO. The pause is the
        master's; a worker still in its request reads `busy` until that ends."""
        return sum(1 for w in self.workers if w.live and w.status == "pause")

    @property
    def since_reload(self) -> float | None:
        return None if self.loaded_at is None else max(0.0, self.t - self.loaded_at)

    @property
    def host_contended_pct(self) -> float | None:
        """Host CPU busy at nice 0 or below, and the instance's own at any nice: what others
        take that the workers cannot, plus what the workers use. (An instance run at a
        positive nice is in the host's niced CPU: counted as niced batch work, its own CPU
        read as free for it, and it never read as saturated.)"""
        if self.host_cpu_pct is None:
            return None
        return max(self.host_cpu_pct - (self.others_nice_pct or 0.0), 0.0)

    @property
    def others_nice_pct(self) -> float | None:
        """Host CPU busy at a positive nice in processes not the instance's (0-100): batch
        work that gives way to the workers."""
        if self.host_nice_pct is None:
            return None
        if not self.instance_niced_cores or not self.cpu_count:
            return self.host_nice_pct
        return max(self.host_nice_pct - self.instance_niced_cores / self.cpu_count * 100, 0.0)

    @property
    def cpu_ms_per_request(self) -> float | None:
        """CPU milliseconds the instance spent per request served."""
        if not self.rps or self.instance_cpu_cores is None:
            return None
        return self.instance_cpu_cores / self.rps * 1000

    @property
    def blocked_ms_per_request(self) -> float | None:
        """Milliseconds per request the busy workers slept (Little: asleep / X)."""
        if not self.rps or self.busy_blocked is None:
            return None
        return self.busy_blocked / self.rps * 1000

    @property
    def runq_ms_per_request(self) -> float | None:
        """Milliseconds per request the workers waited for a CPU (the kernel's run queue)."""
        if not self.rps or self.runq_cores is None:
            return None
        return self.runq_cores / self.rps * 1000

    @property
    def own_cpu_share(self) -> float | None:
        """Instance CPU against the CPUs it may use (1.0 = every effective CPU busy), whatever
        the neighbours hold. None below 0.01 CPU, the smallest cgroup quota (1 ms a 100 ms
        period): no real limit. The CPU saturation decisions read is
        `uwsgitune.core.signals.cpu_saturation` (against the CPU the instance can get)."""
        if self.instance_cpu_cores is None or not self.effective_cpus:
            return None
        if self.effective_cpus < 0.01:
            return None
        return self.instance_cpu_cores / self.effective_cpus

    @property
    def cpu_saturation(self) -> float | None:
        """The old name of `own_cpu_share` (`watch --json` still shows it by this name)."""
        return self.own_cpu_share


# A frame's fields in declaration order (its __init__'s), read in one C call: the window
# copies a frame or two every poll, and `dataclasses.replace` walks the ~60 fields in Python.
FIELD_NAMES = tuple(f.name for f in fields(Frame))
_FIELD_INDEX = {name: i for i, name in enumerate(FIELD_NAMES)}
field_values = attrgetter(*FIELD_NAMES)


def with_fields(frame: Frame, changes: dict[str, Any]) -> Frame:
    """`dataclasses.replace(frame, **changes)` for a `Frame`, in a fraction of its time."""
    values = list(field_values(frame))
    for name, value in changes.items():
        values[_FIELD_INDEX[name]] = value
    return Frame(*values)
