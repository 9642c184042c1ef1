"""The sweep's I/O shell: step the live count, drive the load, measure, restore.

Each step: with the load paused, reach the target count (confirmed by the stats); start the
load; after the warm-up, mark the client counters and poll the stats; after the step, mark
and poll again, so the client numbers and the server's (CPU, Δrunning_time/Δrequests, RSS)
cover the same window; stop the load and let it drain. Passes alternate direction; after
them, up to two counts around the knee are added. The original live count is restored in
`finally`, also after Ctrl-C (the SIGINT handler only sets a flag that every wait checks).

With `--threads` (an `axis`), the passes run once per thread count, each after a validated
reload to it (`sweep.threadaxis`), without refinement; the original override file and threads
come back in `finally` before the live count does (a reload resets the count).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from uwsgitune.actuate.fifo import FifoError
from uwsgitune.actuate.override import OverrideError
from uwsgitune.core.frame import Frame
from uwsgitune.errors import UwsgituneError
from uwsgitune.sweep import plan
from uwsgitune.sweep.analysis import Criteria, StepMeasure, aggregate, knee, tolerance
from uwsgitune.sweep.generator import Generator, LoadSpec, LoadWindow
from uwsgitune.sweep.live import Interrupted, LiveCount, StopFlag, SweepError, sigint_records
from uwsgitune.sweep.threadaxis import ThreadAxis


@dataclass(frozen=True)
class SweepConfig:
    load: LoadSpec
    rng: plan.WorkerRange
    steps: tuple[int, ...]
    step_seconds: float
    warmup: float
    repeat: int = 1
    criteria: Criteria = field(default_factory=Criteria)
    threads: tuple[int, ...] = ()  # `--threads`: a grid, one reload per value


@dataclass
class SweepOutcome:
    original_live: int = 0
    original_threads: int = 1
    final_threads: int | None = None
    steps: list[StepMeasure] = field(default_factory=list)
    effective_cpus: float | None = None
    final_live: int | None = None
    restored: bool = False
    interrupted: bool = False
    error: str | None = None
    failure: UwsgituneError | None = None  # what `error` says, for the CLI to raise
    drift: list[tuple[int, int]] = field(default_factory=list)  # (target, seen at step end)


def step_result(workers: int, pass_no: int, w: LoadWindow, f: Frame) -> StepMeasure:
    """The client's window and the server's frame over the same seconds, as one step."""
    return StepMeasure(
        workers=workers,
        pass_no=pass_no,
        seconds=w.seconds,
        ok=w.ok,
        errors=w.errors,
        throughput=w.ok / w.seconds,
        p50_ms=w.p50_ms,
        p90_ms=w.p90_ms,
        p99_ms=w.p99_ms,
        live=f.live if f.ok else None,
        service_ms=f.mean_rt_ms,
        cpu_cores=f.instance_cpu_cores,
        rss_bytes=f.mem_total_rss,
        threads=f.threads if f.ok else 1,
        littles_l=f.littles_l,
        runq_cores=f.runq_cores,
        gen_cpu_cores=w.gen_cpu_cores,
        generator_bound=w.generator_bound,
    )


@dataclass
class Sweep:
    """One sweep of `cfg` on the instance behind `live`; `log` gets a line per step."""

    cfg: SweepConfig
    live: LiveCount
    gen: Generator
    _: KW_ONLY
    axis: ThreadAxis | None = None
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
            out.original_threads = first.threads
            try:
                self._axes(out)
            except Interrupted:
                out.interrupted = True
                self.log("interrupted: stopping the load and restoring the instance")
            except (SweepError, FifoError, OverrideError) as exc:
                out.error, out.failure = str(exc), exc
            finally:
                threads_back = self._restore_threads(out)
                out.final_live, out.restored = self._restore(out.original_live)
                out.restored = out.restored and threads_back
        return out

    def _axes(self, out: SweepOutcome) -> None:
        if self.axis is None:
            self._passes(self.cfg.steps, out)
            self._passes(self._refinement(out), out)
            return
        for threads in self.cfg.threads:
            if self.stop.is_set:
                raise Interrupted
            self.live.reach(self.cfg.steps[0])
            frame = self.axis.set(threads, self.live.frame())
            self.log(f"reloaded with {frame.threads} threads per worker")
            self._passes(self.cfg.steps, out)

    def _restore_threads(self, out: SweepOutcome) -> bool:
        if self.axis is None:
            return True
        try:
            frame = self.axis.restore() or self.live.frame()
        except (SweepError, FifoError, OverrideError, OSError) as exc:
            self.log(f"could not restore the threads: {exc}")
            return False
        out.final_threads = frame.threads
        if frame.threads == out.original_threads:
            self.log(f"restored {frame.threads} threads per worker")
        return frame.threads == out.original_threads

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

    def _one(self, workers: int, pass_no: int, out: SweepOutcome) -> StepMeasure:
        self.live.reach(workers)
        res = self._measure(workers, pass_no)
        if res.live is not None and res.live != workers:
            out.drift.append((workers, res.live))
        self._done += 1
        p99 = f"{res.p99_ms:.0f}" if res.p99_ms is not None else "-"
        cpu = f"{res.cpu_cores:.2f}" if res.cpu_cores is not None else "-"
        gen = f"{res.gen_cpu_cores:.2f}" if res.gen_cpu_cores is not None else "-"
        flag = "  GENERATOR-BOUND (not the app's throughput)" if res.generator_bound else ""
        self.log(
            f"step {self._done}: {workers:>3} workers x {res.threads} threads "
            f"{res.throughput:8.1f} req/s  p99 {p99} ms  errors {res.errors}  cpu {cpu} cores  "
            f"generator {gen} cores  live {res.live}{flag}"
        )
        return res

    def _measure(self, workers: int, pass_no: int) -> StepMeasure:
        frames: list[Frame] = []
        window = self.gen.measure(
            self.cfg.warmup, self.cfg.step_seconds, lambda: frames.append(self.live.poll())
        )
        return step_result(workers, pass_no, window, frames[-1])

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
