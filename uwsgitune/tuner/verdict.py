"""The verdict on a probe: a hill-climbing step judged on the throughput it brought. Pure.

A probe is judged only while the pool is saturated, where the time clients wait follows
throughput (N / X in a closed loop; in an open one the backlog grows at the arrival rate
less X). Response time is not judged: a step up that takes queued requests into service
lengthens W (2 -> 4 threaded processes: +1% throughput, W 14.9 -> 29.8 ms, was reverted on
it), a step down shortens it, and the wait before accept() that replaces it is not all seen.
A loss reverts the step and learns a plateau; a step that was not worse is never undone.
"""

from __future__ import annotations

from dataclasses import replace

from uwsgitune.tuner.facts import Facts
from uwsgitune.tuner.proposal import Proposal
from uwsgitune.tuner.state import Probe, TunerState

HOST_MOVED = 0.2  # CPUs available to the instance changing by more: a probe proves nothing


def _host_moved(p: Probe, f: Facts) -> bool:
    """The CPUs the instance can get changed during the probe by more than its noise."""
    after = f.model.cpus if f.model is not None else None
    if p.cpus_before is None or after is None or p.cpus_before <= 0:
        return False
    return abs(after - p.cpus_before) / p.cpus_before > max(p.noise, f.noise, HOST_MOVED)


def judge(f: Facts, st: TunerState) -> tuple[TunerState, Proposal | None]:
    """The verdict on a finished probe: continue (None), or revert (a Proposal)."""
    p = st.probe
    if p is None or f.x is None:
        return st, None
    if p.to_live != f.live or not f.saturated or _host_moved(p, f):
        # The count moved otherwise; or capacity now exceeds demand (the step absorbed the
        # queue, or the load fell); or other work took (or gave back) CPU meanwhile. A
        # throughput change then says nothing about the step: nothing to judge.
        return replace(st, probe=None), None
    noise = max(p.noise, f.noise)
    dx = (f.x - p.x_before) / p.x_before if p.x_before > 0 else 0.0
    better = dx > noise  # throughput alone (the module's docstring says why)
    worse = dx < -noise
    st = replace(st, probe=None)
    what = f"{p.from_live}->{p.to_live}: rps {p.x_before:.1f}->{f.x:.1f} ({dx:+.0%}"
    what += f", noise {noise:.0%})"
    if worse:
        if p.up:
            st = replace(st, plateau_up=p.from_live, learned_at=f.now, learned_request=None)
        else:
            st = replace(st, plateau_down=p.from_live, learned_at=f.now, learned_request=None)
        why = f"step {what} made it worse; back to {p.from_live}"
        return st, Proposal(p.from_live, "revert", why, urgent=True, past_hot_cpu=True)
    # Not worse: do not undo the step later. A climb that was not worse puts the floor of
    # later down-probes above where it came from; a descent that was not worse caps later
    # climbs; a tie ends a climb.
    if p.up:
        st = replace(st, plateau_down=p.from_live + 1, learned_at=f.now, learned_request=None)
        if not better:
            st = replace(st, plateau_up=p.to_live)
    else:
        st = replace(st, plateau_up=p.to_live, learned_at=f.now, learned_request=None)
    return st, None
