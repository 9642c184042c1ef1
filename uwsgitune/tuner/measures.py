"""What the policy knows at one step, computed from the window of frames. Pure.

The *regime* is the run of good frames at the current live count since the last change
settled: throughput and response time are only compared between regimes, never across a
change, a reload or a gap. Short-term means (the last few polls) decide scale-ups; the
maximum over `down_window` decides scale-downs, so one quiet poll never shrinks the pool.
Likewise one busy poll never grows it: a step up on a queue needs that queue at
QUEUE_PERSIST of the recent polls, or a full backlog (`Measures.queue_persists`).

A queue is read against the polls at this count (`Pile`): what waited at every one of them
stands (a closed loop's clients, or a backlog the last step did not take), and what piled
up since the last poll at that least is arrivals past the throughput over that time, not a
steady demand (the step's size: tuner/sizing.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from statistics import fmean

from uwsgitune.core.frame import Frame
from uwsgitune.core.signals import (
    busy,
    cpu_saturation,
    requests_waiting,
    waiting_unless_full,
)
from uwsgitune.core.staffing import RECENT_POLLS, Estimate, estimate, in_instance, pstdev, sized
from uwsgitune.tuner.level import (
    Level,
    ceiling,
    concurrency_peak,
    dispersion,
    peak_and_ceiling,
    settled_level,
)
from uwsgitune.tuner.tunersettings import TunerSettings

RECENT = RECENT_POLLS  # polls behind the short-term means (the rules read as many)
LOAD_JUMP = 3.0  # the recent polls' throughputs this many times apart: the load is moving
# Polls the spread of the requests in service is read over before the ways up and down
# stop at it rather than at the most seen at once (its estimate's error about 1/√(n/2))
DISPERSION_POLLS = 8
QUIET_RPS = 1.0  # throughputs below this count as this much (an idle pool's wobble)
# Recent polls with a connection waiting that make a queue a shortage rather than a blip:
# at a steady load near the workers' count (rho 0.9 on 4 workers) a queue of a few comes
# and goes between two polls; a load past the pool queues at every poll.
QUEUE_PERSIST = 2
# A worker's first requests pay its process's warm-up (a framework's lazy setup, compiled
# templates, its database connection): a change's polls count once every live worker has
# served this many, or WARM_LIMIT seconds after the change settled, whichever comes first.
WARM_REQUESTS = 2
WARM_LIMIT = 20.0
# A queue within this many connections (or this share) of the poll before: it stood still
FLAT, FLAT_SHARE = 2.0, 0.1


@dataclass(frozen=True)
class Pile:
    """The latest poll's queue read against the polls at this count since it settled: the
    least of them, `standing` (connections that waited through every poll there), and
    `grown` more that piled up over the `over` seconds since the last poll at that least,
    while the pool served `x` req/s. A queue the backlog piled up over k polls is k polls of
    arrivals past the throughput: grown / over req/s more than the pool serves, not grown
    requests of steady demand (`excess`)."""

    standing: float
    grown: float
    over: float
    x: float
    # the pool was busy (`busy_full`) at the poll of the least and at every one since: the
    # queue grew while the pool served all it could, so at the arrivals' excess over the
    # throughput. Else the arrivals came at once (a load that jumped or came back onto a
    # pool with workers to spare): the queue is all there is to go on.
    busy_through: bool = True
    # the queue stood still over the last poll (FLAT): `standing` is what waited at both
    still: bool = False

    @property
    def excess(self) -> float:
        """Requests/s arriving past the throughput while the queue grew."""
        return self.grown / self.over if self.over > 0 else 0.0


def pile(regime: Sequence[Frame], busy_full: float) -> Pile | None:
    """The `Pile` of the regime's polls; None when a poll's queue is unknown or a backlog
    was full (the kernel refused what arrived: the rate is not in the queue), or nothing
    was served since the least."""
    queues = [waiting_unless_full(f) for f in regime]
    if not regime or any(q is None for q in queues):
        return None
    qs = [float(q or 0) for q in queues]
    least = min(qs)
    at = max(i for i, q in enumerate(qs) if q == least)  # the last poll at the least
    since = regime[at + 1 :] or regime[-1:]
    x = _mean([f.rps for f in since])
    if not x:
        return None
    over = regime[-1].mono - regime[at].mono
    through = all(busy(f.busy_ratio, busy_full) for f in regime[at:])
    prev, now = qs[-2] if len(since) >= 2 else None, qs[-1]
    if prev is not None and abs(now - prev) <= max(FLAT, FLAT_SHARE * prev):
        # Still over the last poll: not a pile growing with the arrivals but connections
        # that came at once and wait (a closed loop's clients that doubled: 64 on 64 busy
        # workers, then 128; read as a rate, 64 -> 72, and 125 only 5 s later).
        return Pile(min(prev, now), 0.0, 0.0, x, busy_through=through, still=True)
    return Pile(standing=least, grown=now - least, over=over, x=x, busy_through=through)


@dataclass(frozen=True)
class Measures:
    latest: Frame
    now: float
    live: int
    regime: tuple[Frame, ...]  # good frames at `live` since the last change settled
    x: float | None  # mean requests/s over the regime's last measure_frames polls
    w: float | None  # mean response time (ms), same polls
    noise: float  # relative throughput change below which a difference is noise
    x_part: float | None  # x and w over fewer polls than measure_frames (a fast probe's base)
    w_part: float | None
    noise_part: float  # noise for x_part: at least twice min_noise
    l_recent: float | None  # Little's L, mean of the last polls
    l_window: float | None  # max Little's L over down_window
    window_covered: bool  # the down window is fully observed at this count
    queue: float | None  # mean queued connections, last polls (None: unknown)
    busy_ratio: float | None
    cpu_sat: float | None
    cpu_used: float | None  # cores the instance itself used, mean of the last polls
    cpus: float | None
    mem_cap: int | None  # most live workers the memory budget allows
    model: Estimate | None  # the count the CPUs and the IO share need (core/staffing.py)
    queue_min: float  # TunerSettings.queue_min and .busy_full
    busy_full: float
    queue_now: float | None = None  # the latest poll's queue and busy ratio
    busy_now: float | None = None
    demand_peak: float | None = None  # most requests in service + queued, last polls
    # most requests seen at once (busy workers + queued, in workers' worth: `level.at_once`)
    # at any poll of the down window; None when a poll of it had an unknown queue, a full
    # backlog, or threaded workers without their cores in the stats
    concurrency_peak: int | None = None
    # the same over the polls at this count since it settled (`regime`): what the pool
    # serves now, not what a load that since fell needed
    served_peak: int | None = None
    # how the requests in the instance spread about their mean over the down window, per request
    # (`level.dispersion`: about 1 for random arrivals, 0 for a closed loop's clients): the
    # ways up and down stop at the same spare for it (`level.reach`), so neither undoes the
    # other; None: unknown, and they stop at the most seen at once instead
    dispersion: float | None = None
    queue_window: float | None = None  # mean connections queued over the polls of l_window
    # the most requests at once over the down window, and over its polls at this count, if
    # each was read at `level.CEILING_POLLS` polls: what a closed loop's clients never pass
    window_ceiling: int | None = None
    served_ceiling: int | None = None
    # the least and most requests/s of the recent polls and the one before them, when they
    # differ by LOAD_JUMP or more: the means mix two loads (one that just started or
    # stopped, or the poll it started in), until the last poll of the old load is behind them
    load_moving: tuple[float, float] | None = None
    # the load fell and settled over the last polls (tuner/level.py): a quick way down
    level: Level | None = None
    # of the recent polls (at most RECENT), how many had a connection waiting, and whether
    # a socket's backlog was full at one of them (the kernel refusing connections)
    queue_polls: int = 0
    recent_polls: int = 0
    backlog_full: bool = False
    pile: Pile | None = None  # the queue read against the polls at this count

    @cached_property
    def capacity(self) -> int | None:
        """The model's count, without its spare where a queue feeds every worker and a
        request is almost all CPU (`staffing.sized` over the recent polls); None: unknown,
        or the CPUs set no bound. Worked out once per decision, however many rules ask."""
        return sized(self.model, self.regime[-RECENT:]) if self.model is not None else None

    @property
    def saturated(self) -> bool:
        """Saturated over the last polls, and still at the latest one (a load that just
        stopped leaves a queue in the means)."""
        now = (self.queue_now or 0.0) >= self.queue_min or busy(self.busy_now, self.busy_full)
        return (self.queued or self.all_busy) and now

    @property
    def queued(self) -> bool:
        return self.queue is not None and self.queue >= self.queue_min

    @property
    def queue_persists(self) -> bool:
        """The queue is a shortage, not a blip: a connection waited at QUEUE_PERSIST of the
        recent polls, a backlog filled at one of them (connections refused: no time to
        wait), or the latest poll's queue alone says the pool is far too small."""
        return self.queue_polls >= QUEUE_PERSIST or self.backlog_full or self.far_too_small

    @property
    def far_too_small(self) -> bool:
        """The latest poll's queue alone says the pool is far too small: its backlog full, or
        more than twice as many waiting as the workers can hold (a closed loop of 48 clients
        on 24 workers always queues 24; a load back from a quiet spell, 46 on 2)."""
        slots = self.live * max(self.latest.threads, 1)
        return self.latest.queue_full or (self.queue_now or 0.0) > 2 * slots

    @property
    def all_busy(self) -> bool:
        """The mean busy ratio of the last polls means all busy (`signals.busy`)."""
        return busy(self.busy_ratio, self.busy_full)

    def evidence(self) -> dict[str, float | int | str | None]:
        def r(v: float | None, nd: int = 2) -> float | None:
            return None if v is None else round(v, nd)

        return {
            "live": self.live,
            "workers_max": self.latest.workers_max,
            "rps": r(self.x if self.x is not None else self.x_part, 1),
            "mean_rt_ms": r(self.w if self.w is not None else self.w_part, 1),
            "noise": r(self.noise, 3),
            "littles_l": r(self.l_recent),
            "l_max_window": r(self.l_window),
            "queue": r(self.queue, 1),
            "busy_ratio": r(self.busy_ratio),
            "cpu_sat": r(self.cpu_sat),
            "mem_cap": self.mem_cap,
            "threads": self.latest.threads,
            **(self.model.evidence() if self.model else {}),
        }


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return fmean(vals) if vals else None


def rated(frame: Frame) -> bool:
    return frame.kind == "ok" and frame.rps is not None and frame.littles_l is not None


def memory_cap(frame: Frame, settings: TunerSettings) -> int | None:
    """Most live workers memory allows: the budget, and what available memory can still hold."""
    per = frame.mem_per_worker
    if not per:
        return None
    caps: list[int] = []
    if settings.memory_budget is not None:
        caps.append(settings.memory_budget // per)
    if frame.mem_available is not None:
        caps.append(frame.live + int(frame.mem_available * settings.memory_headroom // per))
    return max(min(caps), 0) if caps else None


def _regime(
    frames: Sequence[Frame], live: int, start: float, keep: int, edge: float
) -> list[Frame]:
    """The unbroken run of rated frames at `live` workers since `start`, oldest first. Only
    its newest part is read: at least `keep` frames and all since `edge`, so a long run
    (a steady pool: the whole 6,000-frame window at 10 Hz) is cut there, not scanned."""
    regime: list[Frame] = []
    for f in reversed(frames):  # from the newest: the run ends where it breaks
        if not rated(f):
            continue
        if f.live != live or f.mono < start:
            break
        regime.append(f)
        if len(regime) >= keep and f.mono < edge:
            break
    regime.reverse()
    return _warmed(regime, start)


def _warm(f: Frame) -> bool:
    return all(w.requests >= WARM_REQUESTS for w in f.workers if w.live)


def _warmed(regime: list[Frame], start: float) -> list[Frame]:
    """The regime from the first poll whose rates are all warm workers' (the poll before it
    read every live worker past its first WARM_REQUESTS). Measured: 16 new Django workers
    read 15 req/s in their first polls after a reload, where 64 had served 22.6 and 2 serve
    22: the step 64 -> 16 was judged worse on them and reverted. Only within WARM_LIMIT of
    the change: workers an idle pool never hands a request do not hold it up."""
    # past the limit (a pool long since changed, every decision after): no worker is read
    if not regime or regime[0].mono >= start + WARM_LIMIT or _warm(regime[0]):
        return regime
    cold = [i for i, f in enumerate(regime) if f.mono < start + WARM_LIMIT and not _warm(f)]
    return regime[cold[-1] + 2 :] if cold else regime


def _waiting(frame: Frame) -> float | None:
    n = requests_waiting(frame)
    return None if n is None else float(n)


def _measure(sample: Sequence[Frame], settings: TunerSettings) -> tuple[float | None, float]:
    """Mean throughput over `sample`, and the relative change below which a difference is
    noise: at least min_noise, more when the polls spread."""
    x_part = _mean([f.rps for f in sample])
    noise = settings.min_noise
    if x_part and len(sample) > 1:
        cv = pstdev([f.rps or 0.0 for f in sample]) / x_part
        noise = max(noise, 3 * cv / math.sqrt(len(sample)))
    return x_part, noise


def load_moving(recent: Sequence[Frame]) -> tuple[float, float] | None:
    """(least, most) requests/s over the recent polls if the most is LOAD_JUMP times the
    least (quiet polls counted at QUIET_RPS); else None."""
    rates = [f.rps for f in recent if f.rps is not None]
    if len(rates) < 2:
        return None
    lo, hi = min(rates), max(rates)
    return (lo, hi) if hi >= LOAD_JUMP * max(lo, QUIET_RPS) else None


def _recent(recent: Sequence[Frame], latest: Frame) -> dict[str, float | None]:
    """The short-term means of the per-frame signals (`uwsgitune.core.signals`)."""
    return {
        "l_recent": _mean([f.littles_l for f in recent]),
        "queue": _mean([_waiting(f) for f in recent]),
        "busy_ratio": _mean([f.busy_ratio for f in recent]),
        "cpu_sat": _mean([cpu_saturation(f) for f in recent]),
        "cpu_used": _mean([f.instance_cpu_cores for f in recent]),
        "queue_now": _waiting(latest),
        "busy_now": latest.busy_ratio,
        "demand_peak": max((in_instance(f) for f in recent), default=None),
    }


def gather(
    frames: Sequence[Frame], settings: TunerSettings, now: float, regime_start: float
) -> Measures:
    latest = frames[-1]
    edge = latest.mono - settings.down_window
    keep = max(settings.measure_frames, RECENT, 2)  # what reads `regime` needs no more
    regime = _regime(frames, latest.live, regime_start, keep, edge)
    sample = regime[-settings.measure_frames :]
    x_part, noise = _measure(sample, settings)
    w_part = _mean([f.mean_rt_ms for f in sample])
    full = len(sample) >= settings.measure_frames
    window_peak, window_top = peak_and_ceiling(frames, edge, RECENT)  # one read of the polls
    return Measures(
        latest=latest,
        now=now,
        live=latest.live,
        regime=tuple(regime),
        x=x_part if full else None,
        w=w_part if full else None,
        noise=noise,
        x_part=x_part,
        w_part=w_part,
        noise_part=max(noise, 2 * settings.min_noise),
        l_window=max((f.littles_l or 0.0 for f in regime if f.mono >= edge), default=None),
        queue_window=_mean([_waiting(f) for f in regime if f.mono >= edge]),
        window_covered=bool(regime) and regime[0].mono <= edge + settings.interval,
        cpus=latest.effective_cpus,
        mem_cap=memory_cap(latest, settings),
        model=estimate(sample, settings.cpu_workers_per_cpu, settings.cpu_saturated),
        concurrency_peak=window_peak,
        served_peak=concurrency_peak(regime, regime[0].mono, 1) if regime else None,
        dispersion=dispersion(frames, edge, DISPERSION_POLLS),
        window_ceiling=window_top,
        served_ceiling=ceiling(regime, edge),
        load_moving=load_moving(regime[-RECENT - 1 :]),  # and the poll before the means
        level=settled_level(regime, frames, edge, settings.measure_frames),
        queue_min=settings.queue_min,
        busy_full=settings.busy_full,
        queue_polls=sum(1 for f in regime[-RECENT:] if (_waiting(f) or 0.0) >= 1),
        recent_polls=len(regime[-RECENT:]),
        backlog_full=any(f.queue_full for f in regime[-RECENT:]) or latest.queue_full,
        pile=pile(regime, settings.busy_full),
        **_recent(regime[-RECENT:], latest),
    )
