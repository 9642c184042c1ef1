"""A processes x threads grid: the cheapest cell near the best, and which axis pays. Pure.

- Each thread count's steps are aggregated like a plain sweep (`analysis.aggregate`); the
  noise and the tolerance come from all cells together.
- Cells where the generator was the bottleneck, or with too many errors, are not usable.
- The pick is the cheapest usable cell within the tolerance of the best throughput (and under
  `p99_ms` if given): fewest processes first (each is a whole interpreter, its memory the RSS
  per worker), then fewest threads (a thread costs a stack and a GIL share).
- Which axis pays: the throughput gained by the most threads at the fewest processes, against
  the gain by the most processes at one thread. The evidence: the CPU each request used (ms),
  the GIL (a process's threads were in requests `L / processes` at a time but its CPU stayed
  near one core: CPU below threads x busy), and the memory per worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from uwsgitune.sweep.analysis import Criteria, Point, StepMeasure, aggregate, noise_pct, tolerance

CPU_BOUND_IO_SHARE = 0.5
GIL_CORES = 1.15  # a process at or under this many cores while its threads overlap: the GIL
GIL_BUSY = 0.7  # below this a process's threads wait on IO or for a CPU, not the GIL


@dataclass(frozen=True)
class GridAnalysis:
    points: tuple[Point, ...]  # every cell, by (threads, workers)
    tolerance_pct: float
    noise_pct: float | None
    best: Point | None
    pick: Point | None
    axis: str  # "processes", "threads", "both", "neither", "unknown"
    reason: str
    evidence: tuple[str, ...]
    effective_cpus: float | None


def cpu_ms_per_request(p: Point) -> float | None:
    if p.cpu_cores is None or p.throughput <= 0:
        return None
    return 1000.0 * p.cpu_cores / p.throughput


def rss_per_worker(p: Point) -> int | None:
    return None if p.rss_bytes is None else p.rss_bytes // max(p.workers, 1)


def io_share(p: Point) -> float | None:
    """The share of a request's server time spent neither on a CPU nor waiting for one."""
    cpu = cpu_ms_per_request(p)
    if cpu is None or not p.service_ms or p.throughput <= 0:
        return None
    runq = 1000.0 * (p.runq_cores or 0.0) / p.throughput
    return max(0.0, p.service_ms - cpu - runq) / p.service_ms


def cpu_bound(usable: list[Point]) -> bool:
    """Requests at one thread spend under half their time waiting on IO: then more threads
    per process only queue on its GIL, and a gain they seem to show comes from taking CPU
    share from the host's other processes (more runnable threads), not from the app."""
    shares = [x for p in usable if p.threads == 1 and (x := io_share(p)) is not None]
    return bool(shares) and median(shares) < CPU_BOUND_IO_SHARE


def gil_bound(p: Point) -> bool:
    """Threads overlapped in requests, yet each process used about one core, no more."""
    if p.threads < 2 or p.cpu_cores is None or p.littles_l is None:
        return False
    in_service = p.littles_l / p.workers
    per_process = p.cpu_cores / p.workers
    busy_gil = GIL_BUSY <= per_process <= GIL_CORES  # about one core: the GIL held throughout
    return in_service >= 1.5 and busy_gil and in_service > per_process * 1.3


def _usable(points: tuple[Point, ...], c: Criteria) -> list[Point]:
    return [
        p
        for p in points
        if p.error_rate <= c.max_error_rate and p.throughput > 0 and not p.generator_bound
    ]


def _gain(usable: list[Point], fixed: str, varied: str) -> float | None:
    """The median, over the values of `fixed`, of the best throughput along `varied` over
    the throughput at its lowest value (None: no `fixed` value has two usable cells)."""
    groups: dict[int, list[Point]] = {}
    for p in usable:
        groups.setdefault(getattr(p, fixed), []).append(p)
    gains = [
        max(x.throughput for x in g) / min(g, key=lambda x: getattr(x, varied)).throughput
        for g in groups.values()
        if len(g) > 1
    ]
    return median(gains) if gains else None


def _gains(usable: list[Point]) -> tuple[float | None, float | None]:
    """(what threads gain at a fixed process count, what processes gain at fixed threads)."""
    return _gain(usable, "workers", "threads"), _gain(usable, "threads", "workers")


CPU_BOUND_NOTE = (
    "requests wait on IO under half their server time, so threads only queue on each "
    "process's GIL (any gain they show is CPU taken from the host's other processes): "
    "only one-thread cells are recommended"
)


def _axis(t_gain: float | None, p_gain: float | None, tol: float) -> tuple[str, str]:
    pays = 1 + tol / 100
    t = t_gain is not None and t_gain > pays
    p = p_gain is not None and p_gain > pays
    if t_gain is None or p_gain is None:
        return "unknown", "one axis has a single value: sweep at least two of each"
    gains = f"x{t_gain:.2f} from threads, x{p_gain:.2f} from processes"
    if t and p:
        return "both", f"both axes pay ({gains}): the app waits on IO"
    if p:
        return "processes", f"processes pay, threads do not ({gains}): CPU-bound under the GIL"
    if t:
        return "threads", f"threads pay ({gains})"
    return "neither", f"neither axis pays beyond the noise ({gains})"


def _evidence(usable: list[Point], best: Point) -> tuple[str, ...]:
    out = []
    cpu = cpu_ms_per_request(best)
    if cpu is not None:
        out.append(f"CPU per request {cpu:.2f} ms at the best cell ({best.workers}x{best.threads})")
    shares = [x for p in usable if p.threads == 1 and (x := io_share(p)) is not None]
    if shares:
        out.append(f"IO wait {100 * median(shares):.0f}% of the server time at one thread")
    gil = [p for p in usable if gil_bound(p)]
    for p in gil[:3]:
        assert p.littles_l is not None and p.cpu_cores is not None
        out.append(
            f"GIL at {p.workers}x{p.threads}: {p.littles_l / p.workers:.1f} requests in "
            f"service per process, but {p.cpu_cores / p.workers:.2f} cores each "
            "(CPU below threads x busy)"
        )
    mem = [(p, m) for p in usable if (m := rss_per_worker(p)) is not None]
    if mem:
        lo, hi = min(m for _, m in mem), max(m for _, m in mem)
        out.append(f"memory per worker {lo / 2**20:.0f}-{hi / 2**20:.0f} MiB RSS")
    return tuple(out)


def _pick(usable: list[Point], tol: float, c: Criteria) -> tuple[Point, Point | None]:
    """(the best cell, the cheapest within `tol` of it that meets the p99 target)."""
    best = max(usable, key=lambda p: p.throughput)
    near = [p for p in usable if p.throughput >= best.throughput * (1 - tol / 100)]
    fits = [p for p in near if c.p99_ms is None or ((p.p99_ms or 0) <= c.p99_ms and p.p99_ms)]
    return best, min(fits, key=lambda p: (p.workers, p.threads)) if fits else None


def analyse_grid(
    steps: list[StepMeasure], c: Criteria, effective_cpus: float | None
) -> GridAnalysis:
    by_threads: dict[int, list[StepMeasure]] = {}
    for s in steps:
        by_threads.setdefault(s.threads, []).append(s)
    points = tuple(p for t in sorted(by_threads) for p in aggregate(by_threads[t]))
    tol = tolerance(points, c.within_pct)
    usable = _usable(points, c)
    if not usable:
        why = "no cell served requests without errors and without the generator as bottleneck"
        return GridAnalysis(points, tol, noise_pct(points), None, None, "unknown", why, (), None)
    axis, reason = _axis(*_gains(usable), tol)
    if cpu_bound(usable):
        axis, reason = "processes", f"CPU-bound: {reason}; {CPU_BOUND_NOTE}"
        usable = [p for p in usable if p.threads == 1] or usable
    best, pick = _pick(usable, tol, c)
    evidence = _evidence(_usable(points, c), best)
    return GridAnalysis(
        points, tol, noise_pct(points), best, pick, axis, reason, evidence, effective_cpus
    )
