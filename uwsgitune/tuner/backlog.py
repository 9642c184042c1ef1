"""The listen decision: what the rules ask of `listen`, and whether it may be applied now. Pure.

The rules recommend a `listen` (the socket backlog); only a restart applies it (a reload
keeps the bound socket), so only the advice of `listen_queue.bursts` (the queue overflows
in bursts while the workers keep up on average) is ever applied, capped at somaxconn, and
only in apply mode with a restart command. A queue that is full because the workers (or
the CPU) are short needs workers or CPU: a larger backlog only makes clients wait longer,
so that advice is only said.

`decide_listen` turns the findings of one poll into nothing (None), `advise`, `held` (with
why: applying is stopped, the numbers are doubtful, the hourly change limit or the listen
cool-down) or `apply` (the target). Its pacing is `decide`'s: one hourly limit, one
cool-down helper (tuner/policy.py). Applying it is actuate/restart.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from uwsgitune.core.frame import Frame
from uwsgitune.rules.context import backlog
from uwsgitune.rules.finding import Finding
from uwsgitune.tuner.decision import Decision, TunerState
from uwsgitune.tuner.policy import cooling, hour_full
from uwsgitune.tuner.tunersettings import TunerSettings

APPLIED_BY = ("listen_queue.bursts",)  # findings whose listen advice may be applied
# Decisions on numbers too doubtful to restart on: a listen change waits with them.
DOUBTFUL = ("stale", "settling", "in-flight", "no-rates", "unreachable", "emperor")
ListenKind = Literal["advise", "held", "apply"]


@dataclass(frozen=True)
class ListenWish:
    """What the rules ask for, bounded: `target` is what may be applied (None: nothing)."""

    current: int | None
    wanted: int
    target: int | None
    finding: str
    why: str

    @property
    def appliable(self) -> bool:
        return self.target is not None and self.finding in APPLIED_BY


@dataclass(frozen=True)
class ListenGate:
    """What besides the numbers decides whether a listen change may be applied now."""

    applying: bool  # apply mode, with a restart command to apply listen by
    override: bool  # an override ini to write listen to
    stopped: str | None = None  # applying is stopped, and why
    last_listen: float | None = None  # monotonic time of the last listen restart tried


@dataclass(frozen=True)
class ListenDecision:
    """`advise`: say it only; `held`: it would be applied, not now (`why`); `apply`: now."""

    kind: ListenKind
    wish: ListenWish
    why: str | None = None

    @property
    def target(self) -> int | None:
        return self.wish.target


def listen_wish(findings: Sequence[Finding], frame: Frame) -> ListenWish | None:
    """The rules' listen recommendation, capped at somaxconn. None: none is standing."""
    for f in findings:
        rec = f.recommendation
        if f.clearing or rec is None or not isinstance(rec.value, int):
            continue
        if rec.setting == "listen" or dict(rec.together).get("listen") is not None:
            wanted = rec.value if rec.setting == "listen" else int(dict(rec.together)["listen"])
            current = backlog(frame)
            cap = frame.somaxconn
            target = wanted if cap is None else min(wanted, cap)
            why = f.reason
            if cap is None:
                return ListenWish(current, wanted, None, f.id, f"{why} (somaxconn unknown)")
            if current is not None and target <= current:
                why += f" (somaxconn {cap} leaves no room: raise net.core.somaxconn first)"
                return ListenWish(current, wanted, None, f.id, why)
            return ListenWish(current, wanted, target, f.id, why)
    return None


def decide_listen(
    findings: Sequence[Finding],
    frame: Frame,
    decision: Decision,
    state: TunerState,
    settings: TunerSettings,
    now: float,
    gate: ListenGate,
) -> ListenDecision | None:
    """The listen decision of one poll, after the worker decision `decision` (which did
    not change the count) with the tuner's `state`. None: no listen advice stands."""
    wish = listen_wish(findings, frame)
    if wish is None:
        return None
    if not (gate.applying and wish.appliable):
        return ListenDecision("advise", wish)
    why = _held(decision, state, settings, now, gate)
    return ListenDecision("held", wish, why) if why else ListenDecision("apply", wish)


def _held(
    d: Decision, state: TunerState, settings: TunerSettings, now: float, gate: ListenGate
) -> str | None:
    if gate.stopped:
        return f"apply STOPPED ({gate.stopped})"
    if not gate.override:
        return "no --override to write listen to"
    if d.code in DOUBTFUL:
        return d.reason
    full = hour_full(state.changes, now, settings)
    if full is not None:
        return f"{full} changes in the last hour"
    cool = settings.listen_cooldown
    since = cooling(gate.last_listen, now, cool)
    if since is not None:
        return f"a listen change {since:.0f}s ago (cool-down {cool:g}s)"
    return None
