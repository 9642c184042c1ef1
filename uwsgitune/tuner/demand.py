"""Little's law sizing: the live count the demand needs when nothing is saturated. Pure.

Up at once to what the requests in service need (L + beta√L, never more than the CPUs can
serve); down only to what the *maximum* L over `down_window` needs, and only by more than
a tenth, so a load on the boundary never oscillates. A load that fell and settled
(`Measures.level`) goes down sooner, by at most half the pool, paced like a step up.
Neither move goes past what the requests in the instance need with room for their spread
(`level.reach`): square-root staffing for random arrivals, no spare past a closed loop's
clients (spare workers past them never serve). The spread is read over the down window,
each poll about its own mean, so the ways up and down stop at one count for a load and
neither undoes the other (a load that fell keeps one spare past it, or past those in
service: a few polls can read below it). Until 8 polls tell it, a step up stops at the
most requests seen at once, and a load that fell goes no lower than L + 2√L: the two
ways then leave a band between them rather than meet. Counts are processes; with threads,
the requests the cores hold and the queue are counted in processes' worth
(`level.at_once`).
"""

from __future__ import annotations

import math

from uwsgitune.core.staffing import workers_for, workers_holding
from uwsgitune.tuner.decision import Proposal, TunerState
from uwsgitune.tuner.level import OPEN, reach
from uwsgitune.tuner.measures import Measures
from uwsgitune.tuner.tunersettings import TunerSettings

IDLE_DEMAND = 1.0  # a level below one request in the instance: the load stopped
# Mean queued connections that a closed loop reads with no shortage: a client's next
# request arrives before its worker shows idle (16 clients on 16 workers: 0.7-1.3).
SMALL_QUEUE = 2.0


def queue_served(f: Measures, st: TunerState, s: TunerSettings) -> bool:
    """A small queue at this count is no shortage: a step up from here or below took such a
    queue into service and served no more (`QueueServed`), and the throughput is still that
    load's. A load that grew shows in the throughput or the queue, and is sized as usual."""
    qs, x = st.queue_served, f.x if f.x is not None else f.x_part
    if qs is None or x is None or f.live < qs.live or (f.queue or 0.0) > SMALL_QUEUE:
        return False
    return x <= qs.x * (1 + max(f.noise, s.min_noise))


def all_served(f: Measures) -> bool:
    """No poll at this count saw more requests in the instance than workers (busy plus
    queued): a worker was there for each. Every worker busy is then a closed population as
    large as the pool, and a queue beside idle workers is accept() waiting for a CPU. More
    workers would find no request to serve; Little's law sizes the pool instead. One
    worker's worth over the pool at a poll, with no queue in the means, counts as served.
    All in workers' worth (`level.at_once`): with threads, a mean queue of less than
    `queue_min` processes' threads is no queue (64 clients on 16 processes of 4 threads
    read a mean of 0 to 1 queued; one more process serves no more)."""
    peak = f.served_peak
    if peak is None:
        return False
    # One more than the workers at a poll, but no queue in the means: a client's next
    # request arriving before its worker showed idle (16 clients on 16 workers read 17).
    small = (f.queue or 0.0) < f.queue_min * max(f.latest.threads, 1)
    return peak <= f.live or (peak == f.live + 1 and small)


def capacity(f: Measures) -> int | None:
    """The model's count (None: unknown, or the CPUs set no bound), without its spare where
    it has nothing to absorb (`staffing.sized`: a queue feeding every worker, requests
    almost all CPU)."""
    return f.capacity


def _reach(
    f: Measures, load: float, s: TunerSettings, top: int | None, unknown: int | None
) -> int | None:
    """What `load` requests in the instance (in service and queued: a queued request would
    be in service with a worker more) need with room for their spread over the down window
    (`level.reach`), and `unknown` before that spread is known. Where the spread is less
    than random arrivals' (`OPEN`), no more than `top`, the most seen at once read at
    several polls (`level.ceiling`): a closed loop's clients, a count it never passes,
    where the mean and its spread do not stop (16 clients of 50 ms on a real uWSGI read 16
    at most polls and 11-13 at a few: a spread of 0.1-0.33, and 6 processes of 4 threads
    for their 4's worth). A random load's most seen is not a ceiling: it grows with the
    polls read."""
    if f.dispersion is None:
        return unknown
    r = reach(load, f.dispersion, f.latest.threads, s.staffing_beta)
    if f.dispersion < OPEN and top is not None:
        r = min(r, top)
    return r


def _seen(f: Measures, want: int, l_max: float, s: TunerSettings, cap: int | None) -> int:
    """`want`, but never more workers than `cap`, what the requests in the instance need
    with room for their spread (`_reach`: a down move reads the down window's; up, the
    load at this count): spare workers past that never serve."""
    if cap is None:
        return want
    held = workers_holding(l_max, f.latest.threads)
    return min(want, max(cap, held, s.min_workers))


def _fell_since(f: Measures, threads: int, s: TunerSettings) -> bool:
    """The latest poll's own L fits the pool: the recent polls' mean holds a load that has
    since fallen, so no step up on it. Measured (the plant, 48 clients then 2 req/s): 18
    workers held at saturated CPUs read L 12.0 over the last polls at the first quiet one,
    and went up to 19 just as the load fell; in the fleet simulation a replica added read
    the same way. A load that grows reads at least its mean at the latest poll."""
    latest = f.latest.littles_l
    return latest is not None and workers_for(latest, threads, s.staffing_beta) <= f.live


def littles_law(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    threads = max(f.latest.threads, 1)
    l_now = f.l_recent or 0.0
    # Up to what the load at this count needs: the window may hold a load that since fell.
    want = max(workers_for(l_now, threads, s.staffing_beta), s.min_workers)
    served = _reach(f, l_now + (f.queue or 0.0), s, f.served_ceiling, f.served_peak)
    if served is not None and all_served(f):
        # One over the pool at a poll with no queue in the means counts as served (a
        # client's next request arriving before its worker showed idle): no more here.
        served = min(served, f.live)
    need = _seen(f, want, l_now, s, served)
    cap = capacity(f)
    if cap is not None:
        # Never past what the CPUs can serve (under contention L counts requests waiting
        # for a CPU); a pool at the model's count that is still short is probed instead.
        need = min(need, max(cap, f.live))
    if need > f.live and not queue_served(f, st, s) and not _fell_since(f, threads, s):
        why = f"L={l_now:.2f} in service needs {need} workers (L + {s.staffing_beta:g}√L)"
        return Proposal(need, "littles-law-up", why)
    fell = load_fell(f, s)
    if fell is not None:
        return fell
    if f.window_covered and f.l_window is not None:
        down = max(workers_for(f.l_window, threads, s.staffing_beta), s.min_workers)
        load = f.l_window + (f.queue_window or 0.0)
        cap = _reach(f, load, s, f.window_ceiling, f.concurrency_peak)
        down = _seen(f, down, f.l_window, s, cap)
        if down < f.live - max(1, math.ceil(0.1 * f.live)):  # a move worth a change
            why = f"peak L={f.l_window:.2f} over {s.down_window:g}s fits {down} workers"
            closed = f.dispersion is not None and f.dispersion < OPEN
            if cap is not None and down == cap and down == f.concurrency_peak:
                why += f" (at most {down} requests at once)"
            elif down == cap and closed and load >= 1:
                why += (
                    f" ({load:.1f} requests in the instance, spread {f.dispersion:.2f} of "
                    "random arrivals': little spare past them)"
                )
            return Proposal(down, "littles-law-down", why)
    return Proposal(f.live, "steady", f"L={l_now:.2f}: {f.live} workers keep busy near target")


def load_fell(f: Measures, s: TunerSettings) -> Proposal | None:
    """The load fell and settled (`Measures.level`): go to what the level needs (never more
    workers than one past its requests at once or in service), but by at most half the most
    requests the down window saw at once, paced like a step up: a halving is met in one
    decision, a lull between bursts by half the pool at most, a load that stopped
    (`IDLE_DEMAND`) at once."""
    lv = f.level
    if lv is None:
        return None
    threads = max(f.latest.threads, 1)
    need = max(workers_for(lv.demand, threads, s.staffing_beta), s.min_workers)
    # Before the spread is read, no cap: a step up stops at the most seen at once, and a
    # way down that stopped there too went below what the up way takes once the spread
    # comes (a pod 30 s old in the fleet simulation: 9 -> 7 on 5 polls' most, 7 -> 8
    # 100 s later). L + 2√L is the most either way then keeps.
    cap = _reach(f, lv.demand, s, lv.ceiling, None)
    if cap is not None:
        # One spare past what the level's requests need with the window's spread
        # (`level.reach`), or past those in service, whichever is more: the level's few
        # polls can all read below its mean (4 polls of a load of 3 in service read at most
        # 2 at once, and 3 workers for it queued: a step up, then down again, in the fleet
        # simulation).
        held = max(cap, workers_holding(lv.demand, threads))
        need = min(need, max(held + 1, s.min_workers))
    # A lull keeps half the pool for the load's return; a load that stopped (less than one
    # request in the instance at every poll of the level) leaves nothing to keep it for:
    # its return is met by the saturated step up, in one decision.
    idle = lv.demand < IDLE_DEMAND
    half = need if idle else math.ceil((f.concurrency_peak or f.live) / 2)
    down = max(need, half)
    if down >= f.live - max(1, math.ceil(0.1 * f.live)):
        return None
    why = (
        f"the load fell from {lv.fell_from:.1f} requests to a level of {lv.demand:.1f} over "
        f"the last {s.measure_frames} polls: {down} workers"
    )
    if down == half and half > need:
        why += " (at most half the most seen at once in one move)"
    elif idle:
        why += " (the instance is idle)"
    return Proposal(down, "load-fell", why, quick=True, in_service=lv.in_service)
