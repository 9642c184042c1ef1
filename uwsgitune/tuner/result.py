"""What one tuner step returns: typed, frozen, and formatted only by its callers. Pure.

`TuneLoop.step` (actuate/) returns a `StepResult`: the decision, what the step has to say
(`Note`s, each with a level and whether it is new), the audit records it wrote, whether
applying is stopped, the exact command in recommend mode, and the outcome of a change it
applied. The daemon turns notes into structured events, `uwsgitune tune` prints them, the
TUI shows the decision and the outcome: none of them parse text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from uwsgitune.tuner.listen import ListenDecision
from uwsgitune.tuner.state import Decision

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
