"""The demo's load phases: what each one asks of the bundled app, and how long it lasts.

The cycle shows the states the TUI is built to explain, against 4 live workers and a listen
backlog of 16: nothing, a comfortable load, every worker busy, and a full listen queue.
Pure data and one pure function: the schedule is a function of the elapsed time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    path: str  # a route of uwsgitune.demo.webapp
    clients: int  # closed-loop clients; 0 = no load
    what: str


PHASES: tuple[Phase, ...] = (
    Phase("idle", 5, "/", 0, "no traffic"),
    Phase("steady", 25, "/mixed/5/40", 3, "3 clients, 45 ms requests: workers have room"),
    Phase("burst", 20, "/io/100", 10, "10 clients, 100 ms IO requests: every worker busy"),
    Phase("overload", 25, "/io/300", 48, "48 clients, 300 ms requests: the listen queue fills"),
)

CLIENT_TIMEOUT = 10.0  # seconds a demo request may wait (queued SYNs retry after 1, 3 s)


def cycle_seconds(phases: Sequence[Phase] = PHASES) -> float:
    return sum(p.seconds for p in phases)


def phase_at(elapsed: float, phases: Sequence[Phase] = PHASES) -> tuple[Phase, float]:
    """The phase running `elapsed` seconds after the start, and the seconds it has left."""
    into = max(elapsed, 0.0) % cycle_seconds(phases)
    for p in phases:
        if into < p.seconds:
            return p, p.seconds - into
        into -= p.seconds
    return phases[-1], 0.0
