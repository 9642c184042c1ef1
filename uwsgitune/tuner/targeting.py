"""A latency target as a constraint on the throughput tuner's proposal. Pure.

Theory of operation
-------------------
With `latency_target` set (`tune --latency-target p99=250ms`, the daemon's
`latency_target`), the tuner looks for **the fewest workers whose percentile of real
traffic stays under the target**. The sizing rules (sizing.py) propose a count for
throughput as always; `constrain` then reads the request log's `LatencyView` against the
target (core/latencytarget.py: queue wait + service time, stamped or with Little's mean
wait) and keeps, changes or holds that proposal. Without a target `constrain` is never
called: decisions are exactly those of the throughput tuner.

What is read: the view's windows (10 s, 60 s) that lie wholly at the current count (the
count has been live, unchanged, at least that long: `count_age`), the worse of those that
may be judged. A window that mixes two counts says nothing about either; nor does one that
holds the queue a change left (requests held through a reload): a count is timed from its
first poll with fewer connections waiting than workers, and `DRAIN_TAIL` after it (at most
`DRAIN_MAX` after the change).

The rules, in order (`RULES`):

1. **Safety first**: a floor, ceiling or memory move (`Proposal.urgent`) passes unchanged.
2. **No reading, no shrink**: no request log, a sender not proved to be the master's,
   coverage below `latency_min_coverage`, no line for a while, fewer than
   `latency_min_requests` requests, or no window at this count yet: a move down waits
   (`latency-unknown`, saying which); anything else passes (more workers never break a
   target). Such data never drives a change. One exception: a count just changed (no
   window at it yet) is judged by its own window, so the throughput tuner's growth waits
   for it too (a short queue in the seconds after a probe down, or the requests a reload
   held draining, is no verdict on the count), unless a backlog grows past what a stride
   takes (`_outgrown`, as in 4).
3. **A miss at the edge** (`_unconfirmed`): a miss from queue wait by at most `EDGE` (25%)
   of the target in the 10 s window alone is no verdict yet: hold (`latency-edge`), no
   growth, no latency floor, no shrink, until the minute at this count misses too (or is
   met). A clear miss, a full backlog, or the minute's own miss is judged at once. A 10 s
   window's p99 is its ~10th slowest request at 100 requests/s: one count's readings
   wander about that much either side of its minute's from one window to the next.
4. **A miss from queue wait** (service time alone under the target, the wait on top past
   it): grow by `probe_step` of the pool (at least one: `latency-queue`), or as far as the
   throughput tuner wanted when a backlog grows past what the stride takes (`_outgrown`: a
   socket's backlog full, or a queue past twice the workers at every recent poll, which
   under random arrivals must also grow faster than the stride's workers serve). Without
   one, its step (sized on a queue) is not taken whole: the target bench's run 12 read one
   10 s window at 4 workers 29% over the target, and `saturated` went 4 -> 12 on a queue of
   8, then `load-fell` 12 -> 6; run 15 went 4 -> 16 on a queue of 12.7 at 93% busy. Fewer
   workers than the new count missed it, so latency-driven shrinks stop there
   (`TunerState.latency_floor`, for `reprobe_after`). The bounds still apply afterwards: no
   growth past the ceiling, the memory, or saturated CPUs. A stamped wait with the listen
   queue empty and most workers idle is not a wait for a worker (the proxy's own queue, the
   network): no growth, no shrink (`latency-wait-elsewhere`).
5. **A miss from service time** (service time alone reaches the target): more workers
   cannot fix it, so the target adds none; no shrink either (`latency-service`). A growth
   the throughput tuner wants for its own reason (a queue building) still goes, and so does
   its move down from a pool oversubscribing the CPUs (`cpu-oversubscribed`, `cpu-trim`): there the
   service time includes each request's wait for a CPU, which fewer workers shorten.
6. **Within 20% of the target** (`NEAR`): no shrink, for throughput or latency
   (`latency-near`); no growth either while the target is met (`latency-met`: the target
   decides, and only a miss from queue wait grows), unless a socket's backlog is full.
7. **Room** (under 80% of the target): a steady, unsaturated pool (no listen queue) steps
   down by `probe_step` (at least one; `latency-room`), never below the requests in service
   (Little's L over the down window), the floor, or the latency floor; the throughput
   tuner's growth is held (`latency-met`): Little's law's spare workers, and a short queue
   that costs the target nothing (`saturated`), unless a socket's backlog is full.
   Throughput shrinks pass, but Little's law's and a fallen load's stop at the latency
   floor (`latency-floor`).

**A queue, with the target judged**: once a window at this count can be read, the listen
queue drives no growth of its own but a full backlog (the kernel refusing connections:
those requests are in no window). A queue that grows past the pool shows in the next
window's percentiles within seconds (each request's wait is logged when it is served), and
a miss grows the pool then; one that comes and goes at a load the count meets over the
minute is no shortage (at rho 0.9 a queue of twice the workers comes and goes).

**The latency floor** (`TunerState.latency_floor`): one above a count that missed the target
by queue wait, or that queued so that the throughput tuner grew out of it (`saturated`)
while the target was missed or could not be judged:
fewer workers were too few for this load, so no shrink goes under it (but a safety move).
It is forgotten when the requests in service fall below `1 - model_band` of what they
were when it was learned (a new, lighter load; not the queue, which drains once the pool
grows), after `reprobe_after`, or when a request's cost changes. Without it, a pool just
grown out of a queue is shrunk back into it by the next reading of a load that "fell" (the
queue drained), and so on.

Every decision made with a target carries the reading's numbers in its evidence
(`LatencyReading.evidence`: the target, the judged percentile, service p50/p95/p99, the
queue's percentiles or Little's mean wait, the basis, the window, requests, coverage), and
a `latency_unjudged` note saying why nothing was judged when nothing was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.latencytarget import NEAR, LatencyReading, LatencyTarget, read_latency
from uwsgitune.core.signals import requests_waiting
from uwsgitune.core.staffing import workers_holding
from uwsgitune.core.units import ms
from uwsgitune.tuner.decision import Evidence, Proposal, TunerState
from uwsgitune.tuner.measures import Measures
from uwsgitune.tuner.sizing import stride
from uwsgitune.tuner.tunersettings import TunerSettings

GROW_CODES = frozenset({"littles-law-up"})  # spare workers a met target does not need
# too many workers share the CPUs: each request's service time includes its wait for a CPU
CPU_SHARED = frozenset({"cpu-oversubscribed", "cpu-trim"})
# shrinks a count that missed the target by queue wait stops (`TunerState.latency_floor`)
FLOORED = frozenset({"littles-law-down", "load-fell"})
IDLE_BUSY = 0.5  # busy ratio under which, with no listen queue, a wait is not for a worker
DRAIN_MAX = 10.0  # seconds after a change its queue may take to drain before the count is timed
# seconds after the first drained poll before the count is timed: the requests waiting or in
# service at that poll are logged in the second after it, with the wait the change gave them
DRAIN_TAIL = 1.0
# a miss from queue wait by at most this share of the target, in the 10 s window alone, is
# judged over the minute (`_unconfirmed`): a 10 s window's p99 is its ~10th slowest request,
# and one count's 10 s p99 at a steady load spans about this much either side of its
# minute's (the latency bench's 4 workers at rho 0.9: 109 to 206 ms, the grid's 40 s 143)
EDGE = 0.25
# `Measures.dispersion` at or above which requests come at random (about 1; a closed
# loop's clients read about 0): a queue past twice the workers is then no backlog by itself
RANDOM = 0.5
MEASURING = "measuring latency at this count"  # a count just changed: its window not yet whole


@dataclass(frozen=True)
class Constrained:
    """The proposal after the target, and what the decision says about latency."""

    proposal: Proposal
    state: TunerState
    evidence: Evidence
    wait: str | None = None  # the decision waits (`latency-unknown`): why


def count_age(frames: Sequence[Frame], live: int, now: float, longest: float) -> float:
    """Seconds the live count has been `live`, unbroken by a change, a reload or a failed
    poll (read back from the newest frame, at most `longest`), and past the queue the change
    left: the first polls at the count, while more connections wait than there are workers
    (requests held through a reload, served late), belong to the change, not to the count,
    for at most DRAIN_MAX seconds. (The latency bench's pool, reloaded 5 -> 4 at rho 0.9, read
    13 waiting after the reload, judged 4 workers a miss by queue wait on those requests, and
    kept 5 for the rest of the run.) The count is timed from `DRAIN_TAIL` after the first
    poll with fewer waiting than workers, not from the start of that poll's interval: the
    requests still waiting at it, and those in service, are logged after it, each with the
    wait the change gave it. (Run 14: reloaded 6 -> 5, the 10 s window that held the
    second after the drained poll read p99 192 ms, the next one 129; the minute that held
    it read 192 too, a miss by queue wait that grew the pool to 7 and floored it at 6.)"""
    run: list[Frame] = []
    whole = False  # read back to `longest` without meeting the count's start
    for f in reversed(frames):
        if not f.ok or f.live != live or f.kind != "ok":
            break
        run.append(f)
        if now - (f.mono - (f.dt or 0.0)) >= longest:
            whole = True
            break
    if not run:
        return 0.0
    run.reverse()
    oldest = run[0].mono - (run[0].dt or 0.0)
    if not whole:
        drained = next((g for g in run if (requests_waiting(g) or 0) < live), None)
        start = oldest + DRAIN_MAX if drained is None else drained.mono + DRAIN_TAIL
        oldest = min(start, oldest + DRAIN_MAX)
    return max(0.0, now - oldest)


def reading_at_count(
    view: LatencyView | None,
    target: LatencyTarget,
    age: float,
    s: TunerSettings,
) -> tuple[LatencyReading | None, str | None, LatencyReading | None]:
    """The worse of the view's windows at this count that may be judged, else why none;
    and the long window's reading when it lies at this count (`_unconfirmed` reads it)."""
    if view is None:
        return None, "no request log (--latency)", None
    at_count = [w for w in (view.short, view.long) if w.seconds <= age]
    if not at_count:
        return None, f"{MEASURING} ({age:.0f}s of {view.short.seconds}s)", None
    readings = [
        read_latency(
            view,
            target,
            w,
            min_requests=s.latency_min_requests,
            min_coverage=s.latency_min_coverage,
        )
        for w in at_count
    ]
    longer = readings[-1] if at_count[-1] is view.long else None
    usable = [r for r in readings if r.problem is None and r.observed_ms is not None]
    if not usable:
        return readings[0], readings[0].problem or "no request in the window", longer
    return max(usable, key=lambda r: r.observed_ms or 0.0), None, longer


def _load(f: Measures) -> float | None:
    """The load a latency floor is learned at and kept for: the requests in service (Little's
    L over the recent polls, a request's rate times its time), whatever the count; None at a
    count too new to tell. Not the queue: that is the shortage's, and drains once the pool
    grows (the target bench's run 18: a floor learned at 4 workers on 3.8 in service and 6.3
    queued was forgotten at 5, 3.7 in service and none queued, and 5 -> 4 went again)."""
    return f.l_recent


def _floored(st: TunerState, f: Measures) -> TunerState:
    """`f.live` workers were too few for this load: shrinks stop above it."""
    floor = max(st.latency_floor or 0, f.live + 1)
    load = max(st.latency_floor_load or 0.0, _load(f) or 0.0)
    return replace(st, latency_floor=floor, latency_floor_at=f.now, latency_floor_load=load)


def _floor_kept(st: TunerState, f: Measures, s: TunerSettings) -> TunerState:
    """The latency floor, unless the load it was learned at fell by more than `model_band`
    (then fewer workers may meet the target again); kept while the load is unknown."""
    then, now = st.latency_floor_load, _load(f)
    if st.latency_floor is None or then is None or now is None or now >= (1 - s.model_band) * then:
        return st
    return replace(st, latency_floor=None, latency_floor_at=None, latency_floor_load=None)


def _idle(f: Measures) -> bool:
    """No sign of requests waiting for a worker: the listen queue empty at the recent polls
    and at least half the workers idle."""
    queued = (f.queue or 0.0) > 0 or (f.queue_now or 0.0) > 0
    return not queued and (f.busy_ratio or 0.0) < IDLE_BUSY


def _backlog(f: Measures) -> bool:
    """A backlog grown out of now, which the next window's percentiles will show (read
    before a window at a count just changed can be judged, and to let a miss from queue
    wait take the throughput tuner's whole step): a socket's
    backlog full (the kernel refusing connections), or a queue at every recent poll and, at
    the latest, more than twice the workers can hold (`Measures.far_too_small`). Not a level
    of a few per worker: at rho 0.9 on 4 workers a mean queue of 4-6 over three polls is the
    steady state of the queue the target was met with (the bench's pool was sent from 4 to
    11 and 15 workers on one, and cycled back), and a load past the pool that is not yet
    this far gone shows as a miss from queue wait within one window."""
    grown = f.far_too_small and f.queue_polls >= max(f.recent_polls, 2)
    return f.backlog_full or grown


def _outgrown(f: Measures, want: int) -> bool:
    """A backlog the stride to `want` workers would not take, so a miss from queue wait
    takes the throughput tuner's whole step: a socket's backlog full; or a backlog that
    grows (`_backlog`), unless the requests come at random (`Measures.dispersion` at least
    `RANDOM`) and the queue outruns the stride by less than its workers serve. Random
    arrivals at a high utilisation queue past twice the workers for seconds at a time (the
    target bench's run 15: 4 workers 93% busy at 100 requests/s, a queue of 12.7 over three
    polls, 4 -> 16 on it, then two minutes back down to 5): the next stride drains such a
    queue. There the whole step needs the queue to have grown, with the pool busy through,
    by more requests a second than the stride's workers serve (their share of the pool's
    throughput). A queue that stood still over the last poll (`Pile.still`: connections
    that came at once and wait, a closed loop's clients) or that cannot be read keeps the
    rule as it was."""
    if f.backlog_full:
        return True
    if not _backlog(f):
        return False
    pile, x = f.pile, f.x if f.x is not None else f.x_part  # a count just changed: x_part
    if f.dispersion is None or f.dispersion < RANDOM or pile is None or pile.still or not x:
        return True
    added = (want - f.live) * x / f.live
    return pile.busy_through and pile.excess > added


def _unconfirmed(
    view: LatencyView, age: float, r: LatencyReading, longer: LatencyReading | None
) -> str | None:
    """Why a miss from queue wait is not yet a verdict on this count, or None when it is: a
    short window over the target by at most `EDGE` of it, where the minute at this count
    does not miss too (met, or not yet at this count). A 10 s window at 100 requests/s holds
    ~1,000 requests, so its p99 is about the 10th slowest: at rho 0.9 it wanders by a
    quarter from one window to the next. (The latency bench's 4 workers met the target over
    a minute, the load generator's p99 2% under it, read one 10 s window at the target, grew,
    and the latency floor kept 5 for the rest of the run.) A clear miss, a full backlog,
    or the minute's own miss is judged at once."""
    observed, target = r.observed_ms, r.target
    if r.cause != "queue" or observed is None or observed > (1 + EDGE) * target.ms:
        return None
    minute = view.long.seconds
    if r.window >= minute:
        return None
    edge = f"{_qualify(r)}: within {EDGE:.0%} of it"
    if age < minute or longer is None:
        return f"{edge}, judged over {minute}s at this count ({age:.0f}s of {minute}s)"
    if longer.problem is None and longer.missed:
        return None
    if longer.problem is not None or longer.observed_ms is None:
        return f"{edge}, and over {minute}s it cannot be judged ({longer.problem})"
    q = target.quantile
    return f"{edge}, and met over the last {minute}s ({q} {ms(longer.observed_ms)})"


def _qualify(r: LatencyReading) -> str:
    return f"{r.summary()}, over the last {r.window}s"


Rule = Callable[[Proposal, Measures, TunerState, TunerSettings, LatencyReading], Proposal | None]


def _queue_miss(
    p: Proposal, f: Measures, st: TunerState, s: TunerSettings, r: LatencyReading
) -> Proposal | None:
    if r.cause != "queue":
        return None
    if _idle(f):
        why = (
            f"{_qualify(r)}: the wait ({ms(r.queue_ms)}) is not for a worker, with the listen "
            f"queue empty and workers {f.busy_ratio or 0:.0%} busy (the proxy's own queue, "
            "the network?): more workers cannot fix it"
        )
        return Proposal(f.live, "latency-wait-elsewhere", why) if p.desired <= f.live else p
    want = f.live + stride(f.live, s)
    if p.desired == want or (p.desired > want and _outgrown(f, want)):
        return p
    why = (
        f"{_qualify(r)}: service time {ms(r.service_ms)} is under it, the wait for a worker "
        f"({ms(r.queue_ms)}) is not: {want} workers"
    )
    if p.desired > want:
        # the throughput tuner's step is sized on a queue; without a backlog that grows, a
        # miss from queue wait is a few requests too many for the pool: one stride, then
        # the next window at that count judges again. Its flags stay (a GIL-bound step's
        # leave to pass hot CPUs, a probe's judging).
        why += f" ({p.code} wanted {p.desired}: no backlog growing)"
        return replace(p, desired=want, code="latency-queue", reason=why)
    return Proposal(want, "latency-queue", why)


def _service_miss(
    p: Proposal, f: Measures, st: TunerState, s: TunerSettings, r: LatencyReading
) -> Proposal | None:
    if r.cause != "service":
        return None
    if p.desired > f.live and p.code not in GROW_CODES:
        return p  # the throughput tuner's own reason (a queue building) stands
    if p.desired < f.live and p.code in CPU_SHARED:
        return p  # the service time includes the wait for a CPU: fewer workers shorten it
    why = (
        f"{_qualify(r)}: service time alone ({ms(r.service_ms)}) is over it, which more "
        "workers cannot fix (see the slow routes and workers)"
    )
    if p.desired < f.live:
        why += f"; not shrinking ({p.code} wanted {p.desired})"
    return Proposal(f.live, "latency-service", why)


def _near(
    p: Proposal, f: Measures, st: TunerState, s: TunerSettings, r: LatencyReading
) -> Proposal | None:
    if not r.near:
        return None
    if p.desired < f.live:
        why = (
            f"{_qualify(r)}, within {1 - NEAR:.0%} of it: not shrinking "
            f"({p.code} wanted {p.desired})"
        )
        return Proposal(f.live, "latency-near", why)
    if p.desired > f.live and not r.missed and (p.code in GROW_CODES or not f.backlog_full):
        return Proposal(f.live, "latency-met", f"{_qualify(r)}: met; {p.reason}, not needed")
    return p


def _room(
    p: Proposal, f: Measures, st: TunerState, s: TunerSettings, r: LatencyReading
) -> Proposal:
    if p.desired > f.live and (p.code in GROW_CODES or not f.backlog_full):
        # the target, met with room, decides: a queue that costs it nothing is no reason
        # for more workers (but a full backlog: refused connections are in no window)
        return Proposal(f.live, "latency-met", f"{_qualify(r)}: met; {p.reason}, not needed")
    floor = st.latency_floor
    if p.code in FLOORED and floor is not None and p.desired < min(floor, f.live):
        too_few = f"{floor - 1} workers were too few for this load (the target or a queue)"
        if floor >= f.live:
            return Proposal(f.live, "latency-floor", f"{p.reason}; but {too_few}: not shrinking")
        return replace(p, desired=floor, reason=f"{p.reason}; not {p.desired}: {too_few}")
    if p.code != "steady" or f.saturated:
        return p
    held = max(f.l_window or 0.0, f.l_recent or 0.0)
    floor = max(s.min_workers, workers_holding(held, f.latest.threads), st.latency_floor or 0)
    desired = max(floor, f.live - stride(f.live, s))
    if desired >= f.live:
        return p
    why = (
        f"{_qualify(r)}, under {NEAR:.0%} of it: try {desired} workers, the fewest that may "
        f"meet it (L {held:.1f} in service)"
    )
    return Proposal(desired, "latency-room", why)


# In order, after the safety moves and the readings that cannot be judged; `_room` last.
RULES: tuple[Rule, ...] = (_queue_miss, _service_miss, _near)


def constrain(
    p: Proposal,
    f: Measures,
    st: TunerState,
    s: TunerSettings,
    view: LatencyView | None,
    frames: Sequence[Frame],
) -> Constrained:
    """The throughput proposal `p` held to `s.latency_target` (see the module's docstring)."""
    target = s.latency_target
    assert target is not None, "constrain runs only with a target"
    age = count_age(frames, f.live, f.now, view.long.seconds if view is not None else 0.0)
    r, problem, longer = reading_at_count(view, target, age, s)
    ev: Evidence = dict(r.evidence()) if r is not None else {"latency_target": str(target)}
    if problem is not None:
        ev["latency_unjudged"] = problem
    st = _floor_kept(st, f, s)
    queued = p.code == "saturated" and p.desired > f.live  # a queue at this count, this load
    if p.urgent:
        return Constrained(p, st, ev)
    measuring = problem is not None and problem.startswith(MEASURING)
    want = f.live + stride(f.live, s)
    if measuring and p.desired > f.live and not _outgrown(f, want):
        # a count just changed (a probe down, a reload that held requests): its own window
        # decides, not a queue seen in the seconds after the move, unless the queue outgrows
        # a stride (`_outgrown`); a miss from queue wait grows it then. Run 17 of the target
        # bench: reloaded 5 -> 4 at 93% busy, the requests held through the reload read 33,
        # 28, 26 waiting as they drained (`_backlog`), and the throughput tuner's whole step
        # went through, 4 -> 16, two minutes back to 5.
        wait = f"wants {p.desired} ({p.code}) but the latency target decides at this count: "
        if _backlog(f):
            wait += (
                f"a queue of {f.queue or 0.0:.0f} not growing faster than {want} workers "
                "would serve it; "
            )
        return Constrained(p, st, ev, wait + (problem or ""))
    edge = None
    if r is not None and problem is None and view is not None:
        edge = _unconfirmed(view, age, r, longer)
    if edge is not None and not (p.desired > f.live and f.backlog_full):
        # a miss at the edge of the target in 10 s alone: no growth (nor floor) on it yet,
        # and no shrink either; the minute at this count decides
        return Constrained(Proposal(f.live, "latency-edge", edge), st, ev)
    if queued and (r is None or (problem is not None and not measuring) or r.missed):
        st = _floored(st, f)  # a queue that costs the target (or cannot be judged) floors
    if problem is not None or r is None:
        why = problem or "no reading"
        if p.desired < f.live:
            wait = f"wants {p.desired} ({p.code}) but the latency target cannot be checked: {why}"
            return Constrained(p, st, ev, wait)
        return Constrained(p, st, ev)
    if r.cause == "queue" and not _idle(f):  # too few workers for this load
        st = _floored(st, f)
    for rule in RULES:
        out = rule(p, f, st, s, r)
        if out is not None:
            return Constrained(out, st, ev)
    return Constrained(_room(p, f, st, s, r), st, ev)
