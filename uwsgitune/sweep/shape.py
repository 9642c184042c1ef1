"""The shape of a sweep's curve: CPU-limited, IO-bound, or decided by the experiment. Pure.

A knee near the effective CPUs with the server's own time per request (Δrunning_time /
Δrequests) growing beyond it is a CPU limit: more workers only queue on the CPUs. A knee far
above the CPUs with the instance using little CPU is IO-bound: workers mostly wait.
"""

from __future__ import annotations

import math

from uwsgitune.sweep.analysis import NOISY_PCT, Criteria, Point, Shape, knee, noise_pct, tolerance


def _rising_at_top(points: tuple[Point, ...], tol_pct: float) -> bool:
    if len(points) < 2:
        return False
    top, below = points[-1], points[-2]
    return top.throughput > below.throughput * (1 + tol_pct / 100)


def _service_growth(points: tuple[Point, ...], k: int) -> float | None:
    at_knee = next((p.service_ms for p in points if p.workers == k), None)
    beyond = [p.service_ms for p in points if p.workers > k and p.service_ms is not None]
    if not at_knee or not beyond:
        return None
    return max(beyond) / at_knee


def classify(
    points: tuple[Point, ...],
    c: Criteria,
    effective_cpus: float | None,
    *,
    clients: int | None = None,
    rate: float | None = None,
) -> Shape:
    """Name the curve's shape, with the numbers that show it."""
    tol = tolerance(points, c.within_pct)
    k = knee(points, tol, c)
    if len(points) < 3 or k is None:
        return Shape("unclear", k, False, "fewer than 3 usable worker counts: no shape to read")
    rising = _rising_at_top(points, tol)
    limit = _noise_or_load(points, k, rising, clients, rate)
    return limit or _cpu_or_io(points, k, rising, effective_cpus)


def _noise_or_load(
    points: tuple[Point, ...], k: int, rising: bool, clients: int | None, rate: float | None
) -> Shape | None:
    """Shapes that say the experiment, not the app, decided the curve."""
    noise = noise_pct(points)
    if noise is not None and noise > NOISY_PCT:
        return Shape(
            "noisy",
            k,
            rising,
            f"repeats differ by {noise:.0f}% (median): too noisy "
            "to read a shape; lengthen --step-seconds or quiet the host",
        )
    if rate is not None and max(p.throughput for p in points) >= 0.9 * rate:
        return Shape(
            "load-limited",
            k,
            False,
            f"every count from {k} serves the offered "
            f"{rate:g} req/s: the load, not uWSGI, sets the throughput",
        )
    if clients is not None and k >= clients:
        return Shape(
            "load-limited",
            k,
            rising,
            f"the knee ({k}) reaches the {clients} "
            "clients: raise --concurrency above the top of the range",
        )
    return None


def _cpu_or_io(points: tuple[Point, ...], k: int, rising: bool, cpus: float | None) -> Shape:
    cpus = cpus or 1.0
    growth = _service_growth(points, k)
    at_knee = next(p for p in points if p.workers == k)
    cpu_use = at_knee.cpu_cores
    cpu_bound_use = cpu_use is not None and cpu_use >= 0.6 * cpus
    if k <= max(2, math.ceil(1.5 * cpus)) and ((growth or 0) >= 1.3 or cpu_bound_use):
        grow = f"; the server's time per request grows x{growth:.1f} beyond it" if growth else ""
        use = f", at {cpu_use:.1f} cores" if cpu_use is not None else ""
        return Shape(
            "cpu-limited",
            k,
            rising,
            f"throughput flattens at {k} workers (effective CPUs {cpus:g}{use}){grow}: "
            "extra workers only queue on the CPUs",
        )
    if k > 2 * cpus and not cpu_bound_use:
        use = f" using {cpu_use:.1f} cores" if cpu_use is not None else ""
        top = "; still rising at the top of the range: sweep higher" if rising else ""
        return Shape(
            "io-bound",
            k,
            rising,
            f"throughput scales to {k} workers, far above the {cpus:g} effective CPUs{use}: "
            f"workers mostly wait, so more of them pay (memory permitting){top}",
        )
    return Shape(
        "unclear",
        k,
        rising,
        f"knee at {k} workers for {cpus:g} effective CPUs: a mixed CPU/IO shape",
    )
