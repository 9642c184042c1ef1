"""The staffing model: how many workers the CPUs and the IO share of a request need. Pure.

The tuner decides with it and the rules' findings quote it (`uwsgitune.rules.build`), each
with the settings it was given, so a finding and a decision count workers alike. It lives in
core/ because both read it: the rules never import the tuner.

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
share a GIL, never fewer processes than `cpu_workers_per_cpu` per CPU: a process keeps at
most one CPU busy, so a GIL-bound pool needs the processes a one-thread pool would.

A thread waiting for its process's GIL sleeps on a lock: the kernel counts that as neither
CPU nor run-queue wait, so W - cpu - runq holds the GIL wait as well as the IO. Each
process's GIL is one server, held or wanted `gil_busy` of the time (its threads' CPU and
run-queue time, at most 1); a single server that busy makes a request wait
cpu x u / (1 - u) for it (M/M/1). That much of the remainder is the GIL's, the rest IO: a
CPU-bound threaded pool (u near 1) has next to no IO, an IO-bound one (u near 0) all of it.

The run-queue wait counted is each worker's in its busy share of the poll: a worker woken for
a connection another one takes (the thundering herd of idle workers on one socket) waits for
a CPU outside any request. The share is the poll's running time, which uWSGI adds when a
request ends, so a worker in one request through the whole poll counts whole
(`hostview._busy_shares`): else requests that outlast the poll lose the wait of every poll
but the last, and it is read as IO (64 workers on a CPU-bound Django page: 14.5 s of IO read
in a request that waited on a CPU nearly all its 16 s). The split is exact when every worker
is busy; with idle workers on saturated CPUs it leaves part of a request's wait for a CPU in
io, so the estimate errs high (measured, 64 workers on 2 CPUs: 13 ms of IO read in a pure
3 ms CPU request, 17 in a 2 ms CPU + 12 ms IO one; at 24 workers, all busy, 12.0 of 12). The
policy leans on that direction.

The remainder errs high for a second reason: schedstat reports a task's wait for a CPU when
the task gets one, and at 64 runnable workers on 2 CPUs that is often a later poll, while
a request that ends in the polls counted brings all its time, some of it spent before them.
On a CPU-bound Django page at 64 workers the first estimate read 240 ms of "IO" in a
request that waited for a CPU nearly all its time, and went to 17 workers where 4 do. So
the IO is also read directly: at each poll, the busy workers' scheduler states
(/proc/PID/stat, read just after the stats: `Frame.busy_blocked`) count the requests in
service that sleep (S, D), and their mean over the polls, by Little's law, is the IO a
request waits. That sample errs high only (a worker that ended its request between the
two reads sleeps in accept), so the lesser of the two is taken, once the polls have seen
`MIN_OBSERVED` busy workers. Threaded processes keep the remainder: a process's state is
its main thread's.

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
from statistics import fmean

from uwsgitune.core.frame import Frame
from uwsgitune.core.settings import SharedSettings
from uwsgitune.core.signals import requests_waiting

MIN_REQUESTS = 30  # fewer requests than this over the polls: no estimate
MIN_OBSERVED = 30  # fewer busy workers' states than this over the polls: IO is the remainder
MIN_CPU_MS = 0.02  # less CPU per request than this: the CPUs do not bound the count
# host CPU busy share from which, without schedstat, W - cpu is not IO: the CPU is used up
CONTENDED: float = SharedSettings.model_fields["cpu_saturated"].default
GIL_CAP = 0.95  # a GIL busier than this is read as saturated (its M/M/1 wait is unbounded)
# A request at least this much on a CPU (of its CPU and IO time): next to no IO to hide.
CPU_ONLY = 0.9
CPU_KEPT = 0.97  # the share of the CPUs a fed pool without spare keeps busy (`fed_count`)
FED_POLLS = 2  # the recent polls `sized` reads the requests in the instance over, at least
RECENT_POLLS = 3  # the recent polls the rules give `sized` (the tuner's short-term means')


def pstdev(values: Sequence[float]) -> float:
    """The population standard deviation in floats (at most 1 ulp from `statistics.pstdev`,
    which works in exact fractions and costs 30 times as much: a step reads it twice)."""
    n = len(values)
    mu = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mu) * (v - mu) for v in values) / n)


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
    gil_busy: float | None = None  # with threads: how busy each process's GIL was

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
            **({} if self.gil_busy is None else {"gil_busy": round(self.gil_busy, 2)}),
        }


def workers_holding(in_service: float, threads: int) -> int:
    """Processes of `threads` threads that hold `in_service` requests (Little's L) at once.
    L is a mean of noisy polls: a tenth of a worker past a whole count is that noise (16
    clients on 16 workers read L = 16.02 at 2% noise)."""
    return math.ceil(max(in_service, 0.0) / max(threads, 1) - 0.1)


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


@dataclass(frozen=True)
class _Totals:
    requests: float
    cpu_ms: float
    runq_ms: float | None
    rt_ms: float
    gil_busy: float | None  # request-weighted; None with one thread per process
    blocked_ms: float | None  # asleep in a request, from the busy workers' states
    observed: int  # busy workers whose state those polls read


def _counted(f: Frame) -> bool:
    """A poll whose requests the model counts: rated, with the instance's CPU read."""
    return (
        bool(f.rps)
        and f.dt is not None
        and f.instance_cpu_cores is not None
        and (f.mean_rt_ms is not None)
    )


def requests_counted(frames: Sequence[Frame]) -> float:
    """The requests `estimate` counts over these frames (it answers from `MIN_REQUESTS`)."""
    return sum(f.rps * f.dt for f in frames if _counted(f) and f.rps and f.dt)


def _weighted(frames: Sequence[Frame]) -> _Totals | None:
    """Per-request figures over the frames, each poll weighted by its requests."""
    req = cpu = rt = runq = gil = blocked = 0.0
    runq_known = gil_known = blocked_known = True
    observed = 0
    for f in frames:
        if not _counted(f):
            continue
        assert f.rps and f.dt is not None and f.instance_cpu_cores is not None
        assert f.mean_rt_ms is not None
        n = f.rps * f.dt
        req += n
        cpu += f.instance_cpu_cores * f.dt * 1000
        rt += f.mean_rt_ms * n
        runq_known = runq_known and f.runq_cores is not None
        runq += (f.runq_cores or 0.0) * f.dt * 1000
        gil_known = gil_known and f.gil_busy is not None
        gil += (f.gil_busy or 0.0) * n
        blocked_known = blocked_known and f.busy_blocked is not None
        blocked += (f.busy_blocked or 0) * f.dt * 1000
        observed += f.busy
    if req < MIN_REQUESTS:
        return None
    return _Totals(
        req,
        cpu / req,
        runq / req if runq_known else None,
        rt / req,
        gil / req if gil_known else None,
        blocked / req if blocked_known else None,
        observed,
    )


def _io_seen(rest: float, blocked_ms: float | None) -> float:
    """The IO share of a request: what remains of its time (`io_ms`), or what the busy
    workers' states saw of it when that is less. Each errs one way only: the remainder
    counts as IO the wait for a CPU that schedstat has not reported yet (and the time a
    request spent before the polls counted, where it began in one), and the states count as
    IO a worker that ended its request between the stats and /proc (it sleeps in accept).
    Neither errs low, so the lesser is the nearer."""
    return rest if blocked_ms is None else min(rest, blocked_ms)


def io_ms(rt_ms: float, cpu_ms: float, runq_ms: float | None, gil_busy: float | None) -> float:
    """What remains of a request's time once its CPU, its wait for a CPU and its wait for
    the GIL are taken out."""
    rest = max(rt_ms - cpu_ms - (runq_ms or 0.0), 0.0)
    if gil_busy is None:
        return rest
    u = min(max(gil_busy, 0.0), GIL_CAP)
    return max(rest - cpu_ms * u / (1 - u), 0.0)


def _contended(frames: Sequence[Frame], saturated: float) -> bool:
    busy = [f.host_contended_pct / 100 for f in frames if f.host_contended_pct is not None]
    return bool(busy) and fmean(busy) >= saturated


def _concurrency(cpus: float, cpu_ms: float, io_ms: float) -> float:
    return cpus * (cpu_ms + io_ms) / cpu_ms


def _spread(frames: Sequence[Frame], cpus: float, states: bool) -> float:
    """Relative standard error of the per-poll concurrency estimates (`states`: each poll's
    IO as `estimate` reads it, with the busy workers' states)."""
    per = []
    for f in frames:
        c, q, w = f.cpu_ms_per_request, f.runq_ms_per_request, f.mean_rt_ms
        if c and c >= MIN_CPU_MS and w is not None:
            io = io_ms(w, c, q, f.gil_busy)
            per.append(
                _concurrency(cpus, c, _io_seen(io, f.blocked_ms_per_request) if states else io)
            )
    if len(per) < 2:
        return 1.0
    return pstdev(per) / fmean(per) / math.sqrt(len(per))


def estimable(frames: Sequence[Frame], saturated: float = CONTENDED) -> bool:
    """Whether `estimate` can answer on these frames once they hold `MIN_REQUESTS`: the
    instance's CPU is read, the CPUs it can get are known, and where the host is contended
    the wait for a CPU is read too (else it would be counted as IO)."""
    if not frames or frames[-1].instance_cpu_cores is None or available_cpus(frames[-1]) is None:
        return False
    return frames[-1].runq_cores is not None or not _contended(frames, saturated)


def estimate(
    frames: Sequence[Frame], per_cpu: float, saturated: float = CONTENDED
) -> Estimate | None:
    """The model's worker count from the frames of one regime (same live count, settled).
    `saturated`: the host CPU busy share at which the CPU is used up (`cpu_saturated`)."""
    if not frames:
        return None
    totals = _weighted(frames)
    cpus = available_cpus(frames[-1])
    if totals is None or cpus is None:
        return None
    cpu_ms, runq_ms = totals.cpu_ms, totals.runq_ms
    if runq_ms is None and _contended(frames, saturated):
        return None  # waiting for a CPU would be read as IO: no honest estimate
    threads = max(frames[-1].threads, 1)
    gil = totals.gil_busy if threads > 1 else None
    io = io_ms(totals.rt_ms, cpu_ms, runq_ms, gil)
    states = threads == 1 and totals.blocked_ms is not None and totals.observed >= MIN_OBSERVED
    if states:
        io = _io_seen(io, totals.blocked_ms)
    if cpu_ms < MIN_CPU_MS:
        return Estimate(None, cpu_ms, runq_ms, io, cpus, math.inf, 0.0, threads, gil)
    conc = _concurrency(cpus, cpu_ms, io)
    workers = math.ceil(conc * per_cpu / threads - 1e-9)
    if threads > 1:  # one GIL a process, a CPU each at most: the CPUs' share in processes
        workers = max(workers, math.ceil(cpus * per_cpu - 1e-9))
    spread = _spread(frames, cpus, states)
    return Estimate(max(workers, 1), cpu_ms, runq_ms, io, cpus, conc, spread, threads, gil)


def in_instance(f: Frame) -> float:
    """Requests in the instance at a poll: in service (Little's L) and queued."""
    return (f.littles_l or 0.0) + (requests_waiting(f) or 0)


def fed_count(cpus: float, cpu_share: float, top: int) -> int:
    """The fewest workers, each always holding a request (fed by a queue), that keep
    `CPU_KEPT` of `cpus` busy: each worker wants a CPU `cpu_share` of its time and waits on
    IO the rest, independently of the others, so the CPUs busy are min(X, cpus), X binomial
    (n, cpu_share): the finite-source model. At most `top`. All CPU: the CPUs' count; 92%
    CPU on 1.8 CPUs: 3 (2 keep 93% of them busy); 90% on 16: 18."""
    floor = max(math.ceil(cpus - 1e-9), 1)
    if cpu_share >= 1 - 1e-6 or floor >= top:
        return min(floor, top)
    lp, lq = math.log(cpu_share), math.log1p(-cpu_share)
    for n in range(floor, top):
        lg = math.lgamma(n + 1)
        busy = sum(
            min(k, cpus)
            * math.exp(lg - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq)
            for k in range(1, n + 1)
        )
        if busy >= CPU_KEPT * cpus:
            return n
    return top


def sized(m: Estimate, recent: Sequence[Frame]) -> int | None:
    """The model's count, without its spare where the spare has nothing to absorb: one-
    thread workers whose requests are almost all CPU (`CPU_ONLY`), and requests enough in
    the instance, over the `recent` polls (at least `FED_POLLS`) and at the latest, to keep
    twice as many as that count: the rest queue, so each worker ends a request to find the
    next. The spare (`cpu_workers_per_cpu` a CPU) absorbs the randomness of arrivals and of
    IO; fed by a queue, no arrival is random, and with next to no IO the count that keeps
    the CPUs busy through the IO's randomness is `fed_count` (the CPUs' count with none),
    and more only share the CPUs (simulated `thrash` on 16 CPUs, 32 MiB touched a request:
    24 workers served 84% of what 16 did; a CPU-bound Django page on 2 CPUs: 2-3 workers
    best). At 64 workers under 64 clients nothing queues yet, but the 64 requests would
    keep 62 queued on 2 workers. The rules' findings and the tuner both size with this.
    None: the CPUs set no bound."""
    if m.workers is None:
        return None
    if m.threads != 1 or m.cpu_share < CPU_ONLY or len(recent) < FED_POLLS:
        return m.workers
    bare = fed_count(m.cpus, m.cpu_share, m.workers)
    held = [in_instance(f) for f in recent]
    need = 2 * bare
    return bare if fmean(held) >= need and held[-1] >= need else m.workers
