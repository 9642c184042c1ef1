"""A small simulated uWSGI for closed-loop policy tests: queueing arithmetic, no I/O.

Closed loop: `clients` keep one request each in the system. Open loop: `rate` requests/s.
A request needs `cpu_ms` of CPU and `io_ms` of waiting; the CPUs cap the throughput at
cpus / cpu. Requests beyond the live workers wait in the listen queue.

Each poll is a synthetic stats document and host sample (`tests.support.instances.Instance`)
that the real `Tracker` turns into the frame the policy reads.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tests.support.instances import Instance, Load
from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide

MiB = 1024 * 1024


@dataclass
class Plant:
    live: int
    workers_max: int = 8
    cpus: float = 2.0
    cpu_ms: float = 10.0
    io_ms: float = 0.0
    clients: int | None = 8
    rate: float | None = None
    noise: float = 0.02
    mem_per_worker: int = 50 * MiB
    mem_available: int = 8 * 1024 * MiB  # with no worker running
    seed: int = 1
    reload_at: float | None = None
    schedstat: bool = True  # the run-queue wait is known
    contention_above: int | None = None  # past this count a lock costs 5% per worker
    others: float | None = None  # cores other processes keep busy (None: host CPU unknown)
    threads: int = 1  # per process (the queueing arithmetic counts processes)
    host_busy: float | None = None  # cores busy on the host (None: the host's CPU unknown)
    # A closed loop as large as the pool: a client's next request is queued before its
    # worker shows idle, so the listen queue reads up to 2 x this (16 on 16 read ~1).
    overlap: float = 0.0
    # Each thread is a slot (an IO-bound threaded pool): the queueing arithmetic counts
    # threads, and the stats show the requests each worker's cores hold.
    thread_slots: bool = False
    rng: random.Random = field(init=False)
    instance: Instance | None = field(init=False, default=None)
    last_t: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def steady(self, n: int) -> tuple[float, float, float]:
        """(throughput/s, requests in service, queued) at `n` live workers."""
        s = (self.cpu_ms + self.io_ms) / 1000
        cpu = self.cpu_ms_at(n)
        cpus = self.cpus - (self.others or 0.0)
        cpu_cap = cpus / (cpu / 1000) if cpu else float("inf")
        if self.contention_above is not None and n > self.contention_above:
            cpu_cap = min(cpu_cap, self.contention_above / s * 0.95 ** (n - self.contention_above))
        n = n * self.threads if self.thread_slots else n
        if self.clients is not None:
            in_service = float(min(n, self.clients))
            x = min(in_service / s, cpu_cap)
            return x, in_service, float(max(self.clients - n, 0))
        assert self.rate is not None
        capacity = min(n / s, cpu_cap)
        if self.rate < capacity * 0.97:
            return self.rate, min(self.rate * s, n), 0.0
        return capacity, float(n), 20.0

    def cpu_ms_at(self, n: int) -> float:
        """CPU per request at `n` live workers: context switches and cold caches cost 1% more
        CPU per worker beyond the CPUs."""
        return self.cpu_ms * (1 + 0.01 * max(n - self.cpus, 0))

    def load(self) -> Load:
        """One second at the current count: throughput, requests in service, CPU and the
        run-queue wait of processor sharing, the listen queue."""
        x, in_service, queue = self.steady(self.live)
        slots = self.live * (self.threads if self.thread_slots else 1)
        if self.overlap and self.clients == slots:
            queue += self.rng.uniform(0, 2 * self.overlap)
        x *= 1 + self.rng.gauss(0, self.noise)
        cores = x * self.cpu_ms_at(self.live) / 1000
        # Processor sharing: requests not waiting on IO are on a CPU or in its run queue.
        runq = max(in_service - x * self.io_ms / 1000 - cores, 0.0)
        return Load(
            live=self.live,
            cheap=max(self.workers_max - self.live, 0),
            threads=self.threads,
            busy=min(-(-round(in_service) // self.threads), self.live)
            if self.thread_slots
            else round(in_service),
            held=round(in_service) if self.thread_slots else None,
            rps=x,
            in_service=in_service,
            worker_cpu=cores / self.live if self.live else 0.0,
            # each live worker waits in its busy share (in_service / live) of the poll
            runq=(runq / in_service if in_service else 0.0) if self.schedstat else None,
            host_busy=self._host_busy(cores),
            cpus=round(self.cpus),
            effective_cpus=self.cpus,
            somaxconn=None,
            rss=self.mem_per_worker,
            mem_available=max(self.mem_available - self.live * self.mem_per_worker, 0),
            sockets=(SocketView("127.0.0.1:9000", "http", False, round(queue), 100, "stats"),),
            spawned=1_700_000_000 + (self.reload_at or -1000.0),
        )

    def _host_busy(self, cores: float) -> float | None:
        """Cores busy on the host: as given, or the instance's and the others'."""
        if self.host_busy is not None:
            return self.host_busy
        return None if self.others is None else min(cores + self.others, self.cpus)

    def frame(self, t: float) -> Frame:
        """The poll at `t` (a new instance when `t` goes back: a new run of polls)."""
        load = self.load()
        if self.instance is None or self.last_t is None or t <= self.last_t:
            self.instance = Instance("plant", 1_700_000_000, 0.0)
            self.instance.frame(t - 1, load)  # the first poll has no rates
        self.last_t = t
        return self.instance.frame(t, load, reload=self.reload_at == t)


def run(
    plant: Plant,
    settings: TunerSettings,
    seconds: int,
    shape: Callable[[Plant, int], None] | None = None,
) -> Iterator[tuple[int, Frame, Decision]]:
    """The policy in closed loop with the plant, one poll per second; changes apply at once."""
    frames: list[Frame] = []
    state = TunerState()
    for t in range(seconds):
        if shape is not None:
            shape(plant, t)
        frame = plant.frame(float(t))
        frames = [*frames[-300:], frame]
        d = decide(frames, state, settings, now=float(t))
        state = d.state
        if d.is_change:
            plant.live = d.desired
            if d.via == "reload":
                plant.reload_at = float(t + 1)
        yield t, frame, d
