"""A discrete-event uWSGI: the plant bench/sim_boxes.py drives the real tuner through.

One box of `cpus` cores serving a pool of processes x `threads` threads behind a listen
backlog of `listen`, loaded by closed-loop clients or an open-loop rate, in phases:

- **Requests.** A route's request (`route`) takes `cpu_ms` of CPU, then `io_ms` of waiting
  that takes no CPU, each drawn uniformly around its mean (`Costs.cpu_spread`, `io_spread`:
  identical requests started together would stay in step under processor sharing, their
  CPU and IO phases never overlapping, which real jitter breaks). Each also costs the
  rig's `Costs.overhead_cpu_ms` of CPU (uWSGI's parsing and the load generator's share on
  the 2-CPU VM) and the client's `Costs.client_ms` outside the server (connect, send,
  read; exponential): a closed-loop client sends its next request that long after its
  answer, and the latency it measures includes it.
- **The backlog.** A request that finds no free thread waits in the listen queue, first in
  first out. One that finds the queue full (`listen` waiting) is an overflow, counted as
  uWSGI's `listen_queue_errors` is; Linux drops its SYN and the client retransmits it
  `Costs.retry_s` later (its latency keeps counting).
- **The CPUs.** Processor sharing: the n processes that hold CPU work each progress at
  min(1, cpus / n) of a core, and past the cores every runnable process makes each request's
  CPU cost `switch` more (context switches, cold caches: the existing plant's form, its slope
  fitted on the 2-CPU runs; `heap_switch` for a route over a per-worker heap).
  Implemented with a virtual clock: every runnable process advances alike, so one heap keyed
  on the virtual time at which each finishes serves them all (O(log n) an event).
- **The GIL.** A process runs one thread's CPU work at a time: the others wait for it, in
  order (their CPU parts, 1-3 ms, are shorter than Python's 5 ms switch interval), and are not
  in the run queue. IO waits run in parallel.
- **A per-worker heap** (`/ws/N/MIB`): each new worker's first such request builds it
  (`Costs.heap_build_ms` of CPU), and the workers' RSS carries it.
- **Changes.** `set_workers` (a FIFO `+`/`-`) takes effect at the next poll: new workers
  start cold; removed ones are the idle ones first, a busy one leaves after its requests.
  `reload` stops accepting, waits for the requests in service (the pause before `r`),
  then stalls `Costs.reload_stall_s` (the master's cycle and the workers' start), then the
  new pool starts, cold; connections keep queueing meanwhile.
- **Polls.** Once a second, what the interval did (requests, running time, CPU, run-queue
  wait, overflows) and what the poll sees (busy workers, held threads, the listen queue) as a
  `tests.support.instances.Load`, which the real `Tracker` turns into the frame the tuner
  reads (`Instance`): the same frames the real tuner gets, not a re-derivation.

Exact where it matters for the tuner's inputs and for p99 (every request is an event; no
aggregation). Latencies are kept as 5% histogram buckets a second (the benchmark's
HIST_BASE), so a p99 is within 2.5%.
"""

from __future__ import annotations

import heapq
import math
import random
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.instances import Instance, Load
from uwsgitune.core.frame import Frame, SocketView

MiB = 1024 * 1024
HIST_BASE = 1.05  # latency buckets 5% wide: bucket = round(log(ms) / log(HIST_BASE))
EPOCH = 1_700_000_000.0


@dataclass(frozen=True)
class Costs:
    """The rig's costs, fitted on the real 2-CPU runs (bench/results/tuner64.json; the fit
    is in bench/sim_boxes.py's definitions)."""

    overhead_cpu_ms: float = 0.62  # CPU a request costs besides its app's
    client_ms: float = 1.8  # the client's part of a request, outside the server
    cpu_spread: float = 0.5  # a request's CPU: uniform within +-this share of its mean
    io_spread: float = 0.05  # its wait: the same (a sleep's scheduling jitter)
    switch: float = 0.0013  # more CPU a request per runnable process beyond the cores
    heap_switch: float = 0.023  # the same, for a request over a per-worker heap
    heap_build_ms: float = 200.0  # CPU a new worker spends on its heap, first request
    reload_stall_s: float = 1.0  # no worker serves for this long after the drain
    retry_s: float = 1.0  # a dropped SYN is sent again after this long
    worker_rss: int = 50 * MiB
    mem_per_cpu: int = 2048 * MiB


@dataclass(frozen=True)
class Work:
    """One route's request: app CPU, then waiting, over a per-worker heap of `heap_mib`."""

    cpu_ms: float
    io_ms: float
    heap_mib: int = 0


def route(path: str) -> Work | None:
    """The request of a path of bench/scenario_app.py (None: a route not modelled)."""
    parts = path.strip("/").split("/")
    nums = [float(p) for p in parts[1:] if re.fullmatch(r"\d+(\.\d+)?", p)]
    if parts[0] == "cpu":
        return Work(nums[0] if nums else 10.0, 0.0)
    if parts[0] in ("io", "sleep"):
        return Work(0.0, nums[0] if nums else 100.0)
    if parts[0] == "mixed":
        return Work(nums[0] if nums else 5.0, nums[1] if len(nums) > 1 else 20.0)
    if parts[0] == "lnio":
        return Work(0.0, nums[0] if nums else 30.0)  # its median; the spread is not modelled
    if parts[0] == "ws":
        # fixed work over the heap: 20000 reads ~ 2.2 ms of CPU on the VM (tuner-2's 717
        # req/s on 2 workers, less the overhead)
        n = nums[0] if nums else 10_000
        return Work(
            2.17 * n / 20_000,
            nums[2] if len(nums) > 2 else 0.0,
            int(nums[1]) if len(nums) > 1 else 32,
        )
    return None


@dataclass(frozen=True)
class Phase:
    work: Work
    clients: int | None  # closed loop: this many clients
    rate: float | None  # open loop: requests/s, evenly spaced (the load generator's)
    seconds: float
    poisson: bool = False  # open loop: exponential gaps instead (the queueing tests)


@dataclass
class Proc:
    alive: bool = True
    retiring: bool = False
    inflight: int = 0
    on_cpu: bool = False
    cur: list[Any] | None = None  # the request on the CPU
    gil: deque[list[Any]] = field(default_factory=deque)  # threads waiting for the GIL
    warm: bool = False  # its heap built


@dataclass
class Result:
    seconds: float
    per_second: list[int]
    hist: list[dict[int, int]]
    sum_ms: list[float]  # each second's latencies summed: the exact mean of a window
    live: list[tuple[float, int]] = field(default_factory=list)
    reloads: int = 0
    fifo_moves: int = 0
    overflows: int = 0
    phase_done: list[int] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)

    def rps(self, start: float = 0.0, end: float | None = None) -> float:
        end = self.seconds if end is None else end
        return sum(self.per_second[int(start) : int(end)]) / max(end - start, 1e-9)

    def p(self, q: float, start: float = 0.0, end: float | None = None) -> float:
        """The q-quantile of the latencies (ms) of the requests finished in [start, end)."""
        end = self.seconds if end is None else end
        counts: dict[int, int] = {}
        for h in self.hist[int(start) : int(end)]:
            for b, n in h.items():
                counts[b] = counts.get(b, 0) + n
        return quantile(counts, q)

    def mean_ms(self, start: float = 0.0, end: float | None = None) -> float:
        end = self.seconds if end is None else end
        n = sum(self.per_second[int(start) : int(end)])
        return sum(self.sum_ms[int(start) : int(end)]) / n if n else 0.0

    def mean_live(self, start: float = 0.0) -> float:
        pts = [n for t, n in self.live if t >= start]
        return sum(pts) / len(pts) if pts else 0.0


def quantile(counts: dict[int, int], q: float) -> float:
    total = sum(counts.values())
    if not total:
        return 0.0
    rank, seen = q * (total - 1), 0
    for b in sorted(counts):
        seen += counts[b]
        if seen > rank:
            return float(HIST_BASE**b)
    return float(HIST_BASE ** max(counts))


Tuner = Callable[[float, Frame], "tuple[int, str] | None"]  # (desired, "fifo"|"reload")

ISSUE, IO_DONE, POLL, PHASE, APPLY, UP = range(6)


class Box:
    """One uWSGI on one box (the module's docstring). `run` drives it for `phases`."""

    def __init__(
        self,
        cpus: float,
        live: int,
        *,
        threads: int = 1,
        listen: int = 128,
        workers_max: int = 64,
        costs: Costs | None = None,
        seed: int = 1,
    ) -> None:
        self.cpus, self.threads, self.listen = cpus, threads, listen
        self.workers_max, self.costs = workers_max, costs or Costs()
        self.rng = random.Random(seed)
        self.start_live = live

    # --- the run ---------------------------------------------------------------------

    def run(self, phases: Sequence[Phase], tuner: Tuner | None = None) -> Result:
        c, C, T = self.costs, self.cpus, self.threads
        seconds = sum(p.seconds for p in phases)
        span = math.ceil(seconds) + 2
        res = Result(seconds, [0] * span, [{} for _ in range(span)], [0.0] * span)
        ev: list[tuple[float, int, int, Any]] = []
        seq = 0
        procs: list[Proc] = []
        free: deque[int] = deque()
        queue: deque[list[Any]] = deque()
        cpu: list[tuple[float, int, int]] = []
        client_s, retry = c.client_ms / 1000, c.retry_s
        log_base = math.log(HIST_BASE)
        rand, log = self.rng.random, math.log  # the client's part: exponential, mean client_ms
        cpu_spread, io_spread = c.cpu_spread, c.io_spread
        # the state the integrals read
        n_run = n_insvc = n_busy = 0
        virt, t_last = 0.0, 0.0
        rate = 1.0
        ins_int = busy_int = wait_int = 0.0
        done_count = overflow_count = 0
        accepting = True
        draining: int | None = None  # a reload's new count, while the old pool drains
        live = 0
        work = phases[0].work
        slope = c.switch
        clients = 0
        client_busy: list[bool] = []
        spawned = EPOCH - 1000.0
        t = 0.0

        def push(at: float, kind: int, data: Any) -> None:
            nonlocal seq
            seq += 1
            heapq.heappush(ev, (at, seq, kind, data))

        def set_rate() -> None:
            nonlocal rate
            n = n_run
            rate = (min(1.0, C / n) / (1 + slope * max(n - C, 0))) if n else 1.0

        def spawn(n: int) -> None:
            nonlocal live
            for _ in range(n):
                procs.append(Proc())
                free.extend([len(procs) - 1] * T)
            live += n

        def cpu_of(w: Work, p: Proc) -> float:
            s = (w.cpu_ms * (1 + cpu_spread * (2 * rand() - 1)) + c.overhead_cpu_ms) / 1000
            if w.heap_mib and not p.warm:
                p.warm = True
                s += c.heap_build_ms / 1000
            return s

        def assign(req: list[Any], pid: int) -> None:
            nonlocal n_insvc, n_busy, n_run, seq
            p = procs[pid]
            if p.inflight == 0:
                n_busy += 1
            p.inflight += 1
            n_insvc += 1
            req[3] = pid
            need = cpu_of(req[2], p)
            if p.on_cpu:
                req[4] = need
                p.gil.append(req)
            else:
                p.on_cpu, p.cur = True, req
                seq += 1
                heapq.heappush(cpu, (virt + need, seq, pid))
                n_run += 1
                set_rate()

        def take_slot() -> int | None:
            while free:
                pid = free.popleft()
                p = procs[pid]
                if p.alive and not p.retiring:
                    return pid
            return None

        def arrive(req: list[Any]) -> None:
            nonlocal overflow_count
            if accepting and not queue:
                pid = take_slot()
                if pid is not None:
                    assign(req, pid)
                    return
            if len(queue) < self.listen:
                queue.append(req)
            else:
                overflow_count += 1
                res.overflows += 1
                push(t + retry, ISSUE, req)

        def drain() -> None:
            while queue and accepting:
                pid = take_slot()
                if pid is None:
                    return
                assign(queue.popleft(), pid)

        def release(pid: int) -> None:
            """A thread of `pid` finished its request."""
            nonlocal n_busy, live
            p = procs[pid]
            p.inflight -= 1
            if p.inflight == 0:
                n_busy -= 1
            if p.retiring:
                if p.inflight == 0:
                    p.alive = False
                return
            if accepting and queue:
                assign(queue.popleft(), pid)
            else:
                free.append(pid)

        def complete(req: list[Any]) -> None:
            nonlocal n_insvc, done_count
            n_insvc -= 1
            done_count += 1
            sec = int(t)
            res.per_second[sec] += 1
            ms = (t - req[0] + client_s) * 1000
            res.sum_ms[sec] += ms
            b = round(math.log(ms) / log_base)
            h = res.hist[sec]
            h[b] = h.get(b, 0) + 1
            release(req[3])
            who = req[1]
            if who >= 0:
                client_busy[who] = False
                if who < clients:
                    client_busy[who] = True
                    push(t - client_s * log(1.0 - rand()), ISSUE, [0.0, who, None, -1, 0.0])
            if draining is not None and draining >= 0 and n_insvc == 0:
                begin_stall()

        def begin_stall() -> None:
            nonlocal draining
            assert draining is not None
            push(t + c.reload_stall_s, UP, draining)
            draining = -1  # the stall is under way

        def cpu_done(pid: int) -> None:
            nonlocal n_run, seq
            p = procs[pid]
            req = p.cur
            assert req is not None
            if p.gil:
                nxt = p.gil.popleft()
                p.cur = nxt
                seq += 1
                heapq.heappush(cpu, (virt + nxt[4], seq, pid))
            else:
                p.on_cpu, p.cur = False, None
                n_run -= 1
                set_rate()
            io = req[2].io_ms
            if io > 0:
                push(t + io * (1 + io_spread * (2 * rand() - 1)) / 1000, IO_DONE, req)
            else:
                complete(req)

        def set_workers(n: int) -> None:
            nonlocal live
            if n > live:
                spawn(n - live)
                drain()
                return
            drop = live - n
            alive = [
                i for i in range(len(procs) - 1, -1, -1) if procs[i].alive and not procs[i].retiring
            ]
            order = [i for i in alive if procs[i].inflight == 0] + [
                i for i in alive if procs[i].inflight
            ]
            for pid in order[:drop]:
                p = procs[pid]
                p.retiring = True
                if p.inflight == 0:
                    p.alive = False
            live = n

        def start_clients(n: int) -> None:
            nonlocal clients
            clients = n
            while len(client_busy) < n:
                client_busy.append(False)
            for who in range(n):
                if not client_busy[who]:
                    client_busy[who] = True
                    push(t - client_s * log(1.0 - rand()), ISSUE, [0.0, who, None, -1, 0.0])

        # the start: the pool, the phases, the polls
        spawn(self.start_live)
        at = 0.0
        for i, ph in enumerate(phases):
            push(at, PHASE, i)
            at += ph.seconds
        end = at
        for k in range(1, int(end) + 1):
            push(float(k), POLL, None)
        instance: Instance | None = None
        last = (0.0, 0.0, 0.0, 0.0, 0, 0)  # t, ins, busy, wait, done, overflows
        reload_flag = False
        open_rate: float | None = None
        poisson = False
        pending_apply: int | None = None
        phase_start_done = [0] * len(phases)
        cur_phase = 0

        while True:
            te = ev[0][0] if ev else math.inf
            tc = t_last + (cpu[0][0] - virt) / rate if cpu else math.inf
            nxt = max(min(te, tc), t_last)
            if nxt > end:
                break
            # advance the integrals to `nxt`
            dt = nxt - t_last
            if dt > 0:
                ins_int += n_insvc * dt
                on = n_run if n_run < C else C
                busy_int += on * dt
                wait_int += (n_run - on) * dt
                virt += rate * dt
                t_last = nxt
            t = nxt
            if tc <= te:
                _, _, pid = heapq.heappop(cpu)
                cpu_done(pid)
                continue
            _, _, kind, data = heapq.heappop(ev)
            if kind == ISSUE:
                req = data
                if req[2] is None:  # a new request of a closed-loop client
                    if req[1] >= clients:
                        client_busy[req[1]] = False
                        continue
                    req[0], req[2] = t, work
                arrive(req)
            elif kind == IO_DONE:
                complete(data)
            elif kind == PHASE:
                ph = phases[data]
                cur_phase = data
                phase_start_done[data] = done_count
                work = ph.work
                slope = c.heap_switch if work.heap_mib else c.switch
                set_rate()
                start_clients(ph.clients or 0)
                open_rate, poisson = ph.rate, ph.poisson
                if open_rate:
                    push(t, APPLY + 100, data)  # the open loop's first arrival
            elif kind == APPLY + 100:  # an open-loop arrival
                if cur_phase == data and open_rate:
                    arrive([t, -1, work, -1, 0.0])
                    gap = 1.0 / open_rate
                    push(t - gap * log(1.0 - rand()) if poisson else t + gap, APPLY + 100, data)
            elif kind == APPLY:
                if pending_apply is not None:
                    set_workers(pending_apply)
                    pending_apply = None
            elif kind == UP:
                draining = None
                accepting = True
                for p in procs:
                    p.alive = False
                free.clear()
                live = 0
                spawn(data)
                drain()
            elif kind == POLL:
                if tuner is None:
                    res.live.append((t, live))
                    continue
                span_t = t - last[0]
                x = (done_count - last[4]) / span_t
                ins = (ins_int - last[1]) / span_t
                cores = (busy_int - last[2]) / span_t
                wait = (wait_int - last[3]) / span_t
                n = max(live, 1)
                rss = c.worker_rss + work.heap_mib * MiB
                load = Load(
                    live=live,
                    cheap=max(self.workers_max - live, 0),
                    threads=T,
                    busy=min(n_busy, live),
                    held=n_insvc if T > 1 else None,
                    # the busy processes in IO, not on a CPU or waiting for one
                    blocked=max(min(n_busy - n_run, live), 0) if T == 1 else None,
                    rps=x,
                    in_service=ins,
                    worker_cpu=cores / n,
                    runq=wait / n,
                    host_busy=min(cores, C),
                    cpus=max(round(C), 1),
                    effective_cpus=C,
                    somaxconn=4096,
                    rss=rss,
                    mem_total=int(c.mem_per_cpu * C),
                    mem_available=max(int(c.mem_per_cpu * C) - live * rss, 0),
                    sockets=(
                        SocketView(
                            "127.0.0.1:9000", "http", False, len(queue), self.listen, "stats"
                        ),
                    ),
                    listen_overflows=overflow_count - last[5],
                    avg_rt_us=round(ins / x * 1e6) if x else 0,
                    spawned=spawned,
                )
                last = (t, ins_int, busy_int, wait_int, done_count, overflow_count)
                if instance is None:
                    instance = Instance("sim", EPOCH, 0.0)
                    instance.frame(t - 1, load)
                frame = instance.frame(t, load, reload=reload_flag)
                reload_flag = False
                res.live.append((t, live))
                wish = tuner(t, frame)
                if wish is None or draining is not None:
                    continue
                desired, via = wish
                if via == "reload":
                    res.reloads += 1
                    accepting = False
                    draining = desired
                    spawned = EPOCH + t + 1
                    reload_flag = True
                    live = desired  # the stats show the new count from the next poll
                    if n_insvc == 0:
                        begin_stall()
                else:
                    res.fifo_moves += 1
                    pending_apply = desired
                    push(t + 0.999, APPLY, None)
        res.phase_done = [
            (phase_start_done[i + 1] if i + 1 < len(phases) else done_count) - phase_start_done[i]
            for i in range(len(phases))
        ]
        return res
