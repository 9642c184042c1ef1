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

from uwsgitune.core.frame import Frame
from uwsgitune.core.signals import all_busy as all_busy  # the rules import it from here
from uwsgitune.core.signals import (
    cpu_saturation,
    fullest_fill,
    listen_backlog,
    own_cpu_share,
    requests_waiting,
)
from uwsgitune.rules.facts import Facts
from uwsgitune.rules.finding import EvidenceWindow
from uwsgitune.rules.settings import RuleSettings

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


Memo = dict[tuple[str, float, float], float | None]


def prune(memo: Memo, frames: Sequence[Frame]) -> None:
    """Drop the entries of polls before `frames` (the look-back), once there are many."""
    if frames and len(memo) > 8 * len(frames) + 64:
        edge = frames[0].mono
        for key in [k for k in memo if k[1] < edge]:
            del memo[key]


@dataclass
class Context:
    """The input of one evaluation. Built once; look-backs are cached by their length."""

    frames: tuple[Frame, ...]  # every frame, oldest first
    facts: Facts
    settings: RuleSettings
    rated: tuple[Frame, ...] = ()
    _cache: dict[float, tuple[Frame, ...]] = field(default_factory=dict)
    _monos: list[float] = field(default_factory=list)
    # per-frame signals by (signal, the frame's poll time): a `RulesRunner` passes the same
    # memo at every poll, so each poll's signals are computed once, not once per poll over
    # the whole look-back (a frame compacted by the window keeps its poll and its signals)
    memo: Memo = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rated = tuple(f for f in self.frames if f.has_rates)
        self._monos = [f.mono for f in self.rated]

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
        self._cache[seconds] = out
        return out

    def window(self) -> tuple[Frame, ...]:
        return self.recent(self.settings.window_seconds)

    def _memoised(self, name: str, fn: Callable[[Frame], float | None], f: Frame) -> float | None:
        key = (name, f.mono, f.t)
        try:
            return self.memo[key]
        except KeyError:
            value = self.memo[key] = fn(f)
            return value

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


def values(frames: Sequence[Frame], get: Callable[[Frame], float | int | None]) -> list[float]:
    return [float(v) for v in map(get, frames) if v is not None]
