"""Built-in warnings and the generic annotation item the annotations pane shows.

Pure: a window of frames in, annotations out. Built in are only what the rules cannot see:
a stats socket that does not answer, and a reload (frames without rates). Everything else
(a full listen queue, every worker busy, CPU saturation) is a rules-engine finding, which
becomes the same `Annotation` (see `uwsgitune.tui.annotate`), so the pane does not care
where an item comes from. Each check names the condition on the latest frame and how long it
has held (`since`), from the frames' own timestamps; nothing here reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from uwsgitune.core.frame import Frame
from uwsgitune.core.units import duration

Severity = Literal["info", "warning", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

RELOAD_MEMORY = 60.0  # seconds a reload stays annotated


@dataclass(frozen=True)
class Annotation:
    """One item of the annotations pane: a built-in warning or a rules-engine finding."""

    key: str
    severity: Severity
    reason: str  # one line
    evidence: str = ""  # the numbers behind it
    recommendation: str = ""
    since: float | None = None  # epoch when the condition started
    origin: str = "built-in"


def held_since(frames: Sequence[Frame], cond: Callable[[Frame], bool]) -> float | None:
    """Epoch of the first frame of the run of `cond` that ends at the latest frame."""
    since = None
    for f in reversed(frames):
        if not cond(f):
            break
        since = f.t
    return since


def _reload(frames: Sequence[Frame]) -> Annotation | None:
    latest = frames[-1]
    for f in reversed(frames):
        if latest.t - f.t > RELOAD_MEMORY:
            return None
        if f.kind in ("reload", "restart"):
            what = "graceful reload" if f.kind == "reload" else "restart (new master pid)"
            return Annotation(
                key="reload",
                severity="info",
                reason=f"{what} detected: counters reset, rates resume on the next poll",
                evidence=f"{duration(latest.t - f.t)} ago; master {f.master_pid}; "
                f"reloads seen {f.reloads_seen}",
                since=f.t,
            )
    return None


def _disconnected(frames: Sequence[Frame]) -> Annotation | None:
    f = frames[-1]
    if f.ok:
        return None
    return Annotation(
        key="disconnected",
        severity="critical",
        reason="the stats socket does not answer",
        evidence=f.error or "",
        recommendation="check that uWSGI runs and that `stats` points here",
        since=f.disconnected_since,
    )


CHECKS = (_disconnected, _reload)


def builtin_warnings(frames: Sequence[Frame]) -> list[Annotation]:
    """The warnings that hold at the latest frame, most severe first."""
    if not frames:
        return []
    found = [a for check in CHECKS if (a := check(frames)) is not None]
    return sort_annotations(found)


def sort_annotations(items: Sequence[Annotation]) -> list[Annotation]:
    return sorted(items, key=lambda a: (-SEVERITY_RANK.get(a.severity, 0), a.since or 0.0))
