"""Human units: how a person reads a number, by the unit it is in. Pure.

Every number uwsgitune shows a person goes through here: the rules' evidence (`Evidence`
carries its unit), the tuner's (`tuner.decision.EVIDENCE_UNITS` names each key's unit), and
the views' summaries. `reading(value, unit)` looks the unit up in `UNITS`, the one table
from a unit to its format:

- bytes in binary prefixes: `13347840` bytes reads `12.7 MiB`;
- a ratio as a percentage: `0.0017` reads `0.2%`, `0.5658` reads `57%`. Under 10% and
  from 99% it keeps a decimal, so that a small share is not `0%` and a nearly full one is
  not `100%`; a share that would read `0.0%` reads `<0.1%`;
- seconds (or milliseconds) in the largest unit that reads at least 1, in three figures:
  `850 ms`, `2.5 s`, `40.3 s`, `3 min`, `1.5 h`, `2 d`;
- a rate with its unit: `39.9 req/s`, `28.9/min`;
- a count keeps its noun, singular for one: `16 connections`, `1 worker`, `2 CPUs`;
- CPU time as cores busy, in hundredths at most: `0.01`, `1.75`, `12.3` (a CPU clock
  sampled once a second is not finer than that, and `0.00999` reads as noise).

A figure keeps three significant digits (`39.9`, `6.64`, `301`), none after the point from
1000 up, and an exponent only past 10^15 or under 10^-4. None reads `unknown`,
text reads as it is but on one line (a control character is escaped: a path from the stats
cannot start a line of its own), and a unit the table does not know follows the figure as
it is spelt.

Machine outputs never come here: `--json`, the audit log, recordings and `/metrics` keep the
raw numbers in the raw units.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

MIB = 1024 * 1024
_SIZES = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
# Largest first: a time reads in the first of these it reaches at least 1 of.
_TIMES = ((86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"), (1e-3, "ms"), (1e-6, "µs"))

Value = float | int | str | bool | None


def figure(value: float) -> str:
    """A number in three significant digits, without a trailing `.0`: 39.9, 6.64, 301, 8."""
    whole = isinstance(value, int) or (math.isfinite(value) and value.is_integer())
    if whole and abs(value) < 1e15:
        return str(int(value))
    if math.isfinite(value) and 1000 <= abs(value) < 1e15:
        return f"{value:.0f}"
    return format(value, ".3g")


def size(n: float | None) -> str:
    """Bytes in binary prefixes: `12.7 MiB`, `512 B`."""
    if n is None:
        return "-"
    value = float(n)
    if not math.isfinite(value) or round(abs(value)) < 1024:
        return f"{value:.0f} B"
    for unit in _SIZES[1:]:
        value /= 1024
        if round(abs(value), 1) < 1024 or unit == _SIZES[-1]:
            break
    return f"{value:.1f} {unit}" if abs(value) < 1e6 else f"{value:.3g} {unit}"


def percent(ratio: float) -> str:
    """A ratio as a percentage: `0.2%`, `57%`, `99.6%`, `<0.1%`."""
    p = ratio * 100
    a = abs(p)
    sign = "-" if p < 0 else ""
    if not math.isfinite(p) or a >= 1e15:
        return f"{p:.3g}%"
    if a == 0:
        return "0%"
    if a < 0.05:
        return f"{sign}<0.1%"
    if a < 9.95 or 99 <= a < 100:
        text = f"{a:.1f}"
        text = "99.9" if text == "100.0" else text  # nearly all is not all
        return f"{sign}{text.removesuffix('.0')}%"
    return f"{sign}{a:.0f}%"


def seconds(value: float, zero: str = "s") -> str:
    """A time in the largest unit that reads at least 1: `850 ms`, `2.5 s`, `3 min`."""
    if value == 0:
        return f"0 {zero}"
    if not math.isfinite(value):
        return f"{value} s"
    a = abs(value)
    at = next((i for i, (scale, _) in enumerate(_TIMES) if a >= scale), len(_TIMES) - 1)
    text = figure(a / _TIMES[at][0])
    if at > 0 and float(text) >= _TIMES[at - 1][0] / _TIMES[at][0]:
        at -= 1  # 59.96 s reads 60 s: it is 1 min
        text = figure(round(a / _TIMES[at][0], 2))
    return f"{'-' if value < 0 else ''}{text} {_TIMES[at][1]}"


def duration(value: float | None) -> str:
    """An elapsed time on a ticking clock (uptime, a request's age), compact for a table:
    `34s`, `5m03s`, `2h05m`, `3d04h`. A reading of evidence uses `seconds`."""
    if value is None:
        return "-"
    s = int(value)
    if s < 60:
        return f"{value:.0f}s" if value >= 1 else f"{value:.1f}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def ms(value: float | None) -> str:
    """Milliseconds, read as a time: `12.5 ms`, `850 ms`, `2.5 s`."""
    return "-" if value is None else seconds(value / 1000, zero="ms")


def pct(value: float | None) -> str:
    """A percentage given as 0-100 (`host_cpu_pct`), read as `percent` reads a ratio."""
    return "-" if value is None else percent(value / 100)


def num(value: float | None, fmt: str = ".1f", none: str = "-") -> str:
    """A bare number in a fixed format, for columns that line up."""
    return none if value is None else format(value, fmt)


def _count(one: str, many: str) -> Callable[[float], str]:
    def read(value: float) -> str:
        return f"{figure(value)} {one if value == 1 else many}"

    return read


# How each unit reads. A unit is the string an `Evidence` carries (or the tuner's table names).
UNITS: dict[str, Callable[[float], str]] = {
    "bytes": size,
    "ratio": percent,
    "s": seconds,
    "ms": lambda v: seconds(v / 1000, zero="ms"),
    "req/s": lambda v: f"{figure(v)} req/s",
    "1/min": lambda v: f"{figure(v)}/min",
    "MiB/hour": lambda v: f"{size(v * MIB)}/hour",
    "x": lambda v: f"{figure(v)}×",
    "host-wide": lambda v: f"{figure(v)} (host-wide)",
    "workers": _count("worker", "workers"),
    "threads": _count("thread", "threads"),
    "connections": _count("connection", "connections"),
    "requests": _count("request", "requests"),
    "cpus": _count("CPU", "CPUs"),
    "cores": lambda v: figure(round(v, 2)),
    "kills": _count("kill", "kills"),
    "signals": _count("signal", "signals"),
}


def reading(value: Value, unit: str = "", none: str = "unknown") -> str:
    """How a person reads `value` in `unit`: `reading(13347840, "bytes") == "12.7 MiB"`."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):  # text from the stats (a path) stays on its line
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)
    read = UNITS.get(unit)
    if read is not None:
        return read(value)
    return f"{figure(value)} {unit}" if unit else figure(value)


def evidence_text(items: Iterable[tuple[str, Value, str]]) -> str:
    """`name reading` for each (name, value, unit), comma-separated: the evidence line."""
    return ", ".join(f"{name} {reading(value, unit)}" for name, value, unit in items)
