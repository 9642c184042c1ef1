"""The worker tuner and the pod autoscaler together: a simulated fleet through load traces.

Each pod is a fluid queueing model of one uWSGI whose stats, polled every DT seconds, go
through the real `Tracker` (tests/support/instances.py) to the tuner's own `decide` and to
`capacity_utilisation` (tuner/utilisation.py): the tuner is not re-implemented here. The
replica count follows the HorizontalPodAutoscaler's documented algorithm (`Hpa`), fed with
the pods' `uwsgitune_capacity_utilisation` as the recording rule averages it (Pods metric
through prometheus-adapter, target averageValue TARGET). The baseline is an HPA on CPU
alone (Resource cpu, averageUtilization of the pod's request) over pods of fixed workers.

    .venv/bin/python bench/fleet_sim.py [--traces daily,step,spike] [--apps io,mixed,cpu]

Writes bench/results/fleet.md, fleet.json and fleet.svg. DEFINITIONS below were written
before the first run and are copied into the results as they are.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.instances import Instance, Load  # noqa: E402
from uwsgitune.core.frame import Frame, SocketView  # noqa: E402
from uwsgitune.tuner import TunerSettings, TunerState, decide  # noqa: E402
from uwsgitune.tuner.utilisation import capacity_utilisation  # noqa: E402

RESULTS = ROOT / "bench" / "results"

DEFINITIONS = """\
## Definitions (written before the run)

- **Pod.** A CPU limit (= request) of POD_CPU cores, its cgroup quota; a listen backlog of
  BACKLOG; traffic split evenly over the ready pods, each pod's share ±2% per poll. A new
  pod is ready STARTUP s after it is created and serves nothing before. A request takes
  its app's CPU and IO time; past the pod's CPUs each worker costs 1% more CPU per request
  (context switches). Fluid: what the workers or the CPUs cannot serve waits in the
  backlog; past the backlog it is dropped, and the kernel counts it (TcpExtListenOverflows
  of the pod's network namespace: the tuned pods' stats carry it, as the daemon reads it;
  from the fourth run on). The stats' requests at a poll are drawn from a Poisson law
  around L (random arrivals); those past the live workers show as queued, beside what the
  fluid backlog holds, up to BACKLOG (from the seventh run on: the draw was made and that
  part of it dropped before, so no pod's stats showed a queue between full backlogs).
- **Tuned fleet.** uWSGI with `processes = 32`, starting at 4 live workers; the tuner
  (`decide`, apply mode, its settings at their defaults but `interval = DT`) polls every
  DT s; a change takes effect at the next poll. The HPA reads each pod's
  `uwsgitune_capacity_utilisation` averaged over RULE_WINDOW s (the recording rule),
  target averageValue TARGET (docs/kubernetes.md).
- **Baseline.** The same pods with a fixed 8 workers (examples/k8s-sidecar.yaml), no tuner;
  an HPA on CPU: averageUtilization of the request, the CPU averaged over RULE_WINDOW s,
  at each target of CPU_TARGETS.
- **HPA.** Kubernetes' documented algorithm, both fleets alike: every SYNC s, desired =
  ceil(ready pods with a metric x mean / target), nothing within the tolerance 0.1;
  missing metrics counted at the target for a scale-down and at 0 for a scale-up; for CPU,
  unready pods set aside and counted at 0 for a scale-up; scale-down stabilisation 300 s
  (the highest recommendation over the window); scale-up policies 100% or 4 pods per 15 s,
  the larger; scale-down 100% per 15 s; 1 to 100 replicas.
- **Traces.** `daily`: 24 h, a cosine from 15% of the peak at midnight to the peak at noon.
  `step`: 30 min at the base, then 3 x the base for 60 min. `spike`: 30 min at the base,
  4 x the base for 2 min, then the base for 58 min.
- **A load change.** For the replica count: each event of the trace (its start; the step;
  the spike's start and end; the daily curve's turning points, midnight and noon). For a
  pod's tuner: those events, and each change of the replica count (its share of the
  traffic moves).
- **Direction changes.** A controller's changes, each up or down; a direction change is a
  change opposite to the one before it. *Settles* holds when each controller makes at
  most one direction change between two consecutive load changes.
- **Steady within three stabilisation windows.** After each event of the step and spike
  traces, the replica count's last change before the next event (or the end) comes within
  3 x 300 s of the event. Not defined for the daily curve, whose load never stops moving.
- **Pod-CPU-seconds.** The sum over time of the pods that exist (ready or starting) times
  POD_CPU: what the fleet holds from the cluster. **Throughput**: requests served over
  requests offered. *Fewer at the same throughput* holds when the tuned fleet's
  pod-CPU-seconds are below those of the cheapest CPU target whose throughput is at least
  the tuned fleet's less 0.1 percentage point; a trace where no CPU target reaches that
  throughput is reported as such.
"""

READING = """\
### Reading (written after the first run)

- **The HPA on the signal** turned at most once per load change in every run, and the
  replica count settled within 465 s of each event (three windows are 900 s). On the step
  and the spike it overshoots, to about twice the pods the load needs, then comes down once
  after the 300 s window: the saturated pods read about 2 (the queue, counted up to one
  capacity), new pods take 30 s to serve and the one-minute mean to fall, and the HPA syncs
  every 15 s meanwhile (the chart).
- **The tuner** turned more than once between two load changes in 2 or 3 pods of 8 to 16
  in five runs: step-ups coded `saturated` on a queue seen at a poll or two (the model
  draws the requests at a poll from a Poisson law around L, as random arrivals give),
  undone by `load-fell` or `littles-law-down` 20 to 30 s later. That is the tuner's own
  reaction to a brief queue at a steady load, not a fight with the HPA: the signal does not
  move with it, and the HPA turned at most once in those runs too. A miss as defined; the tuner's
  `saturated` rule on a one-poll queue is where to look.
- **Pod-CPU-seconds.** The IO-bound app: half the CPU HPA's (52-56%). With 8 fixed workers
  a pod saturates its workers at 40% CPU, so the CPU HPA needs a 30% target to serve the
  load; the tuned pods run up to 32 workers, bounded by their CPUs. The CPU-bound and mixed
  apps: the signal's CPU bound is 0.85 x 0.9 = 76.5% of the pod's CPU. A CPU HPA at 70%
  costs more (11-13% on the step and the spike of the CPU app), but on the daily curve
  one at 80-90% serves the same requests with 12-14% fewer pod-CPU-seconds, and on the
  mixed step one at 70% with 3% fewer. The model is fluid: below its capacity a pod serves
  with no queueing delay, so a CPU target of 90% loses no request here, where a real pod
  at 90% CPU queues (latency is not modelled). Those three are misses in the model's terms.
- On the IO-bound spike no CPU target served as much as the tuned fleet: 30% served 95.7%
  against 96.3%, for 68% more pod-CPU-seconds.

### Reading of the second run (commit 0d898f9; the definitions unchanged)

- **What changed in the tuner.** A `saturated` step needs its queue at 2 of the last 3
  polls, a backlog full, or more than twice the workers waiting (`queue-brief` otherwise);
  and `load-fell` keeps one worker past the requests in service, not only past the level's
  few polls' count at once. The first run's reading blamed the one-poll queue; tracing the
  step/mixed pods showed otherwise: `load-fell` had taken a pod to 3 workers for 3.0 in
  service (its four level polls read at most 2 at once: the model draws them around L), so
  the pod ran at rho 0.99 and queued at poll after poll, a real shortage the step up was
  right to meet. Alone (measured before the commit, uncommitted variants), the persistence
  rule left step/mixed at 4 turns and spike/io at 2; the spare past L alone brought the
  three runs tried (step/io, step/mixed, spike/io) to at most one turn. Both are kept: a
  one-poll queue at a steady load is still no reason to step up (the latency bench's pool
  went 4 -> 13 on one: bench/results/tuner_target.md).
- **Turns.** Met now in all six step and spike runs (missed before in step/mixed and
  spike/io). Still **missed** on the daily curve: daily/io 5 (2 of 9 pods), daily/mixed 5
  (2 of 8), daily/cpu 3 (1 of 8). There the load itself climbs or falls for hours between two
  replica changes, and the turns are a `saturated` step sized on a queue the fluid backlog
  piled up over a poll or two (a pod at 14 workers went to 32), undone by `load-fell` or
  Little's law 25-105 s later: the step's size, not its trigger. Not fixed here.
- **Pod-CPU-seconds**: the same verdicts as the first run (the tuned fleets' totals moved
  by under 0.1%): still **missed** in step/mixed (-3%), daily/mixed (-14%), daily/cpu (-12%),
  for the reasons given above.

### Reading of the third run (commit cdbf388; the definitions unchanged)

The run: 14 min wall, `nice -n 19`, beside bench/sim_boxes.py; load average 2.0 before,
16.1 after (other sessions' work joined at the end). Simulated time: the machine's load
moves nothing in it.

- **What changed in the tuner** (e0cd259, cdbf388). The `saturated` step is sized on what
  the queue says of the arrival rate: a queue that grew since the last poll at its least,
  every worker busy from that poll on, is arrivals past the throughput over that time (40
  piled up in a 5 s poll on 14 workers serving 280 req/s is 3% more), and the step goes no
  further than the way down keeps for that load (one worker past those that hold it, and a
  tenth). A full backlog, a queue that waited at every poll at the count or stood still over
  the last poll (clients that came at once), or one that came onto a pool with workers to
  spare is sized as before (tuner/sizing.py `_arriving`, tuner/measures.py `pile`).
- **Turns: still missed on the daily curve**, fewer: daily/io 4 (was 5; 3 pods of 9, was
  2), daily/mixed 4 (was 5; 2 pods of 8), daily/cpu 3 (unchanged); met in all six step and
  spike runs, as before. A first version (e0cd259, without the still-queue rule) read
  daily/io 4, daily/mixed 2, daily/cpu 3 here, but stepped a closed loop that doubled on a
  busy pool in two moves, 5 s apart: bench/sim_boxes.py's `step` then missed its throughput
  target at every box size (91.9-92.4% of the best, 96.6-96.8% before); with the rule every
  sim_boxes row is as before, and daily/mixed has one more pod over one (below). Traced pod
  by pod (the tuned fleets of daily/io at e0cd259 and daily/mixed at cdbf388 again):
  - daily/io pods 1 and 3: a pod starts at 4 workers (cheaper-initial) and its first poll
    fills the backlog (100 queued, connections refused). A full backlog hides the rate, so
    the step takes the whole queue (4 -> 32), Little's law takes it down (32 -> 17 -> 13)
    within 5 minutes, and the load, climbing for hours, takes it up again 2 h later, before
    the next replica change: up, down, up. The fluid pod reports no listen overflows (the
    kernel's count of what it refused), which would give the rate there.
  - daily/io pod 2, daily/mixed pods 1 and 2, daily/cpu pod 2: a step up from a queue of a
    request or two (14 -> 16, 4 -> 6, 5 -> 9, 2 -> 3) that served no more, reverted within
    20 s by the `queue-served` verdict (tuner/verdict.py: in a closed loop as large as the
    pool such a queue is requests arriving as their workers finish), then taken again
    40-105 s later when the climbing load read as a new one. In an open loop at a load that
    climbs, a step never serves more at first; the verdict cannot tell that from the closed
    loop it was made for. Not changed here.
  - daily/mixed pod 2 also: 4 -> 8 on a queue that stood still over two polls, taken down by
    `load-fell` (8 -> 5) 20 s later: the still-queue rule reading an open loop's backlog,
    which neither grew nor drained over a poll, as clients. From the queue alone the two
    cannot be told apart; the rule keeps the closed loop's one-step response.
- **Pod-CPU-seconds**: daily totals within 0.2% of the second run's; the verdicts as before
  but spike/mixed, now **missed** (-10%): its tuned throughput moved from 0.97054 to 0.97046
  (its pod-CPU-seconds unchanged, 40350), which lets cpu-0.7 (0.96948, 36840 pod-CPU-s)
  count as reaching it by 0.00002 under the definition's 0.1-point allowance. The verdict
  sits on that edge; the fleet's cost did not move.

### Reading of the fourth run (commit 438223e; the Pod definition changed)

The run: 10 min wall, `nice -n 19`, beside bench/sim_boxes.py; load average 2.4 before,
0.8 after. **The definition changed**: a pod's stats now carry what its full backlog drops
(TcpExtListenOverflows, as the daemon reads it in the pod's network namespace). Every
trace x app ran again under it. The tuner before this run (cdbf388, and land41's, which
gives the third run's numbers exactly) never reads that counter, nor does
`capacity_utilisation`, and the counter draws nothing from the pods' random numbers: the
third run's table is what the old tuner gives under the new definition too. The CPU HPA
fleets' rows are identical to the third run's.

- **What changed in the tuner** (b4ec608, 438223e). (1) `queue-small`: saturated with a
  queue of at most 2 (the latest poll and the recent means) that was 0 at some poll at the
  count, the tuner holds: the step waits for the queue to pass 2 (an open loop's load
  climbing past the pool grows it there within a poll or a few) or to wait at every poll
  (a closed loop's client). The `queue-served` verdict's revert, made for closed loops,
  came after such steps: daily/io pod 2 14 -> 16 -> 14 -> 18, daily/mixed pod 1
  4 -> 6 -> 4 -> 6, daily/cpu pod 2 2 -> 3 -> 2 -> 4 (third run; the same at land41, traced
  here again). Now daily/mixed pod 1 steps 4 -> 6 once there,
  and daily/cpu pod 2 turns once.
  (2) `_refused`: with the backlog full at the latest poll and connections refused over it,
  the step is sized on the rate that gives (throughput + refused / s), not on the whole
  queue: daily/io pod 3, created at 9285 s, went 4 -> 32 -> 18 -> 15 (third run), now
  4 -> 13 at its first poll.
- **Turns**: daily/cpu 3 -> 1 (**met**), daily/io 4 -> 2 (1 pod of 9, was 3), daily/mixed
  4 -> 4 (2 of 8); step and spike at most 1 as before. What is left, traced pod by pod:
  - daily/io pod 3: 13 -> 21 at 12850 s on a queue of 8 then 7 (it stood still over a
    poll, so it is read as clients that came at once and taken whole), `load-fell` to 15
    20 s later; and, after the replica change at 14685 s, `littles-law-up` 15 -> 21 at
    14715 s on recent means that mix the pod's share before and after the new pod became
    ready (L 13.6 with 2 sqrt(L); the cap of the most seen at once was lifted by a queue of
    6 at one poll), `load-fell` to 14 20 s later, and 14 -> 17 three hours on.
  - daily/mixed pods 1 and 2: the same still-queue reading (6 -> 13 on queues 0, 5, 7 at
    14700 s; 6 -> 14 on 0, 8, 8 at 14785 s; 5 -> 9 at 7085 s), each taken down by
    `load-fell` within 20-95 s: an open loop's pile that grew by a jitter's worth over one
    poll reads as still. The queue-small hold makes the pile reach 5-8 before the step, so
    this reading came up where `queue-served` did before (mixed pod 1: its turns moved from
    3620-3695 s to 9500-14765 s). Not fixed here.
- **Pod-CPU-seconds**: step/mixed -3% -> +3% and spike/mixed -10% -> +17% now read as
  savings, **but not as a clean win**: the tuned mixed fleets serve less than before
  (step 0.9932 -> 0.9906, dropped 25350 -> 34148; spike 0.9705 -> 0.9637, dropped
  51118 -> 62403) on fewer pod-CPU-seconds (64200 -> 60000; 40350 -> 30570), and the
  CPU HPA at 70% that reaches that throughput costs more. Traced: at b4ec608 (queue-small
  alone) both runs are exactly the third run's; with `_refused`, the first pods' first
  poll (4 workers, the backlog full) goes 4 -> 8 and holds, where it went 4 -> 16 -> 6, so
  at the step the pods are at 8, CPU-bound at their first poll of the new load
  (`cpu-saturated`: 87% at 8 workers), and hold, where at 6 they stepped to 16; the HPA
  then added fewer pods. step/io and spike/io moved by under 4% (step/io 65130 -> 63510 at
  0.9899 -> 0.9902; spike/io 41910 -> 40410 at 0.9626 -> 0.9618). daily/mixed (-15%) and
  daily/cpu (-12%) are still **missed**, for the model's reasons given in the first
  reading (a CPU HPA at 80-90% loses nothing in a fluid model without latency); the model
  was not changed for them.
"""

DT = 5.0  # s between polls (the tuner's interval)
SYNC = 15.0  # s between the HPA's syncs (--horizontal-pod-autoscaler-sync-period)
RULE_WINDOW = 60.0  # s the recording rule averages the signal (and the CPU) over
STARTUP = 30.0  # s from a pod's creation to its readiness
POD_CPU = 2.0  # the pod's CPU limit and request (cores)
BACKLOG = 100  # the listen backlog (uWSGI's default `listen`)
TARGET = 0.9  # the HPA's averageValue for uwsgitune_capacity_utilisation
CPU_TARGETS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # averageUtilization of the baseline
BASE_WORKERS = 8  # the baseline's fixed workers
MAX_WORKERS = 32  # the tuned pods' processes
INITIAL_WORKERS = 4  # the tuned pods' cheaper-initial
# down_window holds as many polls as its default does at the default 1 s interval.
TUNER = TunerSettings(min_workers=2, max_workers=MAX_WORKERS, interval=DT, down_window=30 * DT)
MiB = 1024 * 1024


@dataclass(frozen=True)
class App:
    name: str
    cpu_ms: float  # CPU a request takes
    io_ms: float  # and its wait on anything else
    base: float  # req/s of the step and spike traces' base; the daily curve's peak is 4x


APPS = {
    "io": App("io", 5.0, 45.0, 600.0),  # mostly waiting on a database or an upstream
    "mixed": App("mixed", 10.0, 30.0, 300.0),
    "cpu": App("cpu", 20.0, 5.0, 150.0),  # rendering, serialising
}


# --- traces -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    name: str
    seconds: float
    events: tuple[float, ...]  # the load changes (docstring: A load change)
    rate: Callable[[float, float], float]  # (t, base) -> offered req/s


def _daily(t: float, base: float) -> float:
    peak = 4 * base
    return peak * (0.15 + 0.85 * (1 - math.cos(2 * math.pi * t / 86400)) / 2)


def _step(t: float, base: float) -> float:
    return base * (3.0 if t >= 1800 else 1.0)


def _spike(t: float, base: float) -> float:
    return base * (4.0 if 1800 <= t < 1920 else 1.0)


TRACES = {
    "daily": Trace("daily", 86400, (0.0, 43200.0), _daily),
    "step": Trace("step", 5400, (0.0, 1800.0), _step),
    "spike": Trace("spike", 5400, (0.0, 1800.0, 1920.0), _spike),
}


# --- the HPA ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HpaSpec:
    target: float
    resource_cpu: bool = False  # unready pods are set aside (CPU only)
    tolerance: float = 0.1
    down_window: float = 300.0
    up_window: float = 0.0
    period: float = 15.0
    up_percent: float = 100.0
    up_pods: int = 4
    down_percent: float = 100.0
    min_replicas: int = 1
    max_replicas: int = 100


def replica_count(
    current: int, values: Sequence[float | None], ready: Sequence[bool], spec: HpaSpec
) -> int:
    """The replica calculation of Kubernetes' docs (`replica_calculator.go`'s plain metric
    path): `values[i]` is pod i's metric (None: missing), `ready[i]` its readiness."""
    used: list[float] = []
    missing = unready = 0
    for v, ok in zip(values, ready, strict=True):
        if spec.resource_cpu and not ok:
            unready += 1
        elif v is None:
            missing += 1
        else:
            used.append(v)
    if not used:
        return current
    ratio = sum(used) / len(used) / spec.target
    if not missing and not unready:
        if abs(1 - ratio) <= spec.tolerance:
            return current
        return math.ceil(ratio * len(used))
    up_unready = unready > 0 and ratio > 1
    filled = list(used)
    if missing:
        filled += [spec.target if ratio < 1 else 0.0] * missing
    if up_unready:
        filled += [0.0] * unready
    new = sum(filled) / len(filled) / spec.target
    if abs(1 - new) <= spec.tolerance or (ratio < 1 < new) or (new < 1 < ratio):
        return current
    replicas = math.ceil(new * len(filled))
    if (new < 1 and replicas > current) or (new > 1 and replicas < current):
        return current
    return replicas


@dataclass
class Hpa:
    """The behavior around the calculation: stabilisation windows and rate policies."""

    spec: HpaSpec
    recs: list[tuple[float, int]] = field(default_factory=list)
    events: list[tuple[float, int]] = field(default_factory=list)  # (t, replicas added)

    def sync(
        self, t: float, current: int, values: Sequence[float | None], ready: Sequence[bool]
    ) -> int:
        s = self.spec
        rec = min(max(replica_count(current, values, ready, s), s.min_replicas), s.max_replicas)
        self.recs = [(at, r) for at, r in self.recs if at > t - max(s.down_window, s.up_window)]
        self.recs.append((t, rec))
        up = min(r for at, r in self.recs if at > t - s.up_window or at == t)
        down = max(r for at, r in self.recs if at > t - s.down_window or at == t)
        desired = up if current < up else down if current > down else current
        recent = [d for at, d in self.events if at > t - s.period]
        if desired > current:
            start = current - sum(d for d in recent if d > 0)
            limit = max(math.ceil(start * (1 + s.up_percent / 100)), start + s.up_pods)
            desired = min(desired, limit)
        elif desired < current:
            start = current - sum(d for d in recent if d < 0)
            desired = max(desired, math.floor(start * (1 - s.down_percent / 100)))
        desired = min(max(desired, s.min_replicas), s.max_replicas)
        if desired != current:
            self.events.append((t, desired - current))
        self.events = [(at, d) for at, d in self.events if at > t - s.period]
        return desired


# --- a pod ------------------------------------------------------------------------------


@dataclass
class Pod:
    app: App
    born: float
    tuned: bool
    seed: int
    workers: int = 0
    queue: float = 0.0
    state: TunerState = field(default_factory=TunerState)
    frames: list[Frame] = field(default_factory=list)
    instance: Instance | None = None
    reload: bool = False
    samples: list[tuple[float, float]] = field(default_factory=list)  # (t, metric)
    moves: list[tuple[float, int]] = field(default_factory=list)  # (t, +1 / -1)
    codes: list[tuple[float, str, int, int]] = field(default_factory=list)  # (t, code, from, to)

    def __post_init__(self) -> None:
        self.workers = INITIAL_WORKERS if self.tuned else BASE_WORKERS
        self.rng = random.Random(self.seed)

    def ready(self, t: float) -> bool:
        return t >= self.born + STARTUP

    def cpu_ms(self) -> float:
        return self.app.cpu_ms * (1 + 0.01 * max(self.workers - POD_CPU, 0))

    def serve(self, t: float, rate: float) -> tuple[float, float, float]:
        """One poll interval at `rate` req/s: (served, dropped, CPU cores used)."""
        rate *= 1 + self.rng.uniform(-0.02, 0.02)
        w0 = (self.app.cpu_ms + self.app.io_ms) / 1000
        cpu = self.cpu_ms() / 1000
        mu = min(self.workers / w0, POD_CPU / cpu)
        available = self.queue + rate * DT
        served = min(mu * DT, available)
        left = available - served
        dropped = max(left - BACKLOG, 0.0)
        self.queue = min(left, BACKLOG)
        x = served / DT
        cores = x * cpu
        short = self.queue >= 1 or x >= 0.999 * mu
        in_service = float(self.workers) if short else min(x * w0, self.workers)
        if self.tuned:
            self._poll(t, x, in_service, cores, dropped)
        else:
            self.samples.append((t, cores / POD_CPU))
        return served, dropped, cores

    def _poll(self, t: float, x: float, in_service: float, cores: float, dropped: float) -> None:
        """The stats of this interval through the Tracker, then the tuner's step."""
        runq = max(in_service - x * self.app.io_ms / 1000 - cores, 0.0)
        # The requests in the instance at the poll: L on average, Poisson around it (random
        # arrivals); those past the workers wait, beside what the fluid backlog holds.
        at_poll = max(round(in_service + math.sqrt(in_service) * self.rng.gauss(0, 1)), 0)
        queued = round(self.queue) + max(at_poll - self.workers, 0)
        load = Load(
            live=self.workers,
            cheap=MAX_WORKERS - self.workers,
            busy=min(at_poll, self.workers),
            rps=x,
            in_service=in_service,
            worker_cpu=cores / self.workers,
            runq=runq / in_service if in_service else 0.0,
            host_busy=None,
            cpus=8,
            effective_cpus=POD_CPU,
            somaxconn=None,
            mem_available=4096 * MiB,
            sockets=(
                SocketView("0.0.0.0:8000", "http", False, min(queued, BACKLOG), BACKLOG, "stats"),
            ),
            spawned=1_700_000_000.0,
            listen_overflows=round(dropped),
        )
        if self.instance is None:
            self.instance = Instance(f"pod-{self.seed}", 1_700_000_000.0, 0.0)
            self.instance.frame(t - DT, load)  # the first poll has no rates
        frame = self.instance.frame(t, load, reload=self.reload)
        self.reload = False
        self.frames = [*self.frames[-100:], frame]
        d = decide(self.frames, self.state, TUNER, now=t)
        self.state = d.state
        if d.is_change:
            self.moves.append((t, 1 if d.desired > self.workers else -1))
            self.codes.append((t, d.code, self.workers, d.desired))
            self.workers = d.desired
            self.reload = d.via == "reload"
        util = capacity_utilisation(self.frames, TUNER, now=t)
        if util is not None:
            self.samples.append((t, util.ratio))

    def metric(self, t: float) -> float | None:
        """The recording rule: the mean over RULE_WINDOW s of the samples since it was ready."""
        edge = max(t - RULE_WINDOW, self.born + STARTUP - 1e-9)
        vals = [v for at, v in self.samples[-int(RULE_WINDOW / DT) - 1 :] if at > edge]
        return sum(vals) / len(vals) if vals else None


# --- a run ------------------------------------------------------------------------------


@dataclass
class Run:
    trace: str
    app: str
    fleet: str  # "tuned" or "cpu-<target>"
    offered: float = 0.0
    served: float = 0.0
    dropped: float = 0.0
    pod_cpu_seconds: float = 0.0
    replica_moves: list[tuple[float, int]] = field(default_factory=list)
    tuner_moves: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    tuner_codes: dict[int, list[tuple[float, str, int, int]]] = field(default_factory=dict)
    series: list[tuple[float, float, int, float, float]] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return self.served / self.offered if self.offered else 1.0


def start_rate(app: App, target: float, tuned: bool) -> float:
    """A pod's share at the steady count its HPA aims at, roughly: the fleet's first size."""
    cpu_rate = POD_CPU / (app.cpu_ms / 1000)
    w0 = (app.cpu_ms + app.io_ms) / 1000
    if tuned:
        return target * min(0.85 * cpu_rate, MAX_WORKERS / w0)
    return min(target * cpu_rate, BASE_WORKERS / w0)


def initial_replicas(app: App, trace: Trace, per_pod: float) -> int:
    return max(1, math.ceil(trace.rate(0.0, app.base) / per_pod))


def run(
    trace: Trace, app: App, cpu_target: float | None = None, seconds: float | None = None
) -> Run:
    """One fleet through one trace: tuned (cpu_target None) or the CPU baseline."""
    tuned = cpu_target is None
    spec = HpaSpec(TARGET) if tuned else HpaSpec(cpu_target, resource_cpu=True)
    hpa = Hpa(spec)
    out = Run(trace.name, app.name, "tuned" if tuned else f"cpu-{cpu_target:g}")
    # Start near the steady count, ready: the first load change is the trace's start.
    per_pod = start_rate(app, TARGET if cpu_target is None else cpu_target, tuned)
    seed = 0
    pods: list[Pod] = []
    for _ in range(initial_replicas(app, trace, per_pod)):
        seed += 1
        pods.append(Pod(app, -STARTUP, tuned, seed))
    hpa.recs.append((0.0, len(pods)))  # the fleet was steady at this count before the trace
    end = trace.seconds if seconds is None else seconds
    steps = int(end / DT)
    for k in range(1, steps + 1):
        t = k * DT
        total = trace.rate(t, app.base)
        ready = [p for p in pods if p.ready(t)]
        out.offered += total * DT
        if not ready:
            out.dropped += total * DT
        for p in ready:
            served, dropped, _cores = p.serve(t, total / len(ready))
            out.served += served
            out.dropped += dropped
        out.pod_cpu_seconds += len(pods) * POD_CPU * DT
        if k % round(SYNC / DT) == 0:
            values = [p.metric(t) for p in pods]
            flags = [p.ready(t) for p in pods]
            want = hpa.sync(t, len(pods), values, flags)
            if want != len(pods):
                out.replica_moves.append((t, 1 if want > len(pods) else -1))
            while len(pods) < want:
                seed += 1
                pods.append(Pod(app, t, tuned, seed))
            if len(pods) > want:  # the unready first, then the youngest
                pods.sort(key=lambda p: (p.ready(t), -p.born))
                for gone in pods[: len(pods) - want]:
                    out.tuner_moves[gone.seed] = gone.moves
                    out.tuner_codes[gone.seed] = gone.codes
                pods = pods[len(pods) - want :]
        if k % round(60 / DT) == 0:
            live = [p.workers for p in pods if p.ready(t)]
            metric = [m for m in (p.metric(t) for p in pods) if m is not None]
            out.series.append(
                (
                    t,
                    total,
                    len(pods),
                    sum(live) / len(live) if live else 0.0,
                    sum(metric) / len(metric) if metric else 0.0,
                )
            )
    for p in pods:
        out.tuner_moves[p.seed] = p.moves
        out.tuner_codes[p.seed] = p.codes
    return out


# --- the verdicts -----------------------------------------------------------------------


def reversals(moves: Sequence[tuple[float, int]], changes: Sequence[float]) -> int:
    """The most direction changes between two consecutive load changes (`changes`, times)."""
    edges = sorted(changes)
    worst = 0
    for i, start in enumerate(edges):
        stop = edges[i + 1] if i + 1 < len(edges) else math.inf
        dirs = [d for t, d in moves if start <= t < stop]
        worst = max(worst, sum(1 for a, b in itertools.pairwise(dirs) if a != b))
    return worst


def settle_times(
    moves: Sequence[tuple[float, int]], events: Sequence[float], end: float
) -> list[float]:
    """For each event after the trace's start: seconds from it to the replica count's last
    change before the next event (0: no change)."""
    out = []
    edges = sorted(events)
    for i, start in enumerate(edges[1:], 1):
        stop = edges[i + 1] if i + 1 < len(edges) else end
        last = max((t for t, _d in moves if start <= t < stop), default=start)
        out.append(last - start)
    return out


def verdicts(r: Run, trace: Trace) -> dict[str, Any]:
    replica_changes = sorted({t for t, _ in r.replica_moves})
    tuner = max(
        (reversals(m, [*trace.events, *replica_changes]) for m in r.tuner_moves.values()),
        default=0,
    )
    changes = [*trace.events, *replica_changes]
    over = {seed for seed, m in r.tuner_moves.items() if reversals(m, changes) > 1}
    codes: dict[str, int] = {}
    for seed in sorted(over):
        for _t, code, _a, _b in r.tuner_codes.get(seed, []):
            codes[code] = codes.get(code, 0) + 1
    out: dict[str, Any] = {
        "pods": len(r.tuner_moves),
        "pods_over_one": len(over),
        "codes_of_those": codes,
        "hpa_reversals": reversals(r.replica_moves, trace.events),
        "tuner_reversals": tuner,
        "replica_changes": len(r.replica_moves),
    }
    if trace.name != "daily":
        out["settle_s"] = settle_times(r.replica_moves, trace.events, trace.seconds)
    return out


# --- the report -------------------------------------------------------------------------


def commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return done.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def row(r: Run) -> dict[str, Any]:
    return {
        "trace": r.trace,
        "app": r.app,
        "fleet": r.fleet,
        "throughput": r.throughput,
        "pod_cpu_seconds": r.pod_cpu_seconds,
        "dropped": r.dropped,
        "replica_moves": r.replica_moves,
    }


def compare(tuned: Run, baselines: Sequence[Run]) -> dict[str, Any]:
    """The cheapest CPU target at the tuned fleet's throughput (less 0.1 point)."""
    fit = [b for b in baselines if b.throughput >= tuned.throughput - 0.001]
    if not fit:
        return {"baseline": None, "fewer": None}
    best = min(fit, key=lambda b: b.pod_cpu_seconds)
    return {
        "baseline": best.fleet,
        "baseline_pod_cpu_seconds": best.pod_cpu_seconds,
        "baseline_throughput": best.throughput,
        "saving": 1 - tuned.pod_cpu_seconds / best.pod_cpu_seconds,
        "fewer": tuned.pod_cpu_seconds < best.pod_cpu_seconds,
    }


def chart(runs: dict[tuple[str, str], Run]) -> str:
    """Replicas and the mean live workers of the tuned fleet, per trace, for each app."""
    w, h, pad = 300, 120, 40
    names = sorted({t for t, _ in runs})
    apps = sorted({a for _, a in runs})
    colours = {"io": "#1f77b4", "mixed": "#2ca02c", "cpu": "#d62728"}
    width = len(names) * (w + pad) + pad
    height = 2 * (h + pad) + 60
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">'
    ]
    for i, name in enumerate(names):
        x0 = pad + i * (w + pad)
        for j, (key, label) in enumerate(((2, "replicas"), (3, "live workers / pod"))):
            y0 = 20 + j * (h + pad)
            parts.append(
                f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>'
            )
            parts.append(f'<text x="{x0}" y="{y0 - 4}">{name}: {label}</text>')
            series = [runs[(name, a)].series for a in apps if (name, a) in runs]
            top = max((s[key] for ser in series for s in ser), default=1) or 1
            span = max((s[0] for ser in series for s in ser), default=1)
            for a in apps:
                if (name, a) not in runs:
                    continue
                pts = " ".join(
                    f"{x0 + s[0] / span * w:.1f},{y0 + h - s[key] / top * h:.1f}"
                    for s in runs[(name, a)].series
                )
                parts.append(
                    f'<polyline fill="none" stroke="{colours.get(a, "#000")}" points="{pts}"/>'
                )
            parts.append(f'<text x="{x0 + w - 30}" y="{y0 + 12}">{top:g}</text>')
    for k, a in enumerate(apps):
        parts.append(
            f'<text x="{pad + k * 80}" y="{height - 10}" fill="{colours.get(a, "#000")}">{a}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def summary(verdict: dict[str, Any]) -> list[str]:
    """Each criterion of the definitions, met or missed, run by run."""
    criteria: list[tuple[str, Callable[[dict[str, Any]], bool | None]]] = [
        (
            "The HPA changes direction at most once per load change",
            lambda v: v["hpa_reversals"] <= 1,
        ),
        (
            "Every pod's tuner changes direction at most once per load change",
            lambda v: v["tuner_reversals"] <= 1,
        ),
        (
            "The replica count is steady within three stabilisation windows (step, spike)",
            lambda v: max(v["settle_s"]) <= 900 if "settle_s" in v else None,
        ),
        (
            "Fewer pod-CPU-seconds than the cheapest HPA on CPU at the same throughput",
            lambda v: v["compare"]["fewer"],
        ),
    ]
    out = []
    for text, ok in criteria:
        met = [k for k, v in verdict.items() if ok(v)]
        missed = [k for k, v in verdict.items() if ok(v) is False]
        line = f"- {text}: met in {len(met)} runs"
        out.append(line + (f"; **missed** in {', '.join(missed)}." if missed else "."))
    none = [k for k, v in verdict.items() if v["compare"]["baseline"] is None]
    if none:
        out.append(f"- No CPU target reached the tuned fleet's throughput in: {', '.join(none)}.")
    for k, v in verdict.items():
        if v["tuner_reversals"] > 1:
            codes = ", ".join(f"{c} {n}" for c, n in sorted(v["codes_of_those"].items()))
            out.append(
                f"- {k}: {v['pods_over_one']} of {v['pods']} pods' tuners turned more than once "
                f"between two load changes; their moves by decision code: {codes}."
            )
    return out


def report(rows: list[dict[str, Any]], verdict: dict[str, Any], sha: str) -> str:
    lines = [
        "# The tuner and the pod autoscaler together: a simulated fleet",
        "",
        f"bench/fleet_sim.py at commit `{sha}`. Chart: ![fleet](fleet.svg)",
        "",
        DEFINITIONS,
        "## Results",
        "",
        "| trace | app | HPA direction changes (most per load change) | tuner's (most per load "
        "change, any pod) | replica changes | settled after each event (s) | throughput | "
        "pod-CPU-s | cheapest CPU HPA at that throughput | its pod-CPU-s | saving |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, v in verdict.items():
        trace, app = key.split("/")
        tuned = next(
            r for r in rows if r["trace"] == trace and r["app"] == app and r["fleet"] == "tuned"
        )
        c = v["compare"]
        settle = ", ".join(f"{s:.0f}" for s in v.get("settle_s", [])) or "n/a (daily)"
        base = c["baseline"] or "none reaches it"
        base_cpu = f"{c['baseline_pod_cpu_seconds']:.0f}" if c["baseline"] else "-"
        saving = f"{c['saving']:.0%}" if c["baseline"] else "-"
        lines.append(
            f"| {trace} | {app} | {v['hpa_reversals']} | {v['tuner_reversals']} | "
            f"{v['replica_changes']} | {settle} | {tuned['throughput']:.4f} | "
            f"{tuned['pod_cpu_seconds']:.0f} | {base} | {base_cpu} | {saving} |"
        )
    lines += ["", "### Verdicts", "", *summary(verdict), "", READING]
    lines += [
        "",
        "### Every fleet",
        "",
        "| trace | app | fleet | throughput | pod-CPU-s | dropped |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['trace']} | {r['app']} | {r['fleet']} | {r['throughput']:.4f} | "
            f"{r['pod_cpu_seconds']:.0f} | {r['dropped']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="step,spike,daily")
    ap.add_argument("--apps", default="io,mixed,cpu")
    ap.add_argument("--report-only", action="store_true", help="rewrite fleet.md from fleet.json")
    args = ap.parse_args(argv)
    if args.report_only:
        saved = json.loads((RESULTS / "fleet.json").read_text())
        (RESULTS / "fleet.md").write_text(report(saved["rows"], saved["verdicts"], saved["commit"]))
        return 0
    sha = commit()
    rows: list[dict[str, Any]] = []
    verdict: dict[str, Any] = {}
    runs: dict[tuple[str, str], Run] = {}
    for tname in args.traces.split(","):
        trace = TRACES[tname]
        for aname in args.apps.split(","):
            app = APPS[aname]
            tuned = run(trace, app)
            runs[(tname, aname)] = tuned
            baselines = [run(trace, app, cpu_target=c) for c in CPU_TARGETS]
            rows += [row(tuned), *(row(b) for b in baselines)]
            v = verdicts(tuned, trace)
            v["compare"] = compare(tuned, baselines)
            verdict[f"{tname}/{aname}"] = v
            print(tname, aname, json.dumps(v), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fleet.json").write_text(
        json.dumps({"commit": sha, "rows": rows, "verdicts": verdict}, indent=1) + "\n"
    )
    (RESULTS / "fleet.svg").write_text(chart(runs))
    (RESULTS / "fleet.md").write_text(report(rows, verdict, sha))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
