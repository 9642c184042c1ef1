"""A finished sweep as text (table, recommendation, shape) and as one JSON document. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from uwsgitune.render.units import ms, num, size
from uwsgitune.sweep.analysis import (
    Criteria,
    Point,
    Recommendation,
    Shape,
    StepResult,
    aggregate,
    classify,
    noise_pct,
    recommend,
)

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Analysis:
    points: tuple[Point, ...]
    noise_pct: float | None
    recommendation: Recommendation
    shape: Shape


def analyse(
    steps: list[StepResult],
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
    f"{'errors':>7} {'srv/req':>9} {'cpu':>6} {'rss':>10}"
)


def table(points: tuple[Point, ...], recommended: int | None = None) -> list[str]:
    lines = [HEADER]
    for p in points:
        spread = f"{p.throughput_hi - p.throughput_lo:.1f}" if p.runs > 1 else "-"
        mark = "  <- recommended" if p.workers == recommended else ""
        lines.append(
            f"{p.workers:>7} {p.runs:>4} {p.throughput:>9.1f} {spread:>8} {ms(p.p50_ms):>9} "
            f"{ms(p.p90_ms):>9} {ms(p.p99_ms):>9} {p.error_rate * 100:>6.1f}% "
            f"{ms(p.service_ms):>9} {num(p.cpu_cores, '.2f'):>6} {size(p.rss_bytes):>10}{mark}"
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


def document(a: Analysis, steps: list[StepResult], meta: dict[str, Any]) -> dict[str, Any]:
    """`{"schema_version": 1, ...meta, "steps", "points", "recommendation", "shape"}`."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **meta}
    doc["steps"] = [asdict(s) for s in steps]
    doc["points"] = [asdict(p) for p in a.points]
    doc["noise_pct"] = a.noise_pct
    doc["recommendation"] = asdict(a.recommendation)
    doc["shape"] = asdict(a.shape)
    return dict(_clean(doc))
