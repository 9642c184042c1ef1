"""What one tuner step returns: typed, frozen, and formatted only by its callers. Pure.

`TunerService.step` (actuate/service.py) returns a `StepResult`: the decision, what the
step has to say (`Note`s, each with a level and whether it is new), the audit records it
wrote, whether applying is stopped, the exact command in recommend mode, the outcome of a
change it applied and the phases its move went through (`tuner/moves.py`), how the tuner
opened on its first good poll (`Opened`), and what became of an apply the TUI asked for
(`Requested`). The daemon turns notes into structured events, `uwsgitune tune` prints
them, the TUI shows the decision and the outcomes: none of them parse text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from uwsgitune.tuner.backlog import ListenDecision
from uwsgitune.tuner.decision import Decision
from uwsgitune.tuner.moves import MoveRecord
from uwsgitune.tuner.utilisation import Utilisation

Level = Literal["info", "warning", "error"]
NoteKind = Literal["decision", "listen", "apply", "verify", "stop", "resume"]
# "intent": written before a reload or a restart acts; its "change" record follows it. An
# intent without one is an apply the process did not live to finish (killed mid-wait).
Event = Literal["intent", "change", "verify", "stop", "resume"]
EVENTS: tuple[Event, ...] = ("intent", "change", "verify", "stop", "resume")
# "interrupted": a stop signal came during the wait; rolled back, applying not stopped.
Result = Literal["sent", "verified", "refused", "failed", "unconfirmed", "interrupted"]


@dataclass(frozen=True)
class Note:
    """One thing a step says, for people. `fresh`: not a repeat of what was said before
    (a steady decision is said again only after a while; callers may log fresh notes only)."""

    level: Level
    kind: NoteKind
    text: str
    fresh: bool = True


@dataclass(frozen=True)
class AuditRecord:
    """One line of the audit log. `to_json` keeps the keys the log has always had."""

    event: Event
    t: float  # wall clock
    instance: str
    mode: str
    action: str | None = None  # "up", "down" or "listen"
    via: str | None = None  # "fifo", "reload" or "restart"
    before: int | None = None
    after: int | None = None
    code: str | None = None
    reason: str | None = None
    evidence: Mapping[str, Any] | None = None
    result: str | None = None
    detail: str | None = None
    moves: Mapping[str, int] | None = None  # changes applied so far, by route
    override: Mapping[str, str] | None = None  # the keys written, for a reload
    pid: int | None = None  # an intent's: the uWSGI master it is about to act on

    def counted(self) -> tuple[str, str] | None:
        """(kind, result) of an action this record counts: a change by its route, or a
        verification; None for anything else."""
        kind = self.via if self.event == "change" else self.event
        if self.event in ("change", "verify") and kind and self.result:
            return kind, self.result
        return None

    def to_json(self) -> dict[str, Any]:
        """The line's keys: those set, and a change's before and after even when unknown."""
        keep = ("before", "after") if self.event == "change" else ()
        return {k: v for k, v in asdict(self).items() if v is not None or k in keep}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> AuditRecord | None:
        """A record read back from the log; None when it is not one (a foreign line)."""
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        if raw.get("event") not in EVENTS:
            return None
        if not isinstance(raw.get("t"), int | float):
            return None
        known.setdefault("instance", "")
        known.setdefault("mode", "")
        try:
            return cls(**known)
        except TypeError:
            return None


@dataclass(frozen=True)
class Outcome:
    """What became of a change applied in this step."""

    result: Result
    detail: str

    @property
    def ok(self) -> bool:
        return self.result in ("sent", "verified")


@dataclass(frozen=True)
class Waiting:
    """What an apply in flight waits for (a reload or a restart to come back), since and
    until when (monotonic): published with the polls the wait makes, for a progress line."""

    what: str
    since: float
    until: float


@dataclass(frozen=True)
class Opened:
    """How the tuner opened, on the instance's first good poll: the mode it runs in, its
    bounds, and what kept it from the mode asked (each one line naming the fix; None:
    nothing). A tuner that takes the apply lock later (it was held) opens again then."""

    mode: str
    floor: int = 0
    ceiling: int = 0
    fifo_problem: str | None = None  # the FIFO failed its checks against that poll
    lock_problem: str | None = None  # apply asked, another uwsgitune holds the lock
    audit_problem: str | None = None  # apply asked, the audit log cannot be read

    @property
    def problems(self) -> tuple[str, ...]:
        found = (self.fifo_problem, self.lock_problem, self.audit_problem)
        return tuple(p for p in found if p is not None)


# What became of an apply asked by hand (the TUI's `a`):
# applied: the change went; resumed: a pool a killed reload left paused was resumed first
# (nothing else applied); locked: another uwsgitune holds the lock; changed: the fresh
# decision is not the one confirmed; no-stats: no poll yet; stopped: applying is stopped;
# refused / failed: the change was refused, or went and failed (`detail` says why).
Asked = Literal[
    "applied", "resumed", "locked", "changed", "no-stats", "stopped", "refused", "failed"
]


@dataclass(frozen=True)
class Requested:
    kind: Asked
    text: str  # one line for the screen

    @property
    def ok(self) -> bool:
        return self.kind in ("applied", "resumed")


@dataclass(frozen=True)
class StepResult:
    decision: Decision | None
    mode: str
    notes: tuple[Note, ...] = ()
    records: tuple[AuditRecord, ...] = ()
    stopped: str | None = None  # applying is stopped, and why
    advice: str | None = None  # recommend mode: the exact command that would apply it
    outcome: Outcome | None = None  # a change applied in this step
    moves: Mapping[str, int] = field(default_factory=dict)  # changes applied so far, by route
    listen: ListenDecision | None = None  # the listen decision of this poll
    # The last listen restart (monotonic): the rules must not count frames from before it.
    listen_since: float | None = None
    move: MoveRecord | None = None  # the phases of a change applied in this step
    opened: Opened | None = None  # this step opened the tuner (its first good poll)
    requested: Requested | None = None  # an apply asked by hand, served in this step
    # the pool's demand against its capacity at the ceiling: the pod autoscaler's signal
    # (tuner/utilisation.py); None when the poll has no rates or is stale
    utilisation: Utilisation | None = None
