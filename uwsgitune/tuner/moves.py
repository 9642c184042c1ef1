"""The life of one change, per route: which phase may follow which. Pure.

A change the tuner applies goes by one of three routes, each with its own steps and its own
ways to end (after h11's `_state.py`: the table is the rule, the code only asks it):

- **fifo** (`+`/`-` on the master FIFO): *decided*, then *sent* (the whole command went) or
  *refused* (nothing went: a full pipe, no master reading, the stats not proved the
  master's). A sent change is *verified* when the live count shows it, or *unconfirmed*
  when it did not within `verify_deadline` (a pending `-` is then cancelled).
- **reload** (the override rewritten, `r`): *decided*, then *intent* (the audit log says
  what is about to happen, before any byte is written: a kill from here on is counted on
  restart) or *refused* (validation, the setup, the lock); from *intent*, *sent* (written,
  `r` delivered) or *refused* (`r` not delivered: the file is restored); from *sent*,
  *verified* (the master is back with the new counts), *failed* (not back in time: rolled
  back, applying stops) or *interrupted* (a stop came during the wait: rolled back, applying
  goes on).
- **restart** (the override's `listen`, the user's restart command): the same as a reload,
  the restart command in place of `r`.

A phase's name is what the audit log's `result` says for a change that ends there.
`Move.to` refuses a step the table does not allow: a bug, never the instance's doing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Route = Literal["fifo", "reload", "restart"]
Phase = Literal[
    "decided", "intent", "sent", "verified", "unconfirmed", "refused", "failed", "interrupted"
]

_RELOAD: dict[Phase, frozenset[Phase]] = {
    "decided": frozenset({"intent", "refused"}),
    "intent": frozenset({"sent", "refused"}),
    "sent": frozenset({"verified", "failed", "interrupted"}),
}
ROUTES: dict[Route, dict[Phase, frozenset[Phase]]] = {
    "fifo": {
        "decided": frozenset({"sent", "refused"}),
        "sent": frozenset({"verified", "unconfirmed"}),
    },
    "reload": _RELOAD,
    "restart": _RELOAD,
}
FINAL: frozenset[Phase] = frozenset({"verified", "unconfirmed", "refused", "failed", "interrupted"})


class MoveError(RuntimeError):
    """A phase the route's table does not allow after the current one: a bug."""


@dataclass
class Move:
    """One change on its route: the phases it went through, in order."""

    route: Route
    phases: list[Phase] = field(default_factory=lambda: ["decided"])

    @property
    def phase(self) -> Phase:
        return self.phases[-1]

    @property
    def done(self) -> bool:
        return self.phase in FINAL

    def to(self, phase: Phase) -> Move:
        allowed = ROUTES[self.route].get(self.phase, frozenset())
        if phase not in allowed:
            raise MoveError(f"{self.route}: {self.phase} -> {phase} is not a step of the route")
        self.phases.append(phase)
        return self

    def record(self) -> MoveRecord:
        return MoveRecord(self.route, tuple(self.phases))


@dataclass(frozen=True)
class MoveRecord:
    """A move as a step's result carries it (frozen)."""

    route: Route
    phases: tuple[Phase, ...]

    @property
    def phase(self) -> Phase:
        return self.phases[-1]
