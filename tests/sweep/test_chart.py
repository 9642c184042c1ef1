"""The SVG is well-formed XML and carries the data."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.sweep.test_analysis import cpu_limited, step
from uwsgitune.sweep.analysis import aggregate
from uwsgitune.sweep.chart import nice_max, render_svg

NS = "{http://www.w3.org/2000/svg}"


def test_svg_parses_and_contains_the_data() -> None:
    steps = [*cpu_limited(), step(2, 190.0, pass_no=1, service=10.0)]
    points = aggregate(steps)
    svg = render_svg(points, title="sweep <cpu> & co", recommended=2, effective_cpus=2.0)
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    texts = [t.text or "" for t in root.iter(f"{NS}text")]
    assert "sweep <cpu> & co" in texts
    assert {"1", "2", "16"} <= set(texts)  # x tick labels: the worker counts
    assert "recommended 2" in texts and "workers (log2 scale)" in texts
    lines = list(root.iter(f"{NS}polyline"))
    assert len(lines) == 4  # throughput, p50, p99, server time
    assert len(lines[0].get("points", "").split()) == len(points)
    assert any(e.get("y1") != e.get("y2") for e in root.iter(f"{NS}line"))  # min-max bar


def test_svg_without_points_is_still_valid() -> None:
    root = ET.fromstring(render_svg((), title="empty"))
    assert any("no measured steps" in (t.text or "") for t in root.iter(f"{NS}text"))


def test_nice_max() -> None:
    assert nice_max(0) == 1.0
    assert nice_max(87) == 100
    assert nice_max(120) == 150
    assert nice_max(3150) == 4000
    assert nice_max(0.31) == pytest.approx(0.4)
