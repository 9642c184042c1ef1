"""Human units: each unit's reading, and properties that hold for any number.

A reading parses back to the number it came from within its rounding, picks the unit a
person expects (no `1024 KiB`, no `60 s`), keeps its noun, and never says 0 of something
that is not 0, nor 100% of something that is not all.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uwsgitune.core.units import UNITS, evidence_text, percent, reading, seconds, size

FINITE = st.floats(allow_nan=False, allow_infinity=False)
SANE = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)
POWERS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
POWERS["EiB"] = 2**60
TIMES = {"µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (13347840, "bytes", "12.7 MiB"),
        (512, "bytes", "512 B"),
        (1023.7, "bytes", "1.0 KiB"),
        (0.0017, "ratio", "0.2%"),
        (0.5658, "ratio", "57%"),
        (0.9996, "ratio", "99.9%"),
        (1.0, "ratio", "100%"),
        (0.0004, "ratio", "<0.1%"),
        (0.0, "ratio", "0%"),
        (-0.05, "ratio", "-5%"),
        (0.85, "s", "850 ms"),
        (2.5, "s", "2.5 s"),
        (180, "s", "3 min"),
        (59.96, "s", "1 min"),
        (5400, "s", "1.5 h"),
        (300.66, "ms", "301 ms"),
        (2500, "ms", "2.5 s"),
        (0.0, "ms", "0 ms"),
        (39.94, "req/s", "39.9 req/s"),
        (16, "connections", "16 connections"),
        (1, "connections", "1 connection"),
        (4, "workers", "4 workers"),
        (1.0, "workers", "1 worker"),
        (2.0, "cpus", "2 CPUs"),
        (0.00999, "cores", "0.01"),
        (1.754, "cores", "1.75"),
        (12.34, "cores", "12.3"),
        (0.0, "cores", "0"),
        (1.98, "requests", "1.98 requests"),
        (15.52, "x", "15.5×"),
        (201, "host-wide", "201 (host-wide)"),
        (28.92, "1/min", "28.9/min"),
        (3.2, "MiB/hour", "3.2 MiB/hour"),
        (150.0, "", "150"),
        (3, "widgets", "3 widgets"),
        (None, "bytes", "unknown"),
        ("littles_law", "", "littles_law"),
        ("GET /a\nWARN forged", "", "GET /a\\nWARN forged"),
        (True, "", "yes"),
        (-1.5 * 2**20, "bytes", "-1.5 MiB"),
        (1e30, "bytes", "8.67e+11 EiB"),
        (1e30, "s", "1.16e+25 d"),
        (1e-9, "s", "0.001 µs"),
    ],
)
def test_a_value_reads_in_its_unit(value: float | str | None, unit: str, text: str) -> None:
    assert reading(value, unit) == text


def _parse(text: str, units: dict[str, float]) -> tuple[float, float]:
    """(number shown, scale of its unit) from `12.7 MiB`."""
    number, unit = text.split(" ")
    return float(number), units[unit]


@given(FINITE)
def test_bytes_parse_back_within_rounding_in_the_largest_prefix(n: float) -> None:
    shown, scale = _parse(size(n), POWERS)
    step = 0.5 if scale == 1 else 0.05  # whole bytes, else one decimal (3 figures past 1e6)
    assert abs(shown - n / scale) <= max(step, 0.005 * abs(n / scale))
    if scale > 1 and scale < POWERS["EiB"]:
        assert 1 <= abs(shown) < 1024  # 1024 KiB reads 1.0 MiB
    if scale == 1:
        assert abs(shown) < 1024


@given(SANE)
def test_a_ratio_parses_back_and_never_reads_none_or_all_of_what_it_is_not(r: float) -> None:
    text = percent(r)
    assert text.endswith("%")
    if "<" in text:
        assert 0 < abs(r) < 0.0005
        return
    shown = float(text.removesuffix("%"))
    assert abs(shown - r * 100) <= (0.05 if abs(r) < 0.1 else 0.5) + 1e-9 * abs(r)
    assert (shown == 0) == (r == 0)
    assert (shown == 100) == (r == 1) or r > 1


@given(FINITE.filter(lambda v: v != 0))
def test_seconds_parse_back_in_the_largest_unit_that_reads_at_least_one(s: float) -> None:
    text = seconds(s)
    number, unit = text.split(" ")
    shown = float(number)
    assert shown != 0  # a time that is not 0 never reads 0
    assert abs(shown - s / TIMES[unit]) <= 0.006 * abs(s / TIMES[unit])  # three figures
    bigger = [t for t in TIMES.values() if t > TIMES[unit]]
    if bigger:
        assert abs(shown) < min(bigger) / TIMES[unit]  # never `60 s`, `1000 ms`
    if unit != "µs":
        assert abs(shown) >= 1


@given(st.integers(min_value=-(10**6), max_value=10**6) | SANE)
def test_a_count_keeps_its_noun_singular_for_one(n: float) -> None:
    text = reading(n, "connections")
    assert text.endswith(" connection" if n == 1 else " connections")
    assert math.isclose(float(text.split(" ")[0]), n, rel_tol=0.006, abs_tol=1e-9)


@given(SANE)
def test_a_rate_keeps_its_unit_and_three_figures(x: float) -> None:
    text = reading(x, "req/s")
    number, unit = text.split(" ")
    assert unit == "req/s"
    assert math.isclose(float(number), x, rel_tol=0.006, abs_tol=0.5)


VALUES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)


@given(VALUES, st.sampled_from([*UNITS, "", "widgets"]))
def test_any_value_in_any_unit_reads_as_one_line(value: float | str | None, unit: str) -> None:
    text = reading(value, unit)
    assert "\n" not in text and (text or value == "")
    if isinstance(value, float | int) and not isinstance(value, bool):
        assert not re.search(r"\b(bytes|ratio)\b", text)  # never the raw unit's name


def test_evidence_reads_name_then_value_in_order() -> None:
    items = [("memory_per_worker", 13347840, "bytes"), ("instance_cpu", 0.0017, "ratio")]
    assert evidence_text(items) == "memory_per_worker 12.7 MiB, instance_cpu 0.2%"
    assert evidence_text([]) == ""
