"""A finished sweep as text (table, recommendation, shape) and as one JSON document. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from uwsgitune.core.units import ms, num, size
from uwsgitune.sweep.analysis import (
    Criteria,
    Point,
    Shape,
    StepMeasure,
    SweepPick,
    aggregate,
    noise_pct,
    recommend,
)
from uwsgitune.sweep.grid import (
    GridAnalysis,
    cpu_ms_per_request,
    gil_bound,
    io_share,
    rss_per_worker,
)
from uwsgitune.sweep.shape import classify

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Analysis:
    points: tuple[Point, ...]
    noise_pct: float | None
    recommendation: SweepPick
    shape: Shape


def analyse(
    steps: list[StepMeasure],
    criteria: Criteria,
    effective_cpus: float | None,
    *,
    clients: int | None = None,
    rate: float | None = None,
) -> Analysis:
    points = aggregate(steps)
    return Analysis(
        points=points,
        noise_pct=noise_pct(points),
        recommendation=recommend(points, criteria),
        shape=classify(points, criteria, effective_cpus, clients=clients, rate=rate),
    )


HEADER = (
    f"{'workers':>7} {'runs':>4} {'req/s':>9} {'±range':>8} {'p50':>9} {'p90':>9} {'p99':>9} "
    f"{'errors':>7} {'srv/req':>9} {'cpu':>6} {'rss':>10} {'gen cpu':>7}"
)
BOUND_MARK = "  GENERATOR-BOUND"


def _marks(p: Point, picked: bool) -> str:
    """What a row is: the pick, GIL-bound, generator-bound (then not the app's throughput)."""
    mark = "  <- recommended" if picked else ""
    mark += "  GIL" if gil_bound(p) else ""
    return mark + (BOUND_MARK if p.generator_bound else "")


def table(points: tuple[Point, ...], recommended: int | None = None) -> list[str]:
    lines = [HEADER]
    for p in points:
        spread = f"{p.throughput_hi - p.throughput_lo:.1f}" if p.runs > 1 else "-"
        mark = _marks(p, p.workers == recommended)
        lines.append(
            f"{p.workers:>7} {p.runs:>4} {p.throughput:>9.1f} {spread:>8} {ms(p.p50_ms):>9} "
            f"{ms(p.p90_ms):>9} {ms(p.p99_ms):>9} {p.error_rate * 100:>6.1f}% "
            f"{ms(p.service_ms):>9} {num(p.cpu_cores, '.2f'):>6} {size(p.rss_bytes):>10} "
            f"{num(p.gen_cpu_cores, '.2f'):>7}{mark}"
        )
    return lines


def summary(a: Analysis) -> list[str]:
    rec = a.recommendation
    if rec.workers is None:
        lines = [f"recommendation: none ({rec.reason})"]
    else:
        mem = f", memory {size(rec.memory_bytes)} RSS" if rec.memory_bytes is not None else ""
        lines = [
            f"recommendation: {rec.workers} worker{'s' if rec.workers != 1 else ''}: "
            f"{num(rec.throughput)} req/s, "
            f"p99 {ms(rec.p99_ms)}{mem}",
            f"  why: {rec.reason}",
        ]
    noise = "unknown (use --repeat 2 or more)" if a.noise_pct is None else f"{a.noise_pct:.1f}%"
    lines.append(f"noise between repeats: {noise}")
    lines.append(f"shape: {a.shape.kind}: {a.shape.reason}")
    return lines


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def document(a: Analysis, steps: list[StepMeasure], meta: dict[str, Any]) -> dict[str, Any]:
    """`{"schema_version": 1, ...meta, "steps", "points", "recommendation", "shape"}`."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **meta}
    doc["steps"] = [asdict(s) for s in steps]
    doc["points"] = [asdict(p) for p in a.points]
    doc["noise_pct"] = a.noise_pct
    doc["recommendation"] = asdict(a.recommendation)
    doc["shape"] = asdict(a.shape)
    return dict(_clean(doc))


GRID_HEADER = (
    f"{'procs':>5} {'threads':>7} {'req/s':>9} {'p50':>9} {'p99':>9} {'errors':>7} "
    f"{'cpu':>6} {'cpu/req':>8} {'io%':>4} {'in svc':>6} {'rss/wkr':>9} {'gen cpu':>7}"
)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}"


def grid_table(g: GridAnalysis) -> list[str]:
    lines = [GRID_HEADER]
    for p in g.points:
        lines.append(
            f"{p.workers:>5} {p.threads:>7} {p.throughput:>9.1f} {ms(p.p50_ms):>9} "
            f"{ms(p.p99_ms):>9} {p.error_rate * 100:>6.1f}% {num(p.cpu_cores, '.2f'):>6} "
            f"{ms(cpu_ms_per_request(p)):>8} {_pct(io_share(p)):>4} {num(p.littles_l, '.1f'):>6} "
            f"{size(rss_per_worker(p)):>9} {num(p.gen_cpu_cores, '.2f'):>7}"
            + _marks(p, p is g.pick)
        )
    return lines


def grid_summary(g: GridAnalysis) -> list[str]:
    if g.pick is None or g.best is None:
        lines = [f"recommendation: none ({g.reason})"]
    else:
        lines = [
            f"recommendation: {g.pick.workers} processes x {g.pick.threads} threads: "
            f"{num(g.pick.throughput)} req/s, p99 {ms(g.pick.p99_ms)}",
            f"  why: the cheapest cell within {g.tolerance_pct:.0f}% of the best "
            f"({g.best.throughput:.0f} req/s at {g.best.workers}x{g.best.threads}); "
            "fewest processes first, then fewest threads",
        ]
    lines.append(f"axis: {g.axis}: {g.reason}")
    lines += [f"  evidence: {e}" for e in g.evidence]
    noise = "unknown (use --repeat 2 or more)" if g.noise_pct is None else f"{g.noise_pct:.1f}%"
    lines.append(f"noise between repeats: {noise}")
    return lines


def grid_document(
    g: GridAnalysis, steps: list[StepMeasure], meta: dict[str, Any]
) -> dict[str, Any]:
    """`{"schema_version": 1, ...meta, "steps", "points", "recommendation", "axis"}`."""
    pick = g.pick
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **meta}
    doc["steps"] = [asdict(s) for s in steps]
    doc["points"] = [asdict(p) | {"gil_bound": gil_bound(p)} for p in g.points]
    doc["noise_pct"] = g.noise_pct
    doc["recommendation"] = {
        "processes": pick.workers if pick else None,
        "threads": pick.threads if pick else None,
        "throughput": pick.throughput if pick else None,
        "p99_ms": pick.p99_ms if pick else None,
        "best": [g.best.workers, g.best.threads] if g.best else None,
        "tolerance_pct": g.tolerance_pct,
    }
    doc["axis"] = {"pays": g.axis, "reason": g.reason, "evidence": list(g.evidence)}
    return dict(_clean(doc))
