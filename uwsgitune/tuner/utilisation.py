"""The pool's demand against its capacity at the tuner's ceiling: the one signal a pod
autoscaler (the HPA, KEDA) scales replicas on, so that it and the tuner never act on the
same error. Pure.

Theory of operation
-------------------
Inside a pod the tuner moves the live workers towards what the load needs, never past its
ceiling: `max_workers`, the workers memory allows, and the CPUs the pod can get (its cgroup
quota): it never adds while those are saturated (`cpu_saturated`). Across pods, the replica
count should move only for what the tuner cannot do: serve more than its ceiling serves, or
serve so little that fewer pods would do. So the signal is

    utilisation = demand / capacity

- *demand*: the requests in the instance. In service at uncontended speed: the throughput
  times the request's own time, CPU plus IO (the staffing model's split, core/staffing.py),
  not Little's L as measured: on saturated CPUs L counts the wait for a CPU too, and would
  grow with the workers the tuner added. Without a model (too few requests, no CPU
  figures) it is Little's L. Plus the queue, but only at the ceiling (below it a queue is
  the tuner's to serve: it adds workers, and the replica count must not move for it), and
  no more than the capacity (a backlog fills at any excess: it says the pod is short by at
  least that much, not by how much more, so the autoscaler at most about doubles the pods
  in a step and reads the rest once they serve).
- *capacity*: the requests the ceiling serves without queueing, the smaller of
  - the workers' bound: the L that square-root staffing sizes to the ceiling
    (L + beta√L = ceiling x threads, the inverse of `workers_for`), and
  - the CPUs' bound: the requests in service that keep `cpu_saturated` of the CPUs busy
    (the model's concurrency x `cpu_saturated`).

The tuner's actuator, the live count, appears in neither (read at one count, the poll
that straddles a change gives no signal): whatever the tuner does, the signal does not
move, so the autoscaler never undoes the tuner nor chases it. The autoscaler's actuator,
the replica count, moves the demand per pod; the tuner follows it. utilisation >= 1 is the
tuner at its ceiling (it wants the ceiling or more, or the CPUs are saturated); below 1 it
has room, and moves workers. Demand and capacity are both counted in requests, so the
signal is proportional to the load per pod, which is what the HPA's rule (desired =
ceil(replicas x value / target)) assumes: one step lands on the right count. A tuner that
does not act (observe, recommend, applying stopped) adds no worker: its ceiling is the
instance's own `processes` as well (`ceiling`).
docs/kubernetes.md has the division of labour and the target that goes with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Literal

from uwsgitune.core.frame import Frame
from uwsgitune.core.signals import cpu_saturation, requests_waiting
from uwsgitune.core.staffing import estimate
from uwsgitune.tuner.measures import memory_cap, rated
from uwsgitune.tuner.tunersettings import TunerSettings

Bound = Literal["workers", "cpu"]


@dataclass(frozen=True)
class Utilisation:
    """The signal and its parts, in requests (a threaded worker holds `threads`)."""

    ratio: float  # demand / capacity: 1 is the tuner at its ceiling
    demand: float  # requests in service at uncontended speed (the queue aside)
    capacity: float  # requests the ceiling serves without queueing
    ceiling: int  # the most live workers the tuner may run here
    bound: Bound  # which bound sets the capacity


def served_by(workers: int, threads: int, beta: float) -> float:
    """Requests in service that `workers` processes of `threads` threads serve without
    queueing: the L with L + beta√L = workers x threads (`core.staffing.workers_for`'s
    inverse)."""
    slots = max(workers, 0) * max(threads, 1)
    root = (-beta + math.sqrt(beta * beta + 4 * slots)) / 2
    return root * root


def ceiling(frame: Frame, settings: TunerSettings, acting: bool = True) -> int:
    """The most live workers the pool may run: `max_workers`, or fewer if memory allows
    fewer; never below the floor. A tuner that does not act (observe, recommend, or its
    applying stopped) adds none: then the instance's own slots (`processes`) bound it too."""
    top = settings.max_workers if acting else min(settings.max_workers, frame.workers_max)
    mem = memory_cap(frame, settings)
    if mem is not None:
        top = min(top, mem)
    return max(top, settings.min_workers)


def _sample(frames: Sequence[Frame], polls: int) -> list[Frame]:
    """The newest `polls` rated frames at the latest live count, oldest first: the
    staffing model is read at one count, as the tuner reads it (a poll across a change
    mixes two pools: the queue the old one left, drained by the new one)."""
    live = frames[-1].live
    out: list[Frame] = []
    for f in reversed(frames):
        if not rated(f):
            continue
        if f.live != live:
            out.pop()  # the first poll at this count: its rates straddle the change
            break
        out.append(f)
        if len(out) > polls:
            out.pop()
            break
    out.reverse()
    return out


def capacity_utilisation(
    frames: Sequence[Frame], settings: TunerSettings, now: float | None = None, acting: bool = True
) -> Utilisation | None:
    """The signal over the last `measure_frames` polls; None when the latest poll has no
    rates or is stale at `now` (an autoscaler must not act on it). `acting`: the tuner
    applies its decisions (`ceiling`)."""
    if not frames:
        return None
    latest = frames[-1]
    now = latest.mono if now is None else now
    if not rated(latest) or now - latest.mono > settings.stale_after:
        return None
    sample = _sample(frames, settings.measure_frames)
    if not sample:
        return None  # the first poll at a new count
    threads = max(latest.threads, 1)
    model = estimate(sample, settings.cpu_workers_per_cpu, settings.cpu_saturated)
    if model is not None:
        in_service = fmean(f.rps or 0.0 for f in sample) * (model.cpu_ms + model.io_ms) / 1000
    else:
        in_service = fmean(f.littles_l or 0.0 for f in sample)
    top = ceiling(latest, settings, acting)
    capacity = served_by(top, threads, settings.staffing_beta)
    bound: Bound = "workers"
    if model is not None and model.workers is not None:
        cpu = model.concurrency * settings.cpu_saturated
        if cpu < capacity:
            capacity, bound = cpu, "cpu"
    return Utilisation(
        (in_service + _short(sample, latest, top, capacity, settings)) / capacity,
        in_service,
        capacity,
        top,
        bound,
    )


def _short(
    sample: Sequence[Frame], latest: Frame, top: int, capacity: float, s: TunerSettings
) -> float:
    """The queue's part of the demand. Below the ceiling a queue is the tuner's to serve
    (it adds workers), not the autoscaler's: nothing. At the ceiling (every worker it may
    run is live, or the CPUs are saturated), the mean queue, but no more than the
    capacity: a backlog fills at any excess, so its length says the load is short by at
    least that much, not by how much more. The autoscaler then at most doubles the pods in
    a step, and reads the rest once they serve."""
    sats = [x for x in map(cpu_saturation, sample) if x is not None]
    hot = bool(sats) and fmean(sats) >= s.cpu_saturated
    if latest.live < top and not hot:
        return 0.0
    queued = fmean(float(requests_waiting(f) or 0) for f in sample)
    return min(queued, capacity)
