"""The tuner's values between its pure steps: its memory from one step to the next
(`TunerState`, with a `Probe` waiting for its verdict), what a sizing rule proposes
(`Proposal`), and the decision it returns (`Decision`). Frozen values only.

A decision's evidence is a mapping of raw numbers (the audit log keeps them as they are);
`EVIDENCE_UNITS` names the unit of each key, once, so that `Decision.line()` reads them in
human units (`core.units`) as the rules' evidence does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from uwsgitune.core import units
from uwsgitune.core.latencytarget import LATENCY_UNITS
from uwsgitune.tuner.tunersettings import TunerSettings

Action = Literal["hold", "wait", "up", "down"]
Via = Literal["none", "fifo", "reload"]
Evidence = dict[str, float | int | str | None]

# The unit of each evidence key a decision carries (`Measures.evidence`, `Estimate.evidence`).
EVIDENCE_UNITS: dict[str, str] = {
    "live": "workers",
    "workers_max": "workers",
    "rps": "req/s",
    "mean_rt_ms": "ms",
    "noise": "ratio",  # relative throughput change below which a difference is noise
    "littles_l": "requests",  # in service, mean of the last polls
    "l_max_window": "requests",
    "queue": "connections",  # mean queued, last polls
    "busy_ratio": "ratio",
    "cpu_sat": "ratio",
    "mem_cap": "workers",  # most live workers memory allows
    "threads": "threads",
    "cpu_ms": "ms",  # per request
    "runq_ms": "ms",
    "io_ms": "ms",
    "cpus_available": "cpus",
    "estimate": "workers",
    "gil_busy": "ratio",
    **LATENCY_UNITS,  # with a latency target: the reading's percentiles (tuner/targeting.py)
}
# How a change takes effect, named as the rules' advice lines name it (`rules.render.ROUTE`).
_VIA: dict[Via, str] = {"none": "", "fifo": "FIFO", "reload": "reload"}


@dataclass(frozen=True)
class Probe:
    """A hill-climbing step waiting for its verdict: the count it left and what it measured."""

    from_live: int
    to_live: int
    x_before: float
    noise: float
    started: float
    cpus_before: float | None = None  # CPUs the instance could get when it started
    cpu_bound: bool = False  # its CPUs were saturated then: throughput followed them
    # queued connections when it started: the most of the recent polls' mean and the latest
    queue_before: float | None = None

    @property
    def up(self) -> bool:
        return self.to_live > self.from_live


@dataclass(frozen=True)
class QueueServed:
    """A step up from `live` workers (one thread each) took a queue of a request or two into
    service and served no more than `x` req/s: at `live` or more, such a queue is requests
    arriving as their workers finish, not a shortage, while the throughput stays within
    noise of `x`."""

    live: int
    x: float


@dataclass(frozen=True)
class TunerState:
    last_change: float | None = None  # monotonic seconds of the last change sent
    changes: tuple[float, ...] = ()  # changes within the last hour
    expect_live: int | None = None  # a change in flight: the live count it should reach
    expect_since: float | None = None
    last_reload: float | None = None
    probe: Probe | None = None
    plateau_up: int | None = None  # adding above this did not raise throughput
    plateau_down: int | None = None  # removing below this lowered throughput
    queue_served: QueueServed | None = None  # a small queue there was no shortage
    learned_at: float | None = None
    learned_request: tuple[float, float] | None = None  # (cpu ms, io ms) a request took then
    learned_demand: float | None = None  # requests in service and queued then
    # with a latency target (tuner/targeting.py): latency-driven shrinks stop here, one
    # above the count that missed the target by queue wait; kept for `reprobe_after`. Out
    # of the repr: a decision without a target reads (and the golden digests hash) as before.
    latency_floor: int | None = field(default=None, repr=False)
    latency_floor_at: float | None = field(default=None, repr=False)
    latency_floor_load: float | None = field(default=None, repr=False)  # L in service then

    def regime_start(self, s: TunerSettings) -> float:
        """Frames before this are from an earlier count, or not settled yet."""
        start = -math.inf
        if self.last_change is not None:
            start = self.last_change + s.settle_after_change
        if self.last_reload is not None:
            start = max(start, self.last_reload + s.settle_after_reload)
        return start

    def confirmed(self) -> TunerState:
        """The change in flight showed in the stats."""
        return replace(self, expect_live=None, expect_since=None)

    def failed(self) -> TunerState:
        """The change in flight did not happen: forget it and its probe."""
        return replace(self, expect_live=None, expect_since=None, probe=None)

    def unlearned(self) -> TunerState:
        return replace(
            self,
            plateau_up=None,
            plateau_down=None,
            queue_served=None,
            learned_at=None,
            learned_request=None,
            learned_demand=None,
            latency_floor=None,
            latency_floor_at=None,
            latency_floor_load=None,
        )

    @property
    def learned(self) -> bool:
        """Probing learned something that holds for this load only."""
        return bool(self.plateau_up or self.plateau_down or self.queue_served)

    def forget(self, now: float, s: TunerSettings) -> TunerState:
        """Plateaus and the latency floor are dropped after `reprobe_after`: loads change."""
        st = self
        at = st.latency_floor_at
        if at is not None and now - at > s.reprobe_after:
            st = replace(st, latency_floor=None, latency_floor_at=None, latency_floor_load=None)
        if st.learned_at is not None and now - st.learned_at > s.reprobe_after:
            return st.unlearned()
        return st


@dataclass(frozen=True)
class Proposal:
    """What a sizing rule proposes (tuner/sizing.py, chosen by `propose`): a live count, and
    why. The guards (tuner/policy.py) turn it into a `Decision`."""

    desired: int
    code: str
    reason: str
    probe: bool = False  # a hill-climbing step, to be judged
    urgent: bool = False  # a safety move: not held back by the cool-down
    fast: bool = False  # a probe that need not wait for a full measurement first
    # a step up that saturated CPUs do not hold back: a revert to what was better, or
    # processes that each keep their GIL busy (the processes, not the CPUs, are the limit)
    past_hot_cpu: bool = False
    # a move down paced like a step up (`cooldown_up`): the load fell and settled
    quick: bool = False
    # requests in service the new count must hold for uWSGI's `-` to apply (None: the
    # most of the recent polls and the down window)
    in_service: float | None = None
    # the move a probe's verdict asks for: held back by pacing, the probe is judged again
    verdict: bool = False


@dataclass(frozen=True)
class Decision:
    action: Action
    code: str  # short machine-readable reason, e.g. "saturated", "cooldown", "stale"
    desired: int
    live: int
    reason: str  # one sentence for people
    via: Via = "none"
    evidence: Evidence = field(default_factory=dict)
    state: TunerState = field(default_factory=TunerState)  # the next state

    @property
    def is_change(self) -> bool:
        return self.action in ("up", "down")

    def headline(self) -> str:
        """What happens: `up 4 → 8 live workers (FIFO)`, or `hold at 4 live workers`."""
        count = self.desired if self.is_change else self.live
        workers = "live worker" if count == 1 else "live workers"
        if self.is_change:
            return f"{self.action} {self.live} → {count} {workers} ({_VIA[self.via]})"
        return f"{self.action} at {count} {workers}"

    def evidence_text(self) -> str:
        """The numbers behind it in human units: `live 4 workers, rps 39.9 req/s, ...`."""
        return units.evidence_text(
            (k, v, EVIDENCE_UNITS.get(k, "")) for k, v in self.evidence.items() if v is not None
        )

    def line(self) -> str:
        """One line for people: what, why, and the numbers behind it."""
        nums = self.evidence_text()
        return f"{self.headline()} [{self.code}] {self.reason}" + (f" | {nums}" if nums else "")
