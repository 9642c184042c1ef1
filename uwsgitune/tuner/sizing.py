"""Sizing rules: the live count the tuner wants, and why. Pure; one small function per rule.

Theory of operation
-------------------
Not saturated (no queue, not every worker busy): Little's law. L, the mean number of
requests in service, needs L / target_utilisation workers. Scale-ups use the mean of the
last polls; scale-downs the *maximum* over `down_window`, and only to a count whose busy
ratio stays `down_margin` below the target, so a load on the boundary never oscillates.

Saturated (a queue, or every worker busy): the queue hides the demand, so the tuner
climbs. Each step is a *probe*: it records the throughput X and true mean response time W
before, and is judged after `measure_frames` settled polls at the new count. A gain beyond
the noise keeps the direction (judged only while still saturated: otherwise the load,
not the step, moved the throughput); a loss reverts the step and remembers the count as a plateau
(not probed again for `reprobe_after`, or until the saturation ends); a tie keeps the count
and stops the climb. A step that was not worse is not undone by the opposite rule
later (the plateaus), so the climb and the CPU rule never ping-pong. Noise is the larger
of `min_noise` and 3 standard errors of X.

CPU: with the instance's CPUs saturated, adding workers only shares the same CPUs, so no
rule may add; a pool that itself keeps the CPUs busy with more than `cpu_workers_per_cpu`
workers per CPU probes downwards instead (halving towards that count), saturated or not.

The first matching rule wins (`RULES`); bounds (floor, ceiling, memory) apply afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from uwsgitune.tuner.facts import Facts
from uwsgitune.tuner.settings import TunerSettings
from uwsgitune.tuner.state import TunerState


@dataclass(frozen=True)
class Proposal:
    desired: int
    code: str
    reason: str
    probe: bool = False  # a hill-climbing step, to be judged
    urgent: bool = False  # a safety move: not held back by the cool-down
    fast: bool = False  # a probe that need not wait for a full measurement first


def cpu_hot(f: Facts, s: TunerSettings) -> bool:
    return f.cpu_sat is not None and f.cpu_sat >= s.cpu_saturated


def cpu_room(f: Facts, s: TunerSettings) -> int | None:
    """Live workers the CPUs can keep busy, extrapolated from the CPU each request in service
    uses now (`cpu_workers_per_cpu` per CPU for a pool that only computes). None: unknown."""
    if not f.cpus or f.cpu_used is None or f.l_recent is None or f.l_recent < 0.5:
        return None
    per_request = f.cpu_used / f.l_recent  # cores one request in service keeps busy
    if per_request < 1e-3:
        return None
    threads = max(f.latest.threads, 1)
    return max(math.ceil(f.cpus / per_request * s.cpu_workers_per_cpu / threads), 1)


def judge(f: Facts, st: TunerState) -> tuple[TunerState, Proposal | None]:
    """The verdict on a finished probe: continue (None), or revert (a Proposal)."""
    p = st.probe
    if p is None or f.x is None:
        return st, None
    if p.to_live != f.live:
        return replace(st, probe=None), None  # the count moved otherwise: nothing to judge
    if not f.saturated:
        # Capacity now exceeds demand: the step absorbed the queue, or the load fell. A
        # throughput change then says nothing about the step; Little's law sizes from here.
        return replace(st, probe=None), None
    noise = max(p.noise, f.noise)
    dx = (f.x - p.x_before) / p.x_before if p.x_before > 0 else 0.0
    dw = (f.w - p.w_before) / p.w_before if f.w and p.w_before else 0.0
    better = dx > noise or (abs(dx) <= noise and dw < -noise)
    worse = dx < -noise or (abs(dx) <= noise and dw > noise)
    st = replace(st, probe=None)
    what = f"{p.from_live}->{p.to_live}: rps {p.x_before:.1f}->{f.x:.1f} ({dx:+.0%}"
    what += f", noise {noise:.0%})"
    if worse:
        if p.up:
            st = replace(st, plateau_up=p.from_live, learned_at=f.now)
        else:
            st = replace(st, plateau_down=p.from_live, learned_at=f.now)
        why = f"step {what} made it worse; back to {p.from_live}"
        return st, Proposal(p.from_live, "revert", why, urgent=True)
    # Not worse: do not undo the step later. A climb that was not worse puts the floor of
    # later down-probes above where it came from; a descent that was not worse caps later
    # climbs; a tie ends a climb.
    if p.up:
        st = replace(st, plateau_down=p.from_live + 1, learned_at=f.now)
        if not better:
            st = replace(st, plateau_up=p.to_live)
    else:
        st = replace(st, plateau_up=p.to_live, learned_at=f.now)
    return st, None


def below_floor(f: Facts, st: TunerState, s: TunerSettings) -> Proposal | None:
    if f.live >= s.min_workers:
        return None
    return Proposal(s.min_workers, "floor", f"{f.live} live < floor {s.min_workers}", urgent=True)


def above_ceiling(f: Facts, st: TunerState, s: TunerSettings) -> Proposal | None:
    if f.live <= s.max_workers:
        return None
    return Proposal(
        s.max_workers, "ceiling", f"{f.live} live > ceiling {s.max_workers}", urgent=True
    )


def memory_over(f: Facts, st: TunerState, s: TunerSettings) -> Proposal | None:
    if f.mem_cap is None or f.live <= max(f.mem_cap, s.min_workers):
        return None
    cap = max(f.mem_cap, s.min_workers)
    return Proposal(
        cap, "memory-cap", f"memory allows {f.mem_cap} workers, {f.live} live", urgent=True
    )


def cpu_oversubscribed(f: Facts, st: TunerState, s: TunerSettings) -> Proposal | None:
    # The instance itself must be using the CPUs: a host kept busy by others does not make
    # an IO-bound pool oversubscribed. Saturated or not: under CPU contention Little's L
    # counts requests waiting for a CPU, so L would ask for ever more workers.
    if not (cpu_hot(f, s) and f.cpus and (f.cpu_used or 0) >= 0.5 * f.cpus):
        return None
    target = max(math.ceil(f.cpus * s.cpu_workers_per_cpu), s.min_workers, st.plateau_down or 0)
    if f.live <= target:
        return None
    desired = max(target, f.live - f.live // 2)
    why = (
        f"CPU {f.cpu_sat:.0%} used by {f.live} workers on {f.cpus:g} CPUs: "
        f"more workers only share them; try {desired}"
    )
    return Proposal(desired, "cpu-oversubscribed", why, probe=True)


def saturated_up(f: Facts, st: TunerState, s: TunerSettings) -> Proposal | None:
    if not f.saturated:
        return None
    if cpu_hot(f, s):
        return Proposal(
            f.live, "cpu-saturated", f"saturated, CPU {f.cpu_sat:.0%} used: adding cannot help"
        )
    if st.plateau_up is not None and f.live >= st.plateau_up:
        return Proposal(
            f.live, "plateau", f"saturated, but adding above {st.plateau_up} did not help"
        )
    threads = max(f.latest.threads, 1)
    queue = f.queue or 0.0
    demand = (f.l_recent or f.live * threads) + queue
    want = math.ceil(demand / (s.target_utilisation * threads))
    # Each queued connection is a request no worker holds: a step may always take them all,
    # so a pool far too small reaches its size in one step.
    cap = max(f.live + 1, math.floor(f.live * s.max_up_factor), f.live + math.ceil(queue / threads))
    desired = max(f.live + 1, min(want, cap))
    if st.plateau_up is not None:
        desired = min(desired, st.plateau_up)
    q = "?" if f.queue is None else f"{f.queue:.1f}"
    why = f"saturated (queue {q}, busy {f.busy_ratio or 0:.0%}), demand ~{demand:.1f}: step up"
    # At least as many waiting as in service: capacity is plainly short, so step now and
    # judge the step against the polls there are, rather than measure the backlog longer.
    fast = queue >= f.live * threads
    return Proposal(desired, "saturated", why, probe=True, fast=fast)


def littles_law(f: Facts, st: TunerState, s: TunerSettings) -> Proposal | None:
    threads = max(f.latest.threads, 1)
    l_now = f.l_recent or 0.0
    need = max(math.ceil(l_now / (s.target_utilisation * threads)), s.min_workers)
    if need > f.live:
        why = f"L={l_now:.2f} in service needs {need} workers at {s.target_utilisation:.0%} busy"
        return Proposal(need, "littles-law-up", why)
    if f.window_covered and f.l_window is not None:
        util = max(s.target_utilisation - s.down_margin, 0.05)
        down = max(math.ceil(f.l_window / (util * threads)), s.min_workers)
        if down < f.live:
            desired = max(down, f.live - max(1, math.ceil(f.live * s.max_down_share)))
            why = f"peak L={f.l_window:.2f} over {s.down_window:g}s fits {down} workers: step down"
            return Proposal(desired, "littles-law-down", why)
    return Proposal(f.live, "steady", f"L={l_now:.2f}: {f.live} workers keep busy near target")


Rule = Callable[[Facts, TunerState, TunerSettings], Proposal | None]

# In order: safety bounds first, then the saturated regime, then Little's law.
RULES: tuple[tuple[str, Rule], ...] = (
    ("floor", below_floor),
    ("ceiling", above_ceiling),
    ("memory-cap", memory_over),
    ("cpu-oversubscribed", cpu_oversubscribed),
    ("saturated", saturated_up),
    ("littles-law", littles_law),
)


def propose(f: Facts, st: TunerState, s: TunerSettings) -> tuple[TunerState, Proposal]:
    if not f.saturated and (st.plateau_up or st.plateau_down):
        st = replace(st, plateau_up=None, plateau_down=None)  # demand fell below capacity
    st, revert = judge(f, st)
    if revert is not None:
        return st, revert
    for _name, rule in RULES:
        prop = rule(f, st, s)
        if prop is not None:
            return st, prop
    raise AssertionError("littles_law always proposes")  # pragma: no cover
