"""The verdict on a probe: a hill-climbing step judged on the throughput it brought. Pure.

A probe is judged only while the pool is saturated, where the time clients wait follows
throughput (N / X in a closed loop; in an open one the backlog grows at the arrival rate
less X). Response time is not judged: a step up that takes queued requests into service
lengthens W (2 -> 4 threaded processes: +1% throughput, W 14.9 -> 29.8 ms, was reverted on
it), a step down shortens it, and the wait before accept() that replaces it is not all seen.
A loss reverts the step and learns a plateau; a step that was not worse is never undone.

A pool whose CPUs are saturated before and after the step serves what the CPUs it gets
allow, and other work on the host takes or gives back CPUs on its own schedule: such a step
is judged on its throughput per CPU the instance could get. Measured (the benchmark's `cpu`
while other work ran): 14 -> 4 workers read 496 -> 453 req/s (-9%) on 1.59 -> 1.38 CPUs,
reverted to 14 for the rest of the run; per CPU that is +5%. A move of the CPUs by more than
`HOST_MOVED` proves nothing either way. A step is worse (or better) only if it is so both
per CPU and as served: how many CPUs the instance could get is itself an estimate, which
moves with the other work's. Measured (a test beside a test suite): 24 -> 5 workers read
355 -> 366 req/s (+3%) on 1.75 -> 1.91 CPUs, -6% per CPU, and went back to 24.

A step up that ends the saturation took the queue into service. Clients that wait for a
worker raise throughput once served; a queue of a request or two that served no
more was requests arriving as their workers finished (16 clients on 16 workers read a mean
queue of 0.7-1.3, and the step to 18-19 served 482 -> 490 req/s): the step goes back, and
such a queue at that count is no shortage while the throughput holds (`QueueServed`). In an
open loop that queue costs its requests at most a request or two of waiting.
"""

from __future__ import annotations

from dataclasses import replace

from uwsgitune.tuner.decision import Probe, Proposal, QueueServed, TunerState
from uwsgitune.tuner.demand import SMALL_QUEUE
from uwsgitune.tuner.measures import Measures
from uwsgitune.tuner.sizing import cpu_hot
from uwsgitune.tuner.tunersettings import TunerSettings

HOST_MOVED = 0.2  # CPUs available to the instance changing by more: a probe proves nothing


def _host_moved(p: Probe, f: Measures) -> bool:
    """The CPUs the instance can get changed during the probe by more than its noise."""
    after = f.model.cpus if f.model is not None else None
    if p.cpus_before is None or after is None or p.cpus_before <= 0:
        return False
    return abs(after - p.cpus_before) / p.cpus_before > max(p.noise, f.noise, HOST_MOVED)


def _measured(p: Probe, f: Measures, x: float, s: TunerSettings) -> tuple[tuple[float, ...], str]:
    """The throughput's relative changes over the step, and how they read: as served and,
    when its CPUs were saturated both times, per CPU the instance could get (the last one
    is the one said)."""
    served = (x - p.x_before) / p.x_before if p.x_before > 0 else 0.0
    after = f.model.cpus if f.model is not None else None
    if p.cpu_bound and cpu_hot(f, s) and p.cpus_before and after and p.x_before > 0:
        how = f"rps {p.x_before:.1f}->{x:.1f} on {p.cpus_before:.2f}->{after:.2f} CPUs, "
        per_cpu = (x / after) / (p.x_before / p.cpus_before) - 1
        return (served, per_cpu), how + "per CPU "
    return (served,), f"rps {p.x_before:.1f}->{x:.1f} "


def judge(f: Measures, st: TunerState, s: TunerSettings) -> tuple[TunerState, Proposal | None]:
    """The verdict on a finished probe: continue (None), or revert (a Proposal)."""
    p = st.probe
    if p is None or f.x is None:
        return st, None
    if p.to_live != f.live or _host_moved(p, f):
        # The count moved otherwise, or other work took (or gave back) CPU meanwhile. A
        # throughput change then says nothing about the step: nothing to judge.
        return replace(st, probe=None), None
    noise = max(p.noise, f.noise)
    changes, how = _measured(p, f, f.x, s)
    dx = changes[-1]
    # Throughput alone (the module's docstring says why); as served and per CPU, each.
    better = all(c > noise for c in changes)
    worse = all(c < -noise for c in changes)
    st = replace(st, probe=None)
    what = f"{p.from_live}->{p.to_live}: {how}({dx:+.0%}, noise {noise:.0%})"
    if not f.saturated:
        return _unsaturated(p, f, st, better, what)
    if worse:
        if p.up:
            st = replace(st, plateau_up=p.from_live, learned_at=f.now, learned_request=None)
        else:
            st = replace(st, plateau_down=p.from_live, learned_at=f.now, learned_request=None)
        why = f"step {what} made it worse; back to {p.from_live}"
        return st, Proposal(
            p.from_live, "revert", why, urgent=True, past_hot_cpu=True, verdict=True
        )
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


def _unsaturated(
    p: Probe, f: Measures, st: TunerState, better: bool, what: str
) -> tuple[TunerState, Proposal | None]:
    """The pool is no longer saturated: the step took the queue into service, or the load
    fell. Only a step up from a small queue that served no more is judged (the module's
    docstring says why): back, and that queue is no shortage there for this load. One
    thread per worker only: a threaded worker reads busy with one request of several, and
    uWSGI's `-` waits for a whole idle worker (16 -> 20 -> 16 processes of 4 threads went
    back only to 18, and Little's law took them to 20 again)."""
    small = p.queue_before is not None and p.queue_before <= SMALL_QUEUE
    if not p.up or not small or better or f.latest.threads > 1 or f.x is None:
        return st, None
    # The load's throughput: the more of the two counts' (each is a noisy mean).
    served = QueueServed(p.from_live, max(p.x_before, f.x))
    st = replace(st, queue_served=served, learned_at=f.now, learned_request=None)
    why = (
        f"step {what} took a queue of {p.queue_before:.1f} into service and served no more: "
        f"requests arriving as their workers finish; back to {p.from_live}"
    )
    return st, Proposal(p.from_live, "queue-served", why, quick=True, verdict=True)
