"""History series for the sparklines: pure functions of a window of frames.

Gaps (error frames, or frames without rates) read as 0 so that a sparkline keeps its time
axis; the label next to it shows the latest real value and the maximum over the span.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from uwsgitune.core.frame import Frame
from uwsgitune.core.signals import requests_waiting
from uwsgitune.core.units import ms, num

HISTORY_SECONDS = 300.0


def _queue(f: Frame) -> float | None:
    waiting = requests_waiting(f)  # summed over the sockets, as the rules and the tuner read it
    return None if waiting is None else float(waiting)


def _busy(f: Frame) -> float | None:
    return float(f.busy) if f.ok else None


def _cpu(f: Frame) -> float | None:
    return None if f.instance_cpu_cores is None else f.instance_cpu_cores * 100


@dataclass(frozen=True)
class Chart:
    """One sparkline of the summary: what a frame gives it, and how its values read."""

    key: str
    label: str
    get: Callable[[Frame], float | None]
    fmt: Callable[[float | None], str]


CHARTS: tuple[Chart, ...] = (
    Chart("rps", "req/s", lambda f: f.rps, lambda v: num(v)),
    Chart("rt", "mean rt", lambda f: f.mean_rt_ms, ms),
    Chart("queue", "queue", _queue, lambda v: num(v, ".0f")),
    Chart("busy", "busy wkr", _busy, lambda v: num(v, ".0f")),
    Chart("cpu", "cpu %", _cpu, lambda v: num(v, ".0f")),
)


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    values: tuple[float, ...]
    latest: str  # the latest known value, formatted
    peak: str  # the maximum over the span, formatted


def recent(frames: Sequence[Frame], seconds: float = HISTORY_SECONDS) -> Sequence[Frame]:
    if not frames:
        return frames
    edge = frames[-1].mono - seconds
    start = 0
    for i, f in enumerate(frames):
        if f.mono >= edge:
            start = i
            break
    return frames[start:]


Values = tuple[float | None, ...]  # one frame's value of each chart, CHARTS' order
Memo = dict[int, tuple[Frame, Values]]  # id(frame) -> the frame (kept: no id reused), values


def values(f: Frame, memo: Memo | None = None) -> Values:
    """The value of each metric on frame `f`; with `memo`, computed once per frame (a frame
    is immutable, and the window hands the same frame objects poll after poll)."""
    if memo is None:
        return tuple(m.get(f) for m in CHARTS)
    hit = memo.get(id(f))
    if hit is None or hit[0] is not f:
        hit = memo[id(f)] = (f, tuple(m.get(f) for m in CHARTS))
    return hit[1]


def series(
    frames: Sequence[Frame], seconds: float = HISTORY_SECONDS, memo: Memo | None = None
) -> list[Series]:
    """One series per metric over the last `seconds` of frames. A `memo` kept from call to
    call makes each frame's values computed once (only the frames in the span stay in it)."""
    span = recent(frames, seconds)
    rows = [values(f, memo) for f in span]
    if memo is not None and len(memo) > len(span):
        keep = {id(f) for f in span}
        for key in [k for k in memo if k not in keep]:
            del memo[key]
    out = []
    for i, m in enumerate(CHARTS):
        raw = [r[i] for r in rows]
        known = [v for v in raw if v is not None]
        latest = raw[-1] if raw else None
        out.append(
            Series(
                key=m.key,
                label=m.label,
                values=tuple(v if v is not None else 0.0 for v in raw),
                latest=m.fmt(latest),
                peak=m.fmt(max(known) if known else None),
            )
        )
    return out


def worker_series(
    frames: Sequence[Frame], slot: int, get: Callable[[Frame, int], float | None]
) -> list[float]:
    """One worker slot's values over the frames (for the detail screen's trends)."""
    return [v for f in frames if (v := get(f, slot)) is not None]
