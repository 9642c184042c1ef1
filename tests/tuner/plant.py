"""A small simulated uWSGI for closed-loop policy tests: queueing arithmetic, no I/O.

Closed loop: `clients` keep one request each in the system. Open loop: `rate` requests/s.
A request needs `cpu_ms` of CPU and `io_ms` of waiting; the CPUs cap the throughput at
cpus / cpu. Requests beyond the live workers wait in the listen queue.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

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
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def steady(self, n: int) -> tuple[float, float, float]:
        """(throughput/s, requests in service, queued) at `n` live workers."""
        s = (self.cpu_ms + self.io_ms) / 1000
        cpu = self.cpu_ms_at(n)
        cpu_cap = self.cpus / (cpu / 1000) if cpu else float("inf")
        if self.contention_above is not None and n > self.contention_above:
            cpu_cap = min(cpu_cap, self.contention_above / s * 0.95 ** (n - self.contention_above))
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

    def frame(self, t: float) -> Frame:
        x, in_service, queue = self.steady(self.live)
        x *= 1 + self.rng.gauss(0, self.noise)
        kind = "reload" if self.reload_at == t else "ok"
        busy = round(in_service)
        cores = x * self.cpu_ms_at(self.live) / 1000
        # Processor sharing: requests not waiting on IO are on a CPU or in its run queue.
        runq = max(in_service - x * self.io_ms / 1000 - cores, 0.0)
        return Frame(
            source="plant",
            t=1_700_000_000 + t,
            mono=t,
            kind=kind,
            dt=1.0,
            workers_max=self.workers_max,
            live=self.live,
            busy=busy,
            idle=self.live - busy,
            rps=x if kind == "ok" else None,
            mean_rt_ms=in_service / x * 1000 if x and kind == "ok" else None,
            littles_l=in_service if kind == "ok" else None,
            busy_ratio=in_service / self.live if kind == "ok" and self.live else None,
            sockets=(SocketView("127.0.0.1:9000", "http", False, round(queue), 100, "stats"),),
            effective_cpus=self.cpus,
            instance_cpu_cores=cores,
            runq_cores=runq if self.schedstat else None,
            mem_per_worker=self.mem_per_worker,
            mem_available=max(self.mem_available - self.live * self.mem_per_worker, 0),
            loaded_at=1_700_000_000 + (self.reload_at or -1000.0),
        )


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
