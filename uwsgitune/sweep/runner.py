"""The sweep's I/O shell: step the live count, drive the load, measure, restore.

Each step: with the load paused, reach the target count (confirmed by the stats); start the
load; after the warm-up, mark the client counters and poll the stats; after the step, mark
and poll again, so the client numbers and the server's (CPU, Δrunning_time/Δrequests, RSS)
cover the same window; stop the load and let it drain. Passes alternate direction; after
them, up to two counts around the knee are added. The original live count is restored in
`finally`, also after Ctrl-C (the SIGINT handler only sets a flag that every wait checks).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from uwsgitune.core.frame import Frame
from uwsgitune.loadgen import LoadResult, LoadRun
from uwsgitune.sweep import plan
from uwsgitune.sweep.analysis import Criteria, StepResult, aggregate, knee, tolerance
from uwsgitune.sweep.fifo import FifoError
from uwsgitune.sweep.live import Interrupted, LiveCount, StopFlag, SweepError, sigint_records


@dataclass(frozen=True)
class LoadSpec:
    url: str
    clients: int | None = None  # closed loop
    rate: float | None = None  # open loop, requests/s
    timeout: float = 10.0  # per request


@dataclass(frozen=True)
class SweepConfig:
    load: LoadSpec
    rng: plan.WorkerRange
    steps: tuple[int, ...]
    step_seconds: float
    warmup: float
    repeat: int = 1
    criteria: Criteria = field(default_factory=Criteria)


@dataclass
class SweepOutcome:
    original_live: int = 0
    steps: list[StepResult] = field(default_factory=list)
    effective_cpus: float | None = None
    final_live: int | None = None
    restored: bool = False
    interrupted: bool = False
    error: str | None = None
    drift: list[tuple[int, int]] = field(default_factory=list)  # (target, seen at step end)


@dataclass(frozen=True)
class _Mark:
    t: float
    ok: int
    errors: int
    n_lat: int


def _mark(r: LoadResult, t: float) -> _Mark:
    return _Mark(t, r.ok, r.errors, len(r.latencies))


def _pct_ms(data: list[float], q: float) -> float | None:
    if not data:
        return None
    return 1000 * data[min(len(data) - 1, max(0, round(q / 100 * (len(data) - 1))))]


def step_result(
    workers: int, pass_no: int, a: _Mark, b: _Mark, r: LoadResult, f: Frame
) -> StepResult:
    lat = sorted(r.latencies[a.n_lat : b.n_lat])
    seconds = max(b.t - a.t, 1e-9)
    return StepResult(
        workers=workers,
        pass_no=pass_no,
        seconds=seconds,
        ok=b.ok - a.ok,
        errors=b.errors - a.errors,
        throughput=(b.ok - a.ok) / seconds,
        p50_ms=_pct_ms(lat, 50),
        p90_ms=_pct_ms(lat, 90),
        p99_ms=_pct_ms(lat, 99),
        live=f.live if f.ok else None,
        service_ms=f.mean_rt_ms,
        cpu_cores=f.instance_cpu_cores,
        rss_bytes=f.mem_total_rss,
    )


@dataclass
class Sweep:
    """One sweep of `cfg` on the instance behind `live`; `log` gets a line per step."""

    cfg: SweepConfig
    live: LiveCount
    _: KW_ONLY
    log: Callable[[str], None] = print
    mono: Callable[[], float] = time.monotonic
    _done: int = field(default=0, init=False)

    @property
    def stop(self) -> StopFlag:
        return self.live.stop

    def run(self) -> SweepOutcome:
        out = SweepOutcome()
        with sigint_records(self.stop):
            first = self.live.frame()
            out.original_live, out.effective_cpus = first.live, first.effective_cpus
            try:
                self._passes(self.cfg.steps, out)
                self._passes(self._refinement(out), out)
            except Interrupted:
                out.interrupted = True
                self.log("interrupted: stopping the load and restoring the worker count")
            except (SweepError, FifoError) as exc:
                out.error = str(exc)
            finally:
                out.final_live, out.restored = self._restore(out.original_live)
        return out

    def _passes(self, steps: tuple[int, ...], out: SweepOutcome) -> None:
        for pass_no in range(self.cfg.repeat):
            for workers in plan.serpentine(steps, pass_no):
                out.steps.append(self._one(workers, pass_no, out))

    def _refinement(self, out: SweepOutcome) -> tuple[int, ...]:
        points = aggregate(out.steps)
        k = knee(points, tolerance(points, self.cfg.criteria.within_pct), self.cfg.criteria)
        extra = plan.refine(self.cfg.rng, tuple(p.workers for p in points), k)
        if extra:
            self.log(f"refining around the knee ({k}): adding {', '.join(map(str, extra))}")
        return extra

    def _one(self, workers: int, pass_no: int, out: SweepOutcome) -> StepResult:
        self.live.reach(workers)
        res = asyncio.run(self._measure(workers, pass_no))
        if res.live is not None and res.live != workers:
            out.drift.append((workers, res.live))
        self._done += 1
        p99 = f"{res.p99_ms:.0f}" if res.p99_ms is not None else "-"
        cpu = f"{res.cpu_cores:.2f}" if res.cpu_cores is not None else "-"
        self.log(
            f"step {self._done}: {workers:>3} workers  {res.throughput:8.1f} req/s  "
            f"p99 {p99} ms  errors {res.errors}  cpu {cpu} cores  live {res.live}"
        )
        return res

    async def _measure(self, workers: int, pass_no: int) -> StepResult:
        spec, cfg = self.cfg.load, self.cfg
        budget = cfg.warmup + cfg.step_seconds + spec.timeout + 5
        run = LoadRun(spec.url, duration=budget, timeout=spec.timeout, clock=self.mono)
        if spec.clients:
            task = asyncio.ensure_future(run.closed_loop(spec.clients))
        else:
            task = asyncio.ensure_future(run.open_loop(spec.rate or 1.0))
        try:
            await self._wait(cfg.warmup, task)
            self.live.watch.step()
            a = _mark(run.result, self.mono())
            await self._wait(cfg.step_seconds, task)
            frame = self.live.watch.step()
            b = _mark(run.result, self.mono())
        finally:
            run.stop()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(task, spec.timeout + 2)
        return step_result(workers, pass_no, a, b, run.result, frame)

    async def _wait(self, seconds: float, task: asyncio.Future[LoadResult]) -> None:
        end = self.mono() + seconds
        while self.mono() < end:
            if self.stop.is_set:
                raise Interrupted
            if task.done():
                task.result()  # the load died: surface why
                raise SweepError("the load generator ended early")
            await asyncio.sleep(min(0.1, max(0.0, end - self.mono())))

    def _restore(self, original: int) -> tuple[int | None, bool]:
        if original < 1:
            return None, False
        try:
            live = self.live.reach(original, interruptible=False)
        except (SweepError, FifoError) as exc:
            self.log(f"could not restore {original} live workers: {exc}")
            try:
                return self.live.read(), False
            except SweepError:
                return None, False
        self.log(f"restored {live} live workers")
        return live, True
