"""The tuner service over simulated frames, for the tests of its logic: no uWSGI, no poll.

`offline(...)` builds a `TunerService` from a `TunerSetup` as the driver's factory does,
and a test steps it by hand with `at(frames)`: the state a driver publishes after the last
of `frames` (the window), with the rules' findings a test gives, and no stats socket read
(`poll` None: no peer to check). The FIFO is a path nobody holds (the opening says so in
`opened.fifo_problem`) unless a test gives one; nothing here may poll: an apply that waits
belongs in the real-uWSGI tests (tests/support/tuned.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.service import Mode, TunerService, TunerSetup
from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import Poll
from uwsgitune.pipeline import InstanceState
from uwsgitune.rules.finding import Finding
from uwsgitune.tuner import TunerSettings

ADDRESS = "unix:///run/app-stats.sock"  # the stats the setup names (the frames' is theirs)
NO_FIFO = Path("/nonexistent/uwsgitune-test.fifo")


def offline(
    *,
    mode: Mode = "observe",
    settings: TunerSettings | None = None,
    audit: AuditLog | None = None,
    fifo: Path = NO_FIFO,
    lock_dir: Path | None = None,
    role: str = "uwsgitune watch",
    mono: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> TunerService:
    """A tuner that is never polled (its apply cannot wait on a reload)."""
    chosen = settings or TunerSettings(max_workers=8)
    setup = TunerSetup(
        stats=parse_address(ADDRESS),
        fifo=fifo,
        settings=lambda _slots: chosen,
        mode=mode,
        audit=audit,
        role=role,
        lock_dir=lock_dir,
    )
    return TunerService(setup, _no_poll, mono=mono, wall=wall)


def _no_poll() -> InstanceState:
    raise AssertionError("an offline tuner has no instance to poll")


def at(
    frames: Sequence[Frame], findings: Sequence[Finding] = (), poll: Poll | None = None
) -> InstanceState:
    """The state a driver publishes after the last of `frames` (none: before any poll)."""
    return InstanceState(
        ADDRESS,
        frame=frames[-1] if frames else None,
        poll=poll,
        frames=tuple(frames),
        findings=tuple(findings),
    )
