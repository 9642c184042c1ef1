"""What a sizing rule proposes: a live count, and why. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Proposal:
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
