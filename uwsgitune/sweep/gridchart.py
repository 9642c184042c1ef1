"""A processes x threads sweep as SVG: a heat map of throughput (top) and one throughput line
per thread count against processes (bottom). Pure: the analysis in, SVG text out.

The heat map's cells shade from white (0) to blue (the best); each cell prints its req/s, the
recommended cell is outlined in orange, a generator-bound cell is hatched grey and says so.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from uwsgitune.sweep.analysis import Point
from uwsgitune.sweep.chart import LEFT, RIGHT, W, _axes, _legend, _polyline, _y, nice_max, x_scale
from uwsgitune.sweep.grid import GridAnalysis

H = 640
MAP = (40, 300)  # top, bottom of the heat map
LINES = (360, 590)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def _shade(share: float) -> str:
    """White at 0, a full blue at 1."""
    s = max(0.0, min(1.0, share))
    r, g, b = (round(255 - (255 - c) * s) for c in (31, 119, 180))
    return f"#{r:02x}{g:02x}{b:02x}"


def _cell(p: Point, x: float, y: float, w: float, h: float, best: float, pick: bool) -> str:
    fill = "#cccccc" if p.generator_bound else _shade(p.throughput / best if best else 0)
    edge = ' stroke="#ff7f0e" stroke-width="3"' if pick else ' stroke="#fff"'
    label = "generator" if p.generator_bound else f"{p.throughput:.0f}"
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{edge}/>'
        f'<text x="{x + w / 2:.1f}" y="{y + h / 2 + 4:.1f}" text-anchor="middle">{label}</text>'
    )


def _heat_map(g: GridAnalysis) -> str:
    procs = sorted({p.workers for p in g.points})
    threads = sorted({p.threads for p in g.points})
    top, bottom = MAP
    w = (W - LEFT - RIGHT) / len(procs)
    h = (bottom - top) / len(threads)
    best = g.best.throughput if g.best else max(p.throughput for p in g.points)
    out = []
    for p in g.points:
        x = LEFT + procs.index(p.workers) * w
        y = bottom - (threads.index(p.threads) + 1) * h
        out.append(_cell(p, x, y, w, h, best, p is g.pick))
    out += [
        f'<text x="{LEFT + (i + 0.5) * w:.1f}" y="{bottom + 16}" text-anchor="middle">{c}</text>'
        for i, c in enumerate(procs)
    ]
    out += [
        f'<text x="{LEFT - 6}" y="{bottom - (i + 0.5) * h + 4:.1f}" text-anchor="end">{t}</text>'
        for i, t in enumerate(threads)
    ]
    out.append(
        f'<text x="16" y="{(top + bottom) / 2:.0f}" transform="rotate(-90 16 '
        f'{(top + bottom) / 2:.0f})" text-anchor="middle">threads per worker</text>'
        f'<text x="{W - RIGHT + 14}" y="{top + 18}">req/s per cell</text>'
        f'<text x="{W - RIGHT + 14}" y="{top + 36}" fill="#ff7f0e">recommended</text>'
    )
    return "".join(out)


def _lines(g: GridAnalysis) -> str:
    top, bottom = LINES
    procs = sorted({p.workers for p in g.points})
    sx, _ = x_scale(procs)
    ymax = nice_max(max(p.throughput for p in g.points) * 1.05)
    y = _y(top, bottom, ymax)
    out = [_axes(top, bottom, ymax, "throughput (req/s)", sx, procs)]
    items = []
    for i, t in enumerate(sorted({p.threads for p in g.points})):
        row = [p for p in g.points if p.threads == t]
        color = PALETTE[i % len(PALETTE)]
        out.append(_polyline([sx(p.workers) for p in row], [y(p.throughput) for p in row], color))
        items.append((f"{t} thread{'s' if t != 1 else ''}", color))
    out.append(_legend(top, items))
    return "".join(out)


def render_grid_svg(g: GridAnalysis, *, title: str) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">'
        f'<rect width="{W}" height="{H}" fill="white"/>'
        f'<text x="{LEFT}" y="24" font-size="15">{escape(title)}</text>'
    )
    if not g.points:
        return head + f'<text x="{LEFT}" y="80">no measured steps</text></svg>\n'
    axis = (
        f'<text x="{(W - RIGHT + LEFT) / 2:.0f}" y="{H - 12}" text-anchor="middle">processes</text>'
    )
    return head + _heat_map(g) + _lines(g) + axis + "</svg>\n"
