"""From measured steps to a recommendation and a curve shape. Pure: no I/O, no clock.

Theory of operation:
- Repeated steps at the same worker count give the noise: the median, over counts, of the
  relative range (max - min) / median of their throughputs.
- The recommendation is the smallest count whose throughput is within `within_pct` of the
  best (widened to the measured noise, so noise cannot buy workers), whose p99 meets the
  target, and whose error rate is acceptable. Its memory is the RSS measured at that count.
- The knee is that same smallest count, before the p99 filter. A knee near the effective CPUs
  with the server's own time per request (Δrunning_time/Δrequests) growing beyond it is a CPU
  limit: more workers only queue on the CPUs. A knee far above the CPUs with the instance using
  little CPU is IO-bound: workers mostly wait. The client's latency alone cannot tell these
  apart: in a closed loop it is clients / throughput (Little), flat whenever throughput is.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Literal

ShapeKind = Literal["cpu-limited", "io-bound", "load-limited", "noisy", "unclear"]
NOISY_PCT = 25.0
NO_USABLE = (
    "no step served requests without errors and without the load generator as the bottleneck"
)
MAX_TOLERANCE_PCT = 30.0


@dataclass(frozen=True)
class StepMeasure:
    """One measured step: `seconds` of load at `workers` live workers, after a warm-up."""

    workers: int
    pass_no: int
    seconds: float
    ok: int
    errors: int
    throughput: float  # successful requests/s seen by the client
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    live: int | None = None  # live workers the stats showed at the end of the step
    service_ms: float | None = None  # server: Δrunning_time / Δrequests
    cpu_cores: float | None = None  # instance CPU, 1.0 = one core
    rss_bytes: int | None = None  # RSS of master + live workers
    threads: int = 1  # threads per worker during the step
    littles_l: float | None = None  # server: mean requests in service, Δrunning_time/Δt
    runq_cores: float | None = None  # server: mean requests waiting for a CPU
    gen_cpu_cores: float | None = None  # the load generator's own CPU
    generator_bound: bool = False  # the generator, not the app, set the throughput


@dataclass(frozen=True)
class Point:
    """All steps at one worker count, as medians (throughput also as min and max)."""

    workers: int
    runs: int
    throughput: float
    throughput_lo: float
    throughput_hi: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    error_rate: float
    service_ms: float | None
    cpu_cores: float | None
    rss_bytes: int | None
    threads: int = 1
    littles_l: float | None = None
    gen_cpu_cores: float | None = None
    generator_bound: bool = False  # at least one of its steps was
    runq_cores: float | None = None

    @property
    def spread_pct(self) -> float | None:
        if self.runs < 2 or self.throughput <= 0:
            return None
        return 100.0 * (self.throughput_hi - self.throughput_lo) / self.throughput


@dataclass(frozen=True)
class Criteria:
    within_pct: float = 10.0
    p99_ms: float | None = None
    max_error_rate: float = 0.01


@dataclass(frozen=True)
class SweepPick:
    workers: int | None
    best_workers: int | None
    best_throughput: float
    tolerance_pct: float
    throughput: float | None = None
    p99_ms: float | None = None
    memory_bytes: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Shape:
    kind: ShapeKind
    knee: int | None
    rising_at_top: bool
    reason: str


def _med(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None


def aggregate(steps: list[StepMeasure]) -> tuple[Point, ...]:
    by_count: dict[int, list[StepMeasure]] = {}
    for s in steps:
        by_count.setdefault(s.workers, []).append(s)
    points = []
    for workers in sorted(by_count):
        group = by_count[workers]
        tps = [s.throughput for s in group]
        sent = sum(s.ok + s.errors for s in group)
        rss = _med([float(s.rss_bytes) if s.rss_bytes is not None else None for s in group])
        points.append(
            Point(
                workers=workers,
                runs=len(group),
                throughput=median(tps),
                throughput_lo=min(tps),
                throughput_hi=max(tps),
                p50_ms=_med([s.p50_ms for s in group]),
                p90_ms=_med([s.p90_ms for s in group]),
                p99_ms=_med([s.p99_ms for s in group]),
                error_rate=sum(s.errors for s in group) / sent if sent else 0.0,
                service_ms=_med([s.service_ms for s in group]),
                cpu_cores=_med([s.cpu_cores for s in group]),
                rss_bytes=None if rss is None else int(rss),
                threads=group[0].threads,
                littles_l=_med([s.littles_l for s in group]),
                runq_cores=_med([s.runq_cores for s in group]),
                gen_cpu_cores=_med([s.gen_cpu_cores for s in group]),
                generator_bound=any(s.generator_bound for s in group),
            )
        )
    return tuple(points)


def noise_pct(points: tuple[Point, ...]) -> float | None:
    """Median relative range of repeated throughputs, in percent; None without repeats."""
    spreads = [p.spread_pct for p in points if p.spread_pct is not None]
    return median(spreads) if spreads else None


def tolerance(points: tuple[Point, ...], within_pct: float) -> float:
    noise = noise_pct(points) or 0.0
    return min(max(within_pct, noise), MAX_TOLERANCE_PCT)


def _usable(points: tuple[Point, ...], c: Criteria) -> list[Point]:
    return [
        p
        for p in points
        if p.error_rate <= c.max_error_rate and p.throughput > 0 and not p.generator_bound
    ]


def knee(points: tuple[Point, ...], tol_pct: float, c: Criteria) -> int | None:
    """The smallest count within `tol_pct` of the best throughput."""
    usable = _usable(points, c)
    if not usable:
        return None
    best = max(p.throughput for p in usable)
    return min(p.workers for p in usable if p.throughput >= best * (1 - tol_pct / 100))


def _memory_at(points: tuple[Point, ...], workers: int) -> int | None:
    """RSS measured at that count, else the median per-worker RSS times the count."""
    for p in points:
        if p.workers == workers and p.rss_bytes is not None:
            return p.rss_bytes
    per = _med([p.rss_bytes / p.workers for p in points if p.rss_bytes is not None])
    return None if per is None else int(per * workers)


def recommend(points: tuple[Point, ...], c: Criteria) -> SweepPick:
    tol = tolerance(points, c.within_pct)
    usable = _usable(points, c)
    if not usable:
        return SweepPick(None, None, 0.0, tol, reason=NO_USABLE)
    best = max(usable, key=lambda p: p.throughput)
    near = [p for p in usable if p.throughput >= best.throughput * (1 - tol / 100)]
    fits = [p for p in near if c.p99_ms is None or (p.p99_ms is not None and p.p99_ms <= c.p99_ms)]
    if not fits:
        timed = [p for p in near if p.p99_ms is not None]
        low = f"; the lowest was {min(p.p99_ms or 0.0 for p in timed):.0f} ms" if timed else ""
        return SweepPick(
            None,
            best.workers,
            best.throughput,
            tol,
            reason=f"no count within {tol:.0f}% of the best throughput kept p99 under "
            f"{c.p99_ms:g} ms{low}",
        )
    pick = min(fits, key=lambda p: p.workers)
    target = "" if c.p99_ms is None else f", p99 under {c.p99_ms:g} ms"
    return SweepPick(
        workers=pick.workers,
        best_workers=best.workers,
        best_throughput=best.throughput,
        tolerance_pct=tol,
        throughput=pick.throughput,
        p99_ms=pick.p99_ms,
        memory_bytes=_memory_at(points, pick.workers),
        reason=f"smallest count within {tol:.0f}% of the best throughput "
        f"({best.throughput:.0f} req/s at {best.workers}){target}",
    )
