"""A load that fell and settled: the evidence for a quick way down. Pure.

Down moves normally wait for `down_window` of low demand (the most requests in service over
it), so that a quiet poll or a lull between bursts never shrinks the pool. A load that
halved and stayed there then keeps the old count for the whole window. A *level* is the
evidence that it did:

- the last `measure_frames` polls at the current count agree: the most requests in the
  instance (in service + queued) of any of them is within SPREAD of the least, plus one;
- each of them had an idle worker (nothing waited for a worker);
- the down window's peak demand is at least FALL times the level's: the load fell.

It does not count when the window shows the load had already fallen to this level and then
risen again: bursts with lulls between them. The whole window decides then, as before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from uwsgitune.core.frame import Frame
from uwsgitune.core.signals import waiting_unless_full

FALL = 1.5  # the window's peak demand is at least this many times the level's
SPREAD = 0.25  # the level's polls' demand within this share of each other (plus one request)
RISE = 2  # polls in a row at the old demand that make a rise
OPEN = 0.5  # a spread of the requests this share of a Poisson count's or more: random arrivals
# The polls at the most seen at once that make it a ceiling: at least CEILING_POLLS, and
# CEILING_SHARE of them, and twice those one below it. A closed loop's clients are all in
# the instance at most polls (16 clients of 50 ms on a real uWSGI: 16 at 11 polls of 16,
# 15 at one); a random load's count thins out towards its most (a Poisson count of mean
# 14.5 read its most at 3 polls of 30, and one of mean 1.4 read 2 at 8 polls of 30 and 1
# at 10, in the fleet simulation: ways down that stopped there turned)
CEILING_POLLS = 3
CEILING_SHARE = 1 / 3


@dataclass(frozen=True)
class Level:
    demand: float  # most requests in the instance (in service + queued) in a level poll
    in_service: float  # most requests in service (Little's L) in a level poll
    peak: int | None  # most requests at once (busy + queued), in workers' worth (`at_once`)
    fell_from: float  # the down window's peak demand
    ceiling: int | None = None  # `peak`, if the level's polls pile up there (`ceiling`)


def demand(frame: Frame) -> float | None:
    """Requests in the instance over the poll: in service (Little's L) plus queued."""
    waiting = waiting_unless_full(frame)
    if waiting is None or frame.littles_l is None:
        return None
    return frame.littles_l + waiting


def _held(f: Frame) -> int | None:
    """Requests in service at the poll's instant: busy workers, or with threads the requests
    the cores hold (None when a threaded worker's cores are not in the stats)."""
    if f.threads <= 1:
        return f.busy
    held = 0
    for w in f.workers:
        if w.live:
            if len(w.cores_requests) != f.threads:
                return None
            held += len(w.requests_in_flight)
    return held


def at_once(f: Frame) -> int | None:
    """Requests in the instance at the poll, in workers' worth: busy workers plus queued
    connections; with threads, the requests the cores hold plus the queued ones over a
    process's threads, rounded up (a busy threaded worker holds 1 to `threads`). None
    when the queue is unknown or a backlog full, or a threaded worker's cores are not in
    the stats."""
    waiting, held = waiting_unless_full(f), _held(f)
    if waiting is None or held is None:
        return None
    return held + waiting if f.threads <= 1 else math.ceil((held + waiting) / f.threads)


def _at_once_since(frames: Sequence[Frame], edge: float) -> list[int] | None:
    """`at_once` of each good poll since `edge`; None if one of them does not tell it."""
    out: list[int] = []
    for f in reversed(frames):
        if f.mono < edge:
            break
        if not f.ok:
            continue
        now = at_once(f)
        if now is None:
            return None
        out.append(now)
    return out


def concurrency_peak(frames: Sequence[Frame], edge: float, least: int) -> int | None:
    """The most requests in the instance at once (`at_once`) at any poll since `edge`: what
    a pool has had to serve together. A closed population (clients that wait for their
    answer) never exceeds its size, which square-root staffing cannot know. None unless
    every poll since `edge` tells it, `least` polls at least."""
    return peak_and_ceiling(frames, edge, least)[0]


def peak_and_ceiling(
    frames: Sequence[Frame], edge: float, least: int
) -> tuple[int | None, int | None]:
    """`concurrency_peak` and `ceiling` over the same polls, read once."""
    counts = _at_once_since(frames, edge)
    if not counts:
        return None, None
    return (max(counts) if len(counts) >= least else None), _ceiling(counts)


def ceiling(frames: Sequence[Frame], edge: float) -> int | None:
    """The most requests in the instance at once since `edge`, when the polls pile up
    there (CEILING_POLLS, CEILING_SHARE of them, twice those one below): a count the load
    does not pass (a closed loop's clients), not the top of a random load's spread, which
    thins out towards its most and grows with the polls read. None otherwise, or when a
    poll does not tell it."""
    counts = _at_once_since(frames, edge)
    return _ceiling(counts) if counts else None


def _ceiling(counts: list[int]) -> int | None:
    top = max(counts)
    hits = counts.count(top)
    piled = hits >= CEILING_POLLS and hits >= CEILING_SHARE * len(counts)
    return top if piled and hits >= 2 * counts.count(top - 1) else None


def dispersion(frames: Sequence[Frame], edge: float, least: int) -> float | None:
    """How the requests in the instance at an instant spread about their mean, per request,
    over the good polls since `edge` (None unless `least` tell it): each poll's count at its
    instant (the requests the workers hold, `_held`, and the queued ones) against its
    Little's L (the mean in service over the poll's interval) and the polls' mean queue,
    squared, over the sum of those means. Each poll is taken about its own L, so polls of
    different loads or counts pool. Under random arrivals the count is Poisson (variance
    L): about 1; a closed loop's clients, in service or queued at every instant: about 0.
    The queue counts: a pool that every request keeps busy reads its workers busy at every
    poll whatever the arrivals (a pod in the fleet simulation read 0.04 where they were
    random), and only the queue beside it shows them. A poll whose queue is unknown or
    whose backlog is full tells nothing."""
    rows: list[tuple[int, float, int]] = []
    for f in reversed(frames):
        if f.mono < edge:
            break
        if not f.ok or f.littles_l is None:
            continue
        held, waiting = _held(f), waiting_unless_full(f)
        if held is None or waiting is None:
            continue
        rows.append((held + waiting, f.littles_l, waiting))
    if len(rows) < max(least, 1):
        return None
    q = fmean(w for _n, _l, w in rows)
    total = sum(l_ + q for _n, l_, _w in rows)
    if total <= 0:
        return None
    return sum((n - l_ - q) ** 2 for n, l_, _w in rows) / total


def reach(load: float, dispersion: float, threads: int, beta: float) -> int:
    """Processes that hold `load` requests in the instance with room for their spread:
    load + beta·√(d·load) requests, d the `dispersion` over OPEN, no more than 1. A spread
    of OPEN or more is random arrivals, and this is square-root staffing (L + beta√L): the
    estimate wanders (30 polls of a Poisson count read 0.6 to 1.5 in the fleet simulation)
    and a count sized on it as read turned at a steady load. Less is a closed loop's
    clients, who keep every worker they have busy: K clients need about K, which
    square-root staffing of L cannot know. Unlike the most requests seen at once, which
    this replaces, it does not grow with the number of polls read: the most of a Poisson
    count of mean 14 is about 22 over 30 polls and 25 over 300, and the ways up and down,
    reading maxima over different spans, turned at a steady load too."""
    load = max(load, 0.0)
    spare = beta * math.sqrt(min(max(dispersion, 0.0) / OPEN, 1.0) * load)
    return math.ceil((load + spare) / max(threads, 1) - 1e-9)


def _rose_again(before: Sequence[float], high: float, low: float) -> bool:
    """The demand went high, down to `low` or below, then high again for RISE polls in a
    row (one poll is not a load: connections a stopping load left queued read as one)."""
    state, run = 0, 0  # state 0: nothing yet, 1: seen high, 2: seen the fall after it
    for d in before:
        if state == 0 and d >= high:
            state = 1
        elif state == 1 and d <= low:
            state = 2
        elif state == 2:
            run = run + 1 if d >= high else 0
            if run >= RISE:
                return True
    return False


def _before(frames: Sequence[Frame], edge: float, start: float) -> list[float]:
    """The demand of each poll from `edge` to before `start`, oldest first."""
    out: list[float] = []
    for f in reversed(frames):
        if f.mono < edge:
            break
        d = demand(f) if f.mono < start and f.kind == "ok" else None
        if d is not None:
            out.append(d)
    out.reverse()
    return out


def settled_level(
    regime: Sequence[Frame], frames: Sequence[Frame], edge: float, polls: int
) -> Level | None:
    """The level the load settled at over the last `polls` of `regime` (frames at the
    current count), judged against the polls of `frames` since `edge` (the down window, any
    count); None when there is none. The window is read only when the level polls agree."""
    level = regime[-polls:]
    if len(level) < polls or any(f.idle < 1 for f in level):
        return None
    ds = [demand(f) for f in level]
    known = [d for d in ds if d is not None]
    if len(known) < len(ds):
        return None
    lo, hi = min(known), max(known)
    if hi > lo * (1 + SPREAD) + 1:
        return None  # still moving
    before = _before(frames, edge, level[0].mono)
    fell_from = max(before, default=0.0)
    high = FALL * max(hi, 1.0)
    if fell_from < high or _rose_again(before, high, hi * (1 + SPREAD) + 1):
        return None
    peak, top = peak_and_ceiling(level, level[0].mono, polls)
    return Level(
        demand=hi,
        in_service=max(f.littles_l or 0.0 for f in level),
        peak=peak,
        ceiling=top,
        fell_from=fell_from,
    )
