"""A sweep as a hand-written SVG: throughput (top) and latency (bottom) against workers.

Pure: points in, SVG text out; no plotting dependency. The x axis is log2 when the counts span
8x or more (1, 2, 4 ... 32 would otherwise crowd the left), linear otherwise. Each panel has
its own y axis from 0. The recommended count and the effective CPUs are vertical guides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from xml.sax.saxutils import escape

from uwsgitune.sweep.analysis import Point

W, H = 760, 580
LEFT, RIGHT = 70, 150
PANELS = ((40, 270), (320, 530))  # (top, bottom) of each plot area
COLORS = {"throughput": "#1f77b4", "p50": "#2ca02c", "p99": "#d62728", "service": "#9467bd"}

Scale = Callable[[float], float]


def nice_max(value: float) -> float:
    """The next clean axis top at or above `value`: 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^n."""
    if value <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(value))
    return next(m * exp for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * exp >= value)


def x_scale(counts: list[int]) -> tuple[Scale, bool]:
    lo, hi = min(counts), max(counts)
    log = hi / lo >= 8
    f = math.log2 if log else float
    a, b = f(lo), f(hi)
    span = (b - a) or 1.0
    return (lambda v: LEFT + (f(v) - a) / span * (W - LEFT - RIGHT)), log


def _y(top: int, bottom: int, ymax: float) -> Scale:
    return lambda v: bottom - v / ymax * (bottom - top)


def _polyline(xs: list[float], ys: list[float], color: str, dash: str = "") -> str:
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
    d = f' stroke-dasharray="{dash}"' if dash else ""
    dots = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>'
        for x, y in zip(xs, ys, strict=True)
    )
    return f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"{d}/>{dots}'


def _axes(top: int, bottom: int, ymax: float, label: str, sx: Scale, counts: list[int]) -> str:
    y = _y(top, bottom, ymax)
    out = [
        f'<rect x="{LEFT}" y="{top}" width="{W - LEFT - RIGHT}" height="{bottom - top}" '
        'fill="none" stroke="#888"/>'
    ]
    for i in range(6):
        v = ymax * i / 5
        out.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            f'stroke="#eee"/><text x="{LEFT - 6}" y="{y(v) + 4:.1f}" '
            f'text-anchor="end">{v:g}</text>'
        )
    for c in counts:
        out.append(f'<text x="{sx(c):.1f}" y="{bottom + 16}" text-anchor="middle">{c}</text>')
    out.append(
        f'<text x="16" y="{(top + bottom) / 2:.0f}" transform="rotate(-90 16 '
        f'{(top + bottom) / 2:.0f})" text-anchor="middle">{escape(label)}</text>'
    )
    return "".join(out)


def _legend(top: int, items: list[tuple[str, str]]) -> str:
    x = W - RIGHT + 14
    return "".join(
        f'<rect x="{x}" y="{top + 14 + 18 * i}" width="12" height="4" fill="{color}"/>'
        f'<text x="{x + 18}" y="{top + 20 + 18 * i}">{escape(name)}</text>'
        for i, (name, color) in enumerate(items)
    )


def _guide(x: float, label: str, color: str, row: int) -> str:
    """A dashed vertical line through both panels; its label turns left near the right edge."""
    left = x > W - RIGHT - 110
    tx, anchor = (x - 4, "end") if left else (x + 4, "start")
    return (
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PANELS[0][0]}" y2="{PANELS[1][1]}" '
        f'stroke="{color}" stroke-dasharray="4 3"/>'
        f'<text x="{tx:.1f}" y="{PANELS[0][0] + 14 + 14 * row}" fill="{color}" '
        f'text-anchor="{anchor}">{escape(label)}</text>'
    )


def _throughput_panel(points: tuple[Point, ...], sx: Scale, counts: list[int]) -> str:
    top, bottom = PANELS[0]
    ymax = nice_max(max(p.throughput_hi for p in points) * 1.05)
    y = _y(top, bottom, ymax)
    xs = [sx(p.workers) for p in points]
    bars = "".join(
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y(p.throughput_lo):.1f}" '
        f'y2="{y(p.throughput_hi):.1f}" stroke="{COLORS["throughput"]}"/>'
        for x, p in zip(xs, points, strict=True)
        if p.runs > 1
    )
    line = _polyline(xs, [y(p.throughput) for p in points], COLORS["throughput"])
    items = [("req/s (median)", COLORS["throughput"])]
    if bars:
        items.append(("bar: min to max", COLORS["throughput"]))
    legend = _legend(top, items)
    return _axes(top, bottom, ymax, "throughput (req/s)", sx, counts) + bars + line + legend


def _latency_panel(points: tuple[Point, ...], sx: Scale, counts: list[int]) -> str:
    top, bottom = PANELS[1]
    series = [
        ("p50 (client)", "p50", [p.p50_ms for p in points], ""),
        ("p99 (client)", "p99", [p.p99_ms for p in points], ""),
        ("server time/req", "service", [p.service_ms for p in points], "5 4"),
    ]
    known = [v for _, _, vals, _ in series for v in vals if v is not None]
    ymax = nice_max(max(known, default=1.0) * 1.05)
    y = _y(top, bottom, ymax)
    out = [_axes(top, bottom, ymax, "latency (ms)", sx, counts)]
    for _, key, vals, dash in series:
        pairs = [(sx(p.workers), y(v)) for p, v in zip(points, vals, strict=True) if v is not None]
        if pairs:
            out.append(_polyline([a for a, _ in pairs], [b for _, b in pairs], COLORS[key], dash))
    out.append(_legend(top, [(name, COLORS[key]) for name, key, _, _ in series]))
    return "".join(out)


def render_svg(
    points: tuple[Point, ...],
    *,
    title: str,
    recommended: int | None = None,
    effective_cpus: float | None = None,
) -> str:
    """The whole chart as one SVG document (empty panels when there are no points)."""
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">'
        f'<rect width="{W}" height="{H}" fill="white"/>'
        f'<text x="{LEFT}" y="24" font-size="15">{escape(title)}</text>'
    )
    if not points:
        return head + f'<text x="{LEFT}" y="80">no measured steps</text></svg>\n'
    counts = [p.workers for p in points]
    sx, log = x_scale(counts)
    body = [_throughput_panel(points, sx, counts), _latency_panel(points, sx, counts)]
    axis = "workers (log2 scale)" if log else "workers"
    body.append(
        f'<text x="{(W - RIGHT + LEFT) / 2:.0f}" y="{H - 12}" text-anchor="middle">{axis}</text>'
    )
    lo, hi = min(counts), max(counts)
    if effective_cpus and lo <= effective_cpus <= hi:
        body.append(_guide(sx(effective_cpus), f"{effective_cpus:g} CPUs", "#7f7f7f", 1))
    if recommended is not None and lo <= recommended <= hi:
        body.append(_guide(sx(recommended), f"recommended {recommended}", "#ff7f0e", 0))
    return head + "".join(body) + "</svg>\n"
