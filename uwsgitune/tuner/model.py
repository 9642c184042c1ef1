"""The sizing model: how many workers the CPUs and the IO share of a request need. Pure.

Theory of operation
-------------------
A request spends `cpu` ms on a CPU and `io` ms waiting for something else (a database, an
upstream, a sleep); when more threads are runnable than there are CPUs it also waits `runq`
ms for a CPU. uWSGI's running_time gives the true mean W = cpu + runq + io per request, the
process accounting gives cpu (CPU time over requests) and the kernel's schedstat gives runq,
so io = W - cpu - runq. That holds on a pool whose CPUs are saturated too, where W alone
would count waiting for a CPU as IO and ask for ever more workers.

A request in service is on a CPU cpu / (cpu + io) of its time, so the CPUs the instance can
get are kept busy by C = cpus x (cpu + io) / cpu requests in service. Fewer leave CPUs idle
while requests queue; more only share the same CPUs, stretch every request, and evict each
other's caches at every context switch (100 workers served 280 req/s on 4 cores where 6
served 449). The estimate is C x `cpu_workers_per_cpu` (the spare concurrency that absorbs
the randomness of arrivals), in processes of `threads` threads each, and, with threads that
share a GIL, never fewer processes than CPUs.

The CPUs the instance can get are its effective CPUs (affinity, cgroup quota) less what the
rest of the host keeps busy. Figures are request-weighted over the polls given, so a quiet
poll weighs little; too few requests give no estimate.

Demand is sized by square-root staffing: L requests in service (Little's law) need
L + beta x sqrt(L) threads, so that a request rarely waits for a worker. The spare share
shrinks as the pool grows (L = 4 needs 8, L = 40 needs 53, L = 100 needs 120), where a fixed
target busy ratio over-provisions large pools and under-provisions small ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev

from uwsgitune.core.frame import Frame

MIN_REQUESTS = 30  # fewer requests than this over the polls: no estimate
MIN_CPU_MS = 0.02  # less CPU per request than this: the CPUs do not bound the count
CONTENDED = 0.85  # host CPU busy share from which, without schedstat, W - cpu is not IO


@dataclass(frozen=True)
class Estimate:
    """Processes that keep the CPUs busy without oversubscribing them, and the figures behind."""

    workers: int | None  # None: the CPUs set no bound (next to no CPU per request)
    cpu_ms: float  # CPU per request
    runq_ms: float | None  # waiting for a CPU per request (None: schedstat unreadable)
    io_ms: float  # waiting for anything else per request
    cpus: float  # CPUs the instance can get
    concurrency: float  # requests in service that keep those CPUs busy
    spread: float  # relative standard error of the concurrency over the polls
    threads: int

    @property
    def cpu_share(self) -> float:
        """Share of a request's uncontended time spent on a CPU."""
        total = self.cpu_ms + self.io_ms
        return self.cpu_ms / total if total > 0 else 1.0

    def evidence(self) -> dict[str, float | int | None]:
        return {
            "cpu_ms": round(self.cpu_ms, 2),
            "runq_ms": None if self.runq_ms is None else round(self.runq_ms, 2),
            "io_ms": round(self.io_ms, 2),
            "cpus_available": round(self.cpus, 2),
            "estimate": self.workers,
            "threads": self.threads,
        }


def workers_for(in_service: float, threads: int, beta: float) -> int:
    """Processes of `threads` threads that serve `in_service` requests without queueing."""
    load = max(in_service, 0.0)
    return math.ceil((load + beta * math.sqrt(load)) / max(threads, 1) - 1e-9)


def available_cpus(f: Frame) -> float | None:
    """Effective CPUs less what other processes on the host keep busy (at least half a CPU).
    Work at a positive nice does not count: the kernel gives way to the workers."""
    eff = f.effective_cpus
    if not eff:
        return None
    busy = f.host_contended_pct
    if busy is None or not f.cpu_count or f.instance_cpu_cores is None:
        return eff
    others = busy / 100 * f.cpu_count - f.instance_cpu_cores
    return max(min(eff, f.cpu_count - max(others, 0.0)), 0.5)


def _weighted(frames: Sequence[Frame]) -> tuple[float, float, float | None, float] | None:
    """(requests, cpu ms, runq ms, mean response ms) per request over the frames."""
    req = cpu = rt = runq = 0.0
    runq_known = True
    for f in frames:
        if not f.rps or f.dt is None or f.instance_cpu_cores is None or f.mean_rt_ms is None:
            continue
        n = f.rps * f.dt
        req += n
        cpu += f.instance_cpu_cores * f.dt * 1000
        rt += f.mean_rt_ms * n
        if f.runq_cores is None:
            runq_known = False
        else:
            runq += f.runq_cores * f.dt * 1000
    if req < MIN_REQUESTS:
        return None
    return req, cpu / req, (runq / req if runq_known else None), rt / req


def _contended(frames: Sequence[Frame]) -> bool:
    busy = [f.host_contended_pct / 100 for f in frames if f.host_contended_pct is not None]
    return bool(busy) and fmean(busy) >= CONTENDED


def _concurrency(cpus: float, cpu_ms: float, io_ms: float) -> float:
    return cpus * (cpu_ms + io_ms) / cpu_ms


def _spread(frames: Sequence[Frame], cpus: float) -> float:
    """Relative standard error of the per-poll concurrency estimates."""
    per = []
    for f in frames:
        c, q, w = f.cpu_ms_per_request, f.runq_ms_per_request, f.mean_rt_ms
        if c and c >= MIN_CPU_MS and w is not None:
            per.append(_concurrency(cpus, c, max(w - c - (q or 0.0), 0.0)))
    if len(per) < 2:
        return 1.0
    return pstdev(per) / fmean(per) / math.sqrt(len(per))


def estimate(frames: Sequence[Frame], per_cpu: float) -> Estimate | None:
    """The model's worker count from the frames of one regime (same live count, settled)."""
    if not frames:
        return None
    totals = _weighted(frames)
    cpus = available_cpus(frames[-1])
    if totals is None or cpus is None:
        return None
    _req, cpu_ms, runq_ms, rt_ms = totals
    if runq_ms is None and _contended(frames):
        return None  # waiting for a CPU would be read as IO: no honest estimate
    threads = max(frames[-1].threads, 1)
    io_ms = max(rt_ms - cpu_ms - (runq_ms or 0.0), 0.0)
    if cpu_ms < MIN_CPU_MS:
        return Estimate(None, cpu_ms, runq_ms, io_ms, cpus, math.inf, 0.0, threads)
    conc = _concurrency(cpus, cpu_ms, io_ms)
    workers = math.ceil(conc * per_cpu / threads - 1e-9)
    if threads > 1:
        workers = max(workers, math.ceil(cpus))  # one GIL per process: a CPU each at most
    spread = _spread(frames, cpus)
    return Estimate(max(workers, 1), cpu_ms, runq_ms, io_ms, cpus, conc, spread, threads)
