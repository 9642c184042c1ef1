"""Built-in warnings and the generic annotation item the annotations pane shows.

Pure: a window of frames in, annotations out. The rules engine's findings become the same
`Annotation` (see `uwsgitune.tui.rules_bridge`), so the pane does not care where an item
comes from. Each check names the condition on the latest frame and how long it has held
(`since`), from the frames' own timestamps; nothing here reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from uwsgitune.core.frame import Frame
from uwsgitune.render.units import duration, ms, num, pct

Severity = Literal["info", "warning", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

CPU_SATURATED = 0.9  # instance CPU / effective CPUs
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


def _queue_full(frames: Sequence[Frame]) -> Annotation | None:
    f = frames[-1]
    full = [s for s in f.sockets if s.full]
    if not full:
        return None
    since = held_since(frames, lambda x: x.queue_full)
    held = f.t - since if since is not None else 0.0
    socks = ", ".join(f"{s.name} {s.queue}/{s.backlog}" for s in full)
    over = f.listen_overflows_delta
    evidence = f"{socks}; full for {duration(held)}"
    if over is not None:
        evidence += f"; kernel ListenOverflows +{over} (host-wide)"
    return Annotation(
        key="queue_full",
        severity="critical",
        reason="listen queue full: new connections are dropped or refused",
        evidence=evidence,
        recommendation="add workers if CPU allows; otherwise raise `listen` (needs a restart)",
        since=since,
    )


def _all_busy(frames: Sequence[Frame]) -> Annotation | None:
    f = frames[-1]

    def cond(x: Frame) -> bool:
        return x.ok and x.live > 0 and x.busy >= x.live

    if not cond(f):
        return None
    since = held_since(frames, cond)
    busy = None if f.busy_ratio is None else f.busy_ratio * 100
    return Annotation(
        key="all_busy",
        severity="warning",
        reason="every live worker is busy: new requests wait in the listen queue",
        evidence=f"{f.busy}/{f.live} busy ({f.workers_max} max), busy time {pct(busy)}, "
        f"mean {ms(f.mean_rt_ms)}, {num(f.rps)} req/s",
        recommendation="spawn more workers (cheaper `+`) or raise `processes` if CPU allows",
        since=since,
    )


def _cpu_saturated(frames: Sequence[Frame]) -> Annotation | None:
    f = frames[-1]

    def cond(x: Frame) -> bool:
        sat = x.cpu_saturation
        return sat is not None and sat >= CPU_SATURATED

    if not cond(f):
        return None
    return Annotation(
        key="cpu_saturated",
        severity="warning",
        reason="the instance uses (nearly) every CPU it may: more workers will not help",
        evidence=f"{num(f.instance_cpu_cores, '.2f')} cores of {num(f.effective_cpus, 'g')} "
        f"effective, host {pct(f.host_cpu_pct)}",
        recommendation="do not add workers; give it more CPU or make requests cheaper",
        since=held_since(frames, cond),
    )


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


CHECKS = (_disconnected, _queue_full, _all_busy, _cpu_saturated, _reload)


def builtin_warnings(frames: Sequence[Frame]) -> list[Annotation]:
    """The warnings that hold at the latest frame, most severe first."""
    if not frames:
        return []
    found = [a for check in CHECKS if (a := check(frames)) is not None]
    return sort_annotations(found)


def sort_annotations(items: Sequence[Annotation]) -> list[Annotation]:
    return sorted(items, key=lambda a: (-SEVERITY_RANK.get(a.severity, 0), a.since or 0.0))
