"""The load behind each sweep step, and the generator's own CPU use.

`measure(warmup, seconds, mark)` runs the load for a warm-up, calls `mark()` (the runner polls
the stats there), runs the measured window, calls `mark()` again, and returns a `LoadWindow` of the
client's numbers over exactly that window. Two generators:
- `Builtin`: uwsgitune's asyncio client (`uwsgitune.loadgen`), in this process: one Python
  thread, so it can use at most one core. Its CPU is this process's CPU over the window.
- `Wrk` (`uwsgitune.sweep.wrk`): wrk as a child, one run for the warm-up and one for the window.

A window whose generator used `BOUND_SHARE` or more of the cores it can use was limited by
the generator, not the app: it is flagged, and the analysis never takes it as the app's
throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from uwsgitune.loadgen import LoadResult, LoadRun
from uwsgitune.sweep.live import Interrupted, StopFlag, SweepError

BOUND_SHARE = 0.85


@dataclass(frozen=True)
class LoadSpec:
    url: str
    clients: int | None = None  # closed loop
    rate: float | None = None  # open loop, requests/s
    timeout: float = 10.0  # per request
    keepalive: bool = False
    max_requests: int = 2_000_000  # per step: the count bound beside the time bound


@dataclass(frozen=True)
class LoadWindow:
    """The client's view of one measured window."""

    seconds: float
    ok: int
    errors: int
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    gen_cpu_cores: float | None  # the generator's CPU over the window, 1.0 = one core
    gen_cores_max: float  # the cores the generator can use at most

    @property
    def generator_bound(self) -> bool:
        cpu = self.gen_cpu_cores
        return cpu is not None and cpu >= BOUND_SHARE * self.gen_cores_max


class Generator(Protocol):
    name: str

    def measure(self, warmup: float, seconds: float, mark: Callable[[], None]) -> LoadWindow: ...


def pct_ms(data: list[float], q: float) -> float | None:
    """The q-th percentile of sorted `data` (seconds), in ms."""
    if not data:
        return None
    return 1000 * data[min(len(data) - 1, max(0, round(q / 100 * (len(data) - 1))))]


@dataclass(frozen=True)
class _Mark:
    t: float
    cpu: float
    ok: int
    errors: int
    n_lat: int


@dataclass
class Builtin:
    """uwsgitune's asyncio generator, bounded by the step's time and `spec.max_requests`."""

    spec: LoadSpec
    stop: StopFlag
    mono: Callable[[], float] = time.monotonic
    cpu: Callable[[], float] = time.process_time
    name: str = "builtin"

    def measure(self, warmup: float, seconds: float, mark: Callable[[], None]) -> LoadWindow:
        return asyncio.run(self._measure(warmup, seconds, mark))

    def _mark(self, r: LoadResult) -> _Mark:
        return _Mark(self.mono(), self.cpu(), r.ok, r.errors, len(r.latencies))

    async def _measure(self, warmup: float, seconds: float, mark: Callable[[], None]) -> LoadWindow:
        spec = self.spec
        budget = warmup + seconds + spec.timeout + 5
        run = LoadRun(
            spec.url,
            duration=budget,
            timeout=spec.timeout,
            clock=self.mono,
            keepalive=spec.keepalive,
            max_requests=spec.max_requests,
        )
        if spec.clients:
            task = asyncio.ensure_future(run.closed_loop(spec.clients))
        else:
            task = asyncio.ensure_future(run.open_loop(spec.rate or 1.0))
        try:
            await self._wait(warmup, task)
            mark()
            a = self._mark(run.result)
            await self._wait(seconds, task)
            mark()
            b = self._mark(run.result)
        finally:
            run.stop()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(task, spec.timeout + 2)
        return _window(a, b, run.result)

    async def _wait(self, seconds: float, task: asyncio.Future[LoadResult]) -> None:
        end = self.mono() + seconds
        while self.mono() < end:
            if self.stop.is_set:
                raise Interrupted
            if task.done():
                task.result()  # the load died: surface why
                raise SweepError(
                    "the load generator ended early (its request count bound); "
                    "shorten --step-seconds"
                )
            await asyncio.sleep(min(0.1, max(0.0, end - self.mono())))


def _window(a: _Mark, b: _Mark, r: LoadResult) -> LoadWindow:
    lat = sorted(r.latencies[a.n_lat : b.n_lat])
    span = max(b.t - a.t, 1e-9)
    return LoadWindow(
        seconds=span,
        ok=b.ok - a.ok,
        errors=b.errors - a.errors,
        p50_ms=pct_ms(lat, 50),
        p90_ms=pct_ms(lat, 90),
        p99_ms=pct_ms(lat, 99),
        gen_cpu_cores=(b.cpu - a.cpu) / span,
        gen_cores_max=1.0,
    )
