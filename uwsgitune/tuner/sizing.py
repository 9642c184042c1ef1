"""Sizing rules: the live count the tuner wants, and why. Pure; one small function per rule.

Theory of operation
-------------------
The sizing model (core/staffing.py) says how many workers keep the CPUs busy given the IO
share of a request: its `workers`, the capacity. Demand says how many the load needs:
Little's L with square-root staffing (L + beta√L) when nothing waits, in-service plus queued
when something does. The tuner goes to min(capacity, demand) in one move, and holds while
the count is within `model_band` of it, so a load that doubles or halves is met by one
decision, and a pool of 64 workers on 2 CPUs goes to its size in one reload rather than a
halving per cool-down.

Not saturated (no queue, not every worker busy): Little's law up at once; down only to what
the *maximum* L over `down_window` needs, and only by more than the band, so a load on the
boundary never oscillates; a load that fell and settled, sooner (demand.py).

Saturated (a queue, or every worker busy): the queue hides the demand. A queue seen at one
poll is not yet a shortage: a step up waits until it persists (QUEUE_PERSIST of the recent
polls, `Measures.queue_persists`) or a backlog fills (`_brief`). Below the capacity
the tuner moves to it (or to the demand, if smaller) in one step. The demand is what the
queue says of the arrival rate (`_arriving`): a queue that waited at every poll at this
count stands (a closed loop's clients: in service plus queued), and one that grew since
the last poll at its least, every worker busy from then on, adds its growth over that time
to the rate the pool serves, so a pile the backlog built over a poll or two, at a load that
crept past the pool, is sized as the few percent more arrivals it is, not as that many
requests of steady demand (a pod of 14 workers went to 32 on a queue of 40 piled in one
5 s poll, and went back down a minute later); and no further than the way down keeps for
that load (`level.reach` once the spread of the requests is read, `_kept` before), so the
step is not undone while the load holds. A queue that stood
still over the last poll came at once (a closed loop's clients that doubled) and stands.
At the capacity, with the CPUs still not saturated, the model was wrong or uncertain: it
probes up by `probe_step`.
Each step is a *probe*: throughput X before it is compared with X after `measure_frames`
settled polls at the new count (saturated, the time clients wait follows X; response time
W moves with where the queue sits, so it is not judged). A loss reverts it and remembers the
count as a plateau (not probed again for `reprobe_after`, or until the saturation ends); a
step that was not worse is never undone by the opposite rule (the plateaus), so the climb
and the capacity rule cannot ping-pong. Noise is the larger of `min_noise` and 3 standard
errors of X. A step up from a queue of a request or two that ends the saturation and serves
no more goes back, and such a queue is then no shortage at that count for that load
(`QueueServed`, verdict.py says why). Saturated with the CPUs saturated, adding cannot help,
with one exception: threaded processes that each hold their GIL nearly all the time, fewer
than the model's count, are limited by the processes (one CPU each at most), so the model's
count is probed.

Over capacity: a pool that keeps its CPUs saturated with more than the capacity plus the
band goes straight to the capacity, saturated or not (under contention Little's L counts
requests waiting for a CPU, so L alone would ask for ever more workers). The move is judged
like any probe; when the polls disagree on the estimate by more than `uncertain`, it goes to
the top of the estimate's range instead (estimate x (1 + spread), never slower than a
halving), judged there. On a pool far too large the estimate errs high, so the top of its
range is safe, and the next estimate, made with fewer idle workers, is closer. Without an
estimate, the old rule stands: halve towards `cpu_workers_per_cpu` per CPU; but while
requests have just begun at the count and the estimate can come with the next polls, it
waits for it (`cpu-estimating`, at most `ESTIMATE_WAIT`), and CPUs used while no request
is served or in service (workers just forked) move nothing (`_cpu_bound`). Come down to a
count within the band above the estimate made there (a step down that was not worse leaves
`plateau_up` at it), the pool is probed down to the estimate (`cpu_trim`), judged on
throughput: the band otherwise holds the top of an uncertain range for good (64 -> 13 -> 7
on a CPU-bound Django page, estimate 5 at 7). Where a standing queue feeds every worker and
a request is almost all CPU, the model's count is the CPUs' own, without its spare
(`demand.capacity`), and the trim goes there from any count.

What probing learned (the plateaus) holds for one load: it is forgotten when a request's CPU
or IO time moves by more than the band, or after `reprobe_after`; the ceiling of a climb
also when the pool stops being saturated.

The first matching rule wins (`RULES`); bounds (floor, ceiling, memory) apply afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from uwsgitune.core.signals import requests_waiting
from uwsgitune.core.staffing import (
    MIN_REQUESTS,
    estimable,
    requests_counted,
    workers_for,
    workers_holding,
)
from uwsgitune.tuner.decision import Proposal, TunerState
from uwsgitune.tuner.demand import SMALL_QUEUE, all_served, capacity, littles_law, queue_served
from uwsgitune.tuner.level import reach
from uwsgitune.tuner.measures import QUEUE_PERSIST, Measures
from uwsgitune.tuner.tunersettings import TunerSettings

GIL_FULL = 0.9  # a process's GIL held or wanted this share of the time: the process is the limit
# polls of a queue's growth that a standing queue past it must exceed to be clients that stand
# rather than arrivals piled before (`_arriving`)
PILE_POLLS = 4
# seconds from a count's first request the CPU-bound move waits for the model's estimate
ESTIMATE_WAIT = 20.0


def cpu_hot(f: Measures, s: TunerSettings) -> bool:
    """The CPUs the instance can get are used up (`cpu_saturated`), and that limits its pool:
    every step up waits for a CPU to spare. Not beside busy neighbours (`_io_beside_busy`)."""
    if f.cpu_sat is None or f.cpu_sat < s.cpu_saturated:
        return False
    return not _io_beside_busy(f, s)


def _io_beside_busy(f: Measures, s: TunerSettings) -> bool:
    """Others keep the CPUs busy, while the pool itself uses little of them (below
    `cpu_instance_min` of its CPUs) and its requests wait on IO (the model's CPU and
    run-queue time below `io_cpu_share` of a request): a worker added there serves requests
    that wait on something else, and takes next to no CPU from anyone. One IO-bound worker
    of 51 ms requests (0.26 ms on a CPU, 0.88 ms in the run queue) beside tests that held both
    CPUs read saturated, and was held at 1 with 5 connections queued. Unknown without the
    model: the CPU then stays the limit."""
    m = f.model
    if m is None or f.cpu_used is None or not f.cpus:
        return False
    if f.cpu_used >= s.cpu_instance_min * f.cpus:
        return False
    on_cpu = m.cpu_ms + (m.runq_ms or 0.0)
    total = on_cpu + m.io_ms
    return total > 0 and on_cpu < s.io_cpu_share * total


def stride(live: int, s: TunerSettings) -> int:
    """A probe's step from `live` workers: `probe_step` of the pool, at least one."""
    return max(1, math.ceil(live * s.probe_step))


def _band(n: int, s: TunerSettings) -> int:
    return max(1, math.ceil(n * s.model_band))


def below_floor(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    if f.live >= s.min_workers:
        return None
    return Proposal(s.min_workers, "floor", f"{f.live} live < floor {s.min_workers}", urgent=True)


def above_ceiling(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    if f.live <= s.max_workers:
        return None
    return Proposal(
        s.max_workers, "ceiling", f"{f.live} live > ceiling {s.max_workers}", urgent=True
    )


def memory_over(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    if f.mem_cap is None or f.live <= max(f.mem_cap, s.min_workers):
        return None
    cap = max(f.mem_cap, s.min_workers)
    return Proposal(
        cap, "memory-cap", f"memory allows {f.mem_cap} workers, {f.live} live", urgent=True
    )


def _cpu_bound(f: Measures, s: TunerSettings) -> bool:
    # The instance itself must be using the CPUs: a host kept busy by others does not make
    # an IO-bound pool oversubscribed. And its requests must: with none served and no worker
    # busy, the CPU is the workers' own (64 Django workers just forked held 2 CPUs for 15 s
    # with no request in sight, and were halved by a reload), and their count is no lever.
    serving = (f.x or 0.0) > 0 or (f.busy_ratio or 0.0) > 0
    return serving and cpu_hot(f, s) and bool(f.cpus) and (f.cpu_used or 0) >= 0.5 * (f.cpus or 0)


def over_capacity(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    if not _cpu_bound(f, s):
        return None
    cap = capacity(f)
    if cap is None and f.model is not None:
        return None  # next to no CPU per request: the CPUs bound nothing
    floor = max(s.min_workers, st.plateau_down or 0)
    if cap is None:  # no estimate yet: halve towards the plain CPU count
        assert f.cpus is not None
        target = max(math.ceil(f.cpus * s.cpu_workers_per_cpu), floor)
        if f.live <= target:
            return None
        waiting = _estimating(f, s)
        if waiting is not None:
            return Proposal(f.live, "cpu-estimating", waiting)
        desired = max(target, f.live - f.live // 2)
        why = f"CPU {f.cpu_sat:.0%} used by {f.live} workers on {f.cpus:g} CPUs; try {desired}"
        return Proposal(desired, "cpu-oversubscribed", why, probe=True)
    target = max(cap, floor)
    if f.live <= target + _band(target, s):
        return None
    m = f.model
    assert m is not None
    why = (
        f"CPU {f.cpu_sat:.0%} used by {f.live} workers on {m.cpus:.2g} CPUs; a request uses "
        f"{m.cpu_ms:.1f} ms CPU and waits {m.io_ms:.1f} ms on IO, so about {target} keep "
        "the CPUs busy: more only share them"
    )
    if m.spread > s.uncertain:
        # The polls disagree: go to the top of the estimate's range (never slower than a
        # halving), judged there. Not the estimate: it may be low. Not a halving per
        # cool-down: on a pool far too large the estimate errs high, not low (an idle
        # worker's wait for a CPU is partly read as IO), and the next estimate, made where
        # the CPUs are less oversubscribed, is closer.
        top = math.ceil(target * (1 + m.spread) - 1e-9)
        desired = max(target, min(top, f.live - f.live // 2))
        why += f" (uncertain: ±{m.spread:.0%}; try {desired}, the top of its range)"
        return Proposal(desired, "cpu-oversubscribed", why, probe=True)
    # Twice the count or more: plainly oversubscribed, so move now and judge the move against
    # the polls there are (every second at 64 workers costs throughput and memory).
    return Proposal(target, "cpu-oversubscribed", why, probe=True, fast=f.live >= 2 * target)


def _estimating(f: Measures, s: TunerSettings) -> str | None:
    """Why the model's count is worth waiting for: requests have begun at this count, the
    polls the model reads (`measure_frames`) hold fewer than it needs (`MIN_REQUESTS`), and
    it can answer once they do: the CPU per worker is read, and the wait for a CPU too where
    the host is contended (`staffing.estimable`). None: no wait. The wait ends
    `ESTIMATE_WAIT` after the first poll with a request at this count, and is never taken
    on a count older than the down window (its regime then no longer starts at the count's
    first poll). On a real Django page the halving without an estimate went 64 -> 32 on
    the first 2 requests, and took two more reloads to reach 4."""
    if not estimable(f.regime, s.cpu_saturated) or f.window_covered:
        return None
    served = requests_counted(f.regime[-s.measure_frames :])  # what the model reads
    begun = [fr.mono for fr in f.regime if fr.rps or fr.busy_ratio]
    if served >= MIN_REQUESTS or not begun or f.latest.mono - begun[0] >= ESTIMATE_WAIT:
        return None  # enough (the model declined for its own reason), none yet, or too slow
    return (
        f"CPU {f.cpu_sat or 0:.0%} used by {f.live} workers; {served:.0f} requests in the "
        f"polls the model reads, it needs {MIN_REQUESTS}: estimating before a move (at most "
        f"{ESTIMATE_WAIT:.0f}s)"
    )


def cpu_trim(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    """Come down to this count by a step that was not worse (`plateau_up` is this count),
    saturated on CPUs the pool itself keeps busy, and within the band above the model's
    count (`over_capacity` holds there): probe down by `probe_step`, or what is left of the
    way, to the model's count, judged on throughput like any probe. A loss reverts it and
    stops the descent there (`plateau_down`). One thread per worker only. A count a climb
    reached is the band's to hold: trimming it chases the estimate's noise, a reload at a
    time; but not where the model's count has no spare (`demand.capacity`: a standing
    queue and requests almost all CPU), which is the CPUs' own count, not an estimate. That
    trim goes there in one move, and only from 2 or more workers over it.

    The band holds a count anywhere up to half above an estimate that itself carries
    `cpu_workers_per_cpu` spare workers per CPU, so a first move landing at the top of an
    uncertain range stayed there: a CPU-bound Django page went 64 -> 13 -> 7 and held 7
    (estimate 5) where 2 or 3 workers serve as much; a check from 48 workers settled at 3x
    the CPUs with the same throughput as the CPU count. Fewer workers at the same
    throughput: less memory, and each request waits less for a CPU."""
    if not f.saturated or not _cpu_bound(f, s) or f.model is None or f.latest.threads > 1:
        return None
    m, cap = f.model, capacity(f)
    if m.workers is None or cap is None:
        return None
    if st.plateau_up != f.live and cap == m.workers:
        return None  # not come down here (a climb's count is the band's to hold)
    least = max(s.min_workers, cap, st.plateau_down or 0)
    if f.live <= least:
        return None
    if cap < m.workers and f.live - least < 2:
        return None  # one worker over the CPUs' own count is not worth a reload
    # a probe step, or what is left of the way to the model's count: a trim that stopped a
    # step short held one worker over the live-worker bound at 4 and 16 CPUs (simulated:
    # 7 where 6 is the bound, 25 where 24), and a loss reverts it like any probe. To the
    # CPUs' own count (no spare: `staffing.sized`) in one move: a count, not an estimate's
    # noise, and each step is a reload (a CPU-bound Django page went 5 -> 4 -> 3 -> 2, one
    # reload each, 30 s apart)
    step = least if cap < m.workers else f.live - stride(f.live, s)
    desired = max(least, step)
    why = (
        f"CPU {f.cpu_sat:.0%} used by {f.live} workers on {m.cpus:.2g} CPUs; about "
        f"{m.concurrency:.1f} requests in service keep them busy: try {desired}, judged on "
        "throughput"
    )
    return Proposal(desired, "cpu-trim", why, probe=True)


def saturated_up(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    if not f.saturated or all_served(f):
        return None
    held = _load_moving(f) or _held(f, st, s) or _brief(f) or _small(f)
    if held is not None:
        return held
    threads = max(f.latest.threads, 1)
    demand, want, arriving = _demand(f, s)
    cap = capacity(f)
    queue = _queued(f, cap)
    q = "?" if f.queue is None else f"{f.queue:.1f}"
    head = f"saturated (queue {q}, busy {f.busy_ratio or 0:.0%})"
    if cap is not None and f.live >= cap:
        # At the model's count with the CPUs not saturated: the model may be wrong. Probe.
        desired = f.live + stride(f.live, s)
        why = f"{head} at the model's {cap} with CPU {f.cpu_sat or 0:.0%}: probe {desired}"
        return _capped(Proposal(desired, "probe-up", why, probe=True), st)
    # Each queued connection is a request no worker holds: a step may always take them all,
    # so a pool far too small reaches its size in one step.
    top = max(f.live + 1, math.floor(f.live * s.max_up_factor), f.live + math.ceil(queue / threads))
    desired = max(f.live + 1, min(want, top, cap if cap is not None else want))
    why = f"{head}, demand ~{demand:.1f}"
    why += f" ({arriving})" if arriving else ""
    why += f", the CPUs keep about {cap} busy" if cap is not None and cap < want else ""
    # At least as many waiting as in service: capacity is plainly short, so step now and
    # judge the step against the polls there are, rather than measure the backlog longer.
    fast = queue >= f.live * threads
    return _capped(Proposal(desired, "saturated", f"{why}: step up", probe=True, fast=fast), st)


def _held(f: Measures, st: TunerState, s: TunerSettings) -> Proposal | None:
    """Saturated, but adding cannot help, or was shown not to (None: a step up may)."""
    if cpu_hot(f, s):
        gil = _gil_step(f, st)
        if gil is not None:
            return gil
        return Proposal(
            f.live, "cpu-saturated", f"saturated, CPU {f.cpu_sat:.0%} used: adding cannot help"
        )
    if queue_served(f, st, s):
        assert st.queue_served is not None
        why = (
            f"a queue of {f.queue or 0:.1f} at {f.live} workers: a step up from "
            f"{st.queue_served.live} served no more at this load, so it is requests arriving "
            "as their workers finish"
        )
        return Proposal(f.live, "queue-served", why)
    if st.plateau_up is not None and f.live >= st.plateau_up:
        return Proposal(
            f.live, "plateau", f"saturated, but adding above {st.plateau_up} did not help"
        )
    return None


def _brief(f: Measures) -> Proposal | None:
    """A queue that did not persist: seen at fewer than QUEUE_PERSIST of the recent polls at
    this count, no backlog full (None: it persists, a step up may). At a steady load near
    the workers' count a queue of a few comes and goes: stepping up on one poll's queue sent
    a pool 4 -> 13 at rho 0.9, and Little's law 20-30 s later took it back (the fleet
    simulation: two turns per load change in 2-3 pods of 8-16). A load past the pool queues
    at every poll, so waiting for a second one costs one poll; a backlog that fills costs
    refused connections, and a queue of more than twice the workers' slots says the pool is
    far too small (a load back from a quiet spell), so neither is waited for."""
    if f.queue_persists:
        return None
    q = f.queue_now or 0.0
    why = (
        f"a queue at {f.queue_polls} of the last {f.recent_polls} polls ({q:.0f} now, busy "
        f"{f.busy_ratio or 0:.0%}): a step up waits for one at {QUEUE_PERSIST} polls, a full "
        "backlog, or one past twice the workers"
    )
    return Proposal(f.live, "queue-brief", why)


def _small(f: Measures) -> Proposal | None:
    """A queue of a request or two that no client waited through: at no poll past
    SMALL_QUEUE, at the latest nor in the recent means, and nothing waited at every poll at
    this count; one thread per worker (None: a step up may). In a closed
    loop as large as the pool it is a client's next request queued before its worker showed
    idle (16 clients on 16 workers read 0.7-1.3): a step serves no more, and
    `verdict._unsaturated` took it back. In an open loop whose load climbs past the pool
    (behind a load balancer, the normal case) it is the first of a queue that grows, and the
    step taken back there was taken again 40-105 s later (the fleet simulation's daily
    curve: 14 -> 16 -> 14 -> 18, a turn per load change too many, in 4 of its 25 pods). So
    the step waits for the queue to pass SMALL_QUEUE: an open loop's grows there within a
    poll or a few, and the step is then sized on its growth (`_arriving`); a closed loop's
    never does. A queue of one or more at every poll (17 clients on 16 workers), a full
    backlog or a pool far too small step as before. (Not `Pile.standing`: two small queues
    always read as one that stood still.)"""
    if f.latest.threads > 1 or f.queue is None or f.queue_now is None:
        return None
    if f.backlog_full or f.far_too_small or max(f.queue, f.queue_now) > SMALL_QUEUE:
        return None
    queues = [requests_waiting(fr) for fr in f.regime]
    known = [q for q in queues if q is not None]
    if not queues or len(known) < len(queues) or min(known) >= 1:
        return None  # unknown at a poll, or a connection waited at every one
    why = (
        f"a queue of {f.queue_now:.0f} ({f.queue:.1f} over the last polls, busy "
        f"{f.busy_ratio or 0:.0%}) that no client waited through: a step up waits for one "
        f"past {SMALL_QUEUE:g}, or one at every poll"
    )
    return Proposal(f.live, "queue-small", why)


def _queued(f: Measures, cap: int | None) -> float:
    """The connections a step up may take: the recent polls' mean queue and, where the model
    bounds the step (`cap`), the latest poll's. A load back from a quiet spell has its means
    diluted by the quiet polls (drop: 2 -> 18 on a mean of 15 queued, 46 queued at the
    poll, where the CPUs keep 24 busy)."""
    queue = f.queue or 0.0
    return max(queue, f.queue_now or 0.0) if cap is not None else queue


def _demand(f: Measures, s: TunerSettings) -> tuple[float, int, str]:
    """Requests in service and queued (the most of the recent polls), and the count that
    serves them (L + beta√L), never past the requests seen at once at this count: a closed
    loop of 32 clients on 33 workers can read 34 at a poll (a worker still busy after its
    answer went out), and square-root staffing of that asked for 45. Also never past what
    the queue says of the arrival rate (`_arriving`), and why (or "")."""
    threads = max(f.latest.threads, 1)
    demand = max(f.demand_peak or 0.0, (f.l_recent or f.live * threads) + (f.queue or 0.0))
    piled = _arriving(f)
    arriving = piled or _refused(f)
    why = ""
    want = workers_for(demand, threads, s.staffing_beta)
    if arriving is not None and arriving[0] < demand:
        demand, why = arriving
        want = workers_for(demand, threads, s.staffing_beta)
        if f.dispersion is not None:
            # what the ways up and down keep for that load with its spread (`level.reach`)
            want = min(want, reach(demand, f.dispersion, threads, s.staffing_beta))
        elif piled is not None:
            want = min(want, _kept(demand, threads))
    if f.served_peak is not None:
        want = min(want, max(f.served_peak, f.live + 1))
    return demand, want, why


def _kept(demand: float, threads: int) -> int:
    """What the way down keeps for `demand` requests in the instance before the spread of
    the requests is read (`demand._reach`): one worker past those that hold them
    (`demand.load_fell`), and the tenth a move down leaves alone. A step up sized on a pile
    then goes no further: square-root staffing of it (L + 2√L) went 7 -> 13 at a load of
    7.1 in service, and `load-fell` took it to 10 20 s later. Sized on what the kernel
    refused, it goes to L + 2√L of that rate: connections refused are arrivals, not
    clients waiting for their answers."""
    n = workers_holding(demand, threads) + 1
    return n + max(1, math.ceil(0.1 * n))


def _arriving(f: Measures) -> tuple[float, str] | None:
    """The requests the arrivals keep in the instance, from what the queue says of their
    rate (`Measures.pile`): the requests in service scaled by the arrival rate over the
    throughput, where the queue that grew since the last poll at its least adds its growth
    over that time to the rate, plus the queue that waited at every poll at this count
    (clients of a closed loop, who come back as soon as they are served), or that stood
    still over the last poll (`Pile.still`: they came at once). A pile that the
    backlog built over k polls is k polls of arrivals past the pool, not that many requests
    of steady demand: sized as one, a pod of 14 workers at a load that crept past them went
    to 32 on a queue of 40 piled up in one 5 s poll (3% more arrivals than it served), and
    `load-fell` or Little's law took it back 25-105 s later (the fleet simulation, the daily
    curve). A closed loop whose clients double on a busy pool piles them up at once: at
    the second poll (which a queue that persists waits for anyway) they stood still, and
    the step takes them all; past twice the workers at the first poll, the step is on the
    rate first, then on the queue that still stands. None:
    the queue does not tell: unknown, a backlog full (what was refused is not in it), or it
    grew while the pool was not busy through the polls (`Pile.busy_through`: arrivals that
    came in part of a poll, a load that jumped or came back, say nothing of their rate)."""
    p = f.pile
    if p is None or f.backlog_full or (p.grown > 0 and not p.busy_through):
        return None
    threads = max(f.latest.threads, 1)
    l_now = f.l_recent or f.live * threads
    rate = p.x + p.excess
    # What waited at every poll counts as clients that stand, unless the queue grows and a
    # few polls of that growth (PILE_POLLS) would have piled it: then it is the arrivals
    # past the pool before the least, which the rate already holds. A pod that joined a
    # service at 4 workers read 14-30 queued at its first poll and 11-22 more at its second
    # (104 req/s on 100 served), went to 12 for 4.2 requests in service, and Little's law
    # took it to 9 150 s later; a burst onto 64 workers left 120 standing and 3 more a
    # second later, which are clients (stepped on as a rate alone, it went 64 -> 72 -> 81
    # -> 190 where 187 was one step, and its p99 read 2.29x the best where 1.80).
    standing = p.standing if p.standing > PILE_POLLS * max(p.grown, 0.0) else 0.0
    demand = l_now * rate / p.x + standing
    why = f"{p.x:.0f} req/s served"
    if p.grown > 0:
        why += f", {rate:.0f} arriving (the queue grew by {p.grown:.0f} in {p.over:.0f} s)"
    if standing > 0 and p.still:
        why += f", {standing:.0f} waiting at the last two polls"
    elif standing > 0:
        why += f", {standing:.0f} waiting at every poll at {f.live}"
    return demand, why


def _refused(f: Measures) -> tuple[float, str] | None:
    """With the backlog full at the latest poll, the requests the arrivals keep in the
    instance from what the kernel refused over that poll (`listen_overflows_delta`,
    TcpExtListenOverflows): the arrival rate is at least the throughput plus the refused
    connections a second. The queue that fills the backlog is arrivals past the pool, not
    clients that stand: a pod that joins a loaded service (its first poll: 4 workers, the
    backlog of 100 full) went to 32 on it, Little's law took it to 14 within 5 minutes, and
    the climbing load took it up again 2 h later (the fleet simulation's daily curve). The
    counter is the network namespace's: a pod's own in Kubernetes, the host's elsewhere,
    where other sockets' overflows make the rate read high and the step no smaller than the
    whole queue's (`_demand` takes the less). None: the backlog not full at the latest
    poll, nothing refused (or not known), or nothing served."""
    latest = f.latest
    refused, dt, x = latest.listen_overflows_delta, latest.dt, latest.rps
    if not latest.queue_full or not refused or refused < 0 or not dt or not x or x <= 0:
        return None
    threads = max(latest.threads, 1)
    l_now = latest.littles_l or f.live * threads
    rate = x + refused / dt
    why = f"{x:.0f} req/s served, {rate:.0f} arriving ({refused} refused in {dt:.0f} s)"
    return l_now * rate / x, why


def _load_moving(f: Measures) -> Proposal | None:
    """The recent polls mix two loads (one starting again after a quiet spell reads as a
    queue beside a CPU that looks idle): measure the new one for a few polls before sizing
    on it. Not when the queue alone says the pool is far too small: the backlog full, or
    more than twice as many waiting as the workers can hold (a closed loop of 48 clients
    on 24 workers always queues 24: `Measures.far_too_small`)."""
    if f.load_moving is None or f.far_too_small:
        return None
    lo, hi = f.load_moving
    why = f"the load is moving ({lo:.0f} to {hi:.0f} req/s over the last polls): measuring it"
    return Proposal(f.live, "load-moving", why)


def _gil_step(f: Measures, st: TunerState) -> Proposal | None:
    """Threaded processes each holding their GIL all the time, fewer than the model's count:
    a process keeps at most one CPU busy, so the processes, not the CPUs, are the limit
    (4 processes of 4 threads served 532 req/s on 2 CPUs where 2 served 482). None: not so."""
    m, cap = f.model, capacity(f)
    if m is None or cap is None or m.threads <= 1 or m.gil_busy is None:
        return None
    if m.gil_busy < GIL_FULL or f.live >= cap:
        return None
    if st.plateau_up is not None and f.live >= st.plateau_up:
        return None
    why = (
        f"saturated, CPU {f.cpu_sat:.0%} used, but each of the {f.live} processes holds its "
        f"GIL {m.gil_busy:.0%} of the time: a process uses at most one CPU, so the model's "
        f"{cap} processes are tried"
    )
    return _capped(Proposal(cap, "gil-bound", why, probe=True, past_hot_cpu=True), st)


def _capped(p: Proposal, st: TunerState) -> Proposal:
    if st.plateau_up is not None and p.desired > st.plateau_up:
        return replace(p, desired=st.plateau_up)
    return p


Rule = Callable[[Measures, TunerState, TunerSettings], Proposal | None]

# In order: safety bounds first, then the saturated regime, then Little's law.
RULES: tuple[tuple[str, Rule], ...] = (
    ("floor", below_floor),
    ("ceiling", above_ceiling),
    ("memory-cap", memory_over),
    ("cpu-oversubscribed", over_capacity),
    ("cpu-trim", cpu_trim),
    ("saturated", saturated_up),
    ("littles-law", littles_law),
)
