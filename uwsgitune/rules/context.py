"""What every rule reads: the frames of one instance, cut into look-backs, plus the facts.

Rules only look at frames with rates (`Frame.has_rates`): reload/restart frames carry no
rates and error frames no document. A look-back is judged only when its polls span at least
`min_coverage` of it and number at least `min_frames`: a rule never speaks from a glimpse.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import cast

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.signals import all_busy as all_busy  # the rules import it from here
from uwsgitune.core.signals import (
    cpu_saturation,
    fullest_fill,
    listen_backlog,
    own_cpu_share,
    requests_waiting,
)
from uwsgitune.rules.columns import Columns, Signal
from uwsgitune.rules.facts import Facts
from uwsgitune.rules.finding import EvidenceWindow
from uwsgitune.rules.rulesettings import RuleSettings

# The per-frame signals are `uwsgitune.core.signals`; these names stay for the rules' imports.
backlog = listen_backlog


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile, 0 <= q <= 1; 0.0 for no values."""
    if not values:
        return 0.0
    data = sorted(values)
    return data[min(len(data) - 1, max(0, math.ceil(q * len(data)) - 1))]


def share(frames: Sequence[Frame], pred: Callable[[Frame], bool]) -> float:
    return sum(map(bool, map(pred, frames))) / len(frames) if frames else 0.0


# The frame fields the rules read over look-backs: `Context.col` keeps them as columns.
FIELDS: dict[str, Signal] = {
    name: attrgetter(name)
    for name in (
        "rps",
        "mean_rt_ms",
        "cpu_ms_per_request",
        "littles_l",
        "busy_ratio",
        "instance_cpu_cores",
        "mem_total_rss",
        "mem_available",
        "mem_per_worker",
        "memory_report",
        "dt",
    )
}


@dataclass
class Context:
    """The input of one evaluation. Built once; look-backs are cached by their length."""

    frames: tuple[Frame, ...]  # every frame, oldest first
    facts: Facts
    settings: RuleSettings
    # the per-frame signals: a `RulesRunner` passes the same columns at every poll, so each
    # poll's signals are computed once, not once per poll over the whole look-back
    columns: Columns = field(default_factory=Columns)
    # the poll's request log view (`--latency`; None without): the latency rules read it
    latency: LatencyView | None = None
    rated: tuple[Frame, ...] = ()
    _cache: dict[float, tuple[Frame, ...]] = field(default_factory=dict)
    _monos: list[float] = field(default_factory=list)
    _starts: dict[int, int] = field(default_factory=dict)  # id(look-back) -> its first index

    def __post_init__(self) -> None:
        self.rated = tuple(f for f in self.frames if f.has_rates)
        self._monos = [f.mono for f in self.rated]
        self.columns.sync(self._monos, [f.t for f in self.rated])

    @property
    def latest(self) -> Frame:
        return self.rated[-1]

    @property
    def now(self) -> float:
        return self.rated[-1].mono

    def recent(self, seconds: float) -> tuple[Frame, ...]:
        """Frames with rates within `seconds` of the latest one; () when too few to judge."""
        if seconds in self._cache:
            return self._cache[seconds]
        out: tuple[Frame, ...] = ()
        if self.rated:
            start = bisect.bisect_left(self._monos, self.now - seconds)
            frames = self.rated[start:]
            span = frames[-1].mono - frames[0].mono + (frames[0].dt or 0.0)
            enough = len(frames) >= self.settings.min_frames
            if enough and span >= self.settings.min_coverage * seconds:
                out = frames
                self._starts[id(out)] = start  # held by the cache: the id stays its own
        self._cache[seconds] = out
        return out

    def window(self) -> tuple[Frame, ...]:
        return self.recent(self.settings.window_seconds)

    def _memoised(self, name: str, fn: Callable[[Frame], float | None], f: Frame) -> float | None:
        key, memo = (name, f.mono, f.t), self.columns.memo
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = fn(f)
            return value

    def raw(
        self, name: str, frames: Sequence[Frame], get: Signal | None = None
    ) -> list[float | None]:
        """Signal `name` of each of `frames`, as a float or None. A look-back of this
        context (`recent`, `window`) is read from the kept columns; any other frames one by
        one. `get` computes a signal that is not a field or method (name it by its
        parameters too)."""
        if get is None:
            get = FIELDS.get(name) or cast(Signal, getattr(self, name))
        start = self._starts.get(id(frames))
        if start is None:
            return [None if (v := get(f)) is None else float(v) for f in frames]
        return self.columns.column(name, get, self.rated, start, start + len(frames))

    def monos(self, frames: Sequence[Frame]) -> list[float]:
        """The poll times (`mono`) of `frames`: a slice of the rated frames' for a look-back
        of this context, read one by one otherwise."""
        start = self._starts.get(id(frames))
        if start is None:
            return [f.mono for f in frames]
        return self._monos[start : start + len(frames)]

    def col(self, name: str, frames: Sequence[Frame], get: Signal | None = None) -> list[float]:
        """The known values of signal `name` over `frames` (`values`, from the columns)."""
        raw = self.raw(name, frames, get)
        return [v for v in raw if v is not None] if None in raw else cast(list[float], raw)

    def share(self, name: str, frames: Sequence[Frame], get: Signal | None = None) -> float:
        """The share of `frames` whose signal `name` is true (`share`, from the columns)."""
        raw = self.raw(name, frames, get)
        return sum(map(bool, raw)) / len(raw) if raw else 0.0

    def cpu(self, f: Frame) -> float | None:
        """`signals.cpu_saturation(f)`, computed once per frame: several rules read it.
        Rules that blame the CPU also check the instance's own share (`cpu_instance_min`)."""
        return self._memoised("cpu", cpu_saturation, f)

    def own_cpu(self, f: Frame) -> float | None:
        """The instance's own CPU / effective CPUs: what its workers themselves burn."""
        return own_cpu_share(f)

    def depth(self, f: Frame) -> float | None:
        """Connections waiting, summed over the sockets (`signals.requests_waiting`)."""
        return self._memoised("depth", requests_waiting, f)

    def fill(self, f: Frame) -> float | None:
        """Queue / backlog of the fullest socket (`signals.fullest_fill`)."""
        return self._memoised("fill", fullest_fill, f)


def evidence_window(frames: Sequence[Frame]) -> EvidenceWindow:
    first = frames[0]
    return EvidenceWindow(start=first.t - (first.dt or 0.0), end=frames[-1].t, frames=len(frames))


def frame_dt(frames: Sequence[Frame]) -> float | None:
    """The typical poll interval (median dt)."""
    dts = sorted(f.dt for f in frames if f.dt)
    return dts[len(dts) // 2] if dts else None


def latest_value(
    frames: Sequence[Frame], get: Callable[[Frame], float | int | None]
) -> float | None:
    for f in reversed(frames):
        v = get(f)
        if v is not None:
            return float(v)
    return None
