"""Move the live worker count through the master FIFO and confirm it from the stats.

Rules (from the measured uWSGI facts): `+`/`-` act at the next 1 s master cycle; `-` only
cheaps an *idle* worker, so the sweep steps with its load paused; an unapplied `-` stays
pending (a debt that swallows later `+`), so we never send another `-` while ours are pending;
extra `+` beyond the free slots are dropped, so resending `+` after a quiet while is safe.
Targets below 1 are refused: a sweep never leaves the instance without a worker.

The commands go through the tuner's guarded writer (actuate/fifo.py), bound to the master
whose stats the sweep reads (`BoundFifo`): the path must be a real FIFO (lstat, no symlink,
opened with O_NOFOLLOW), owned by the master's user and held open by that master (its inode
in /proc/<pid>/fd), opened O_WRONLY|O_NONBLOCK (ENXIO: no master reads it). And, as the
tuner does (actuate/peer.py), nothing is written while `refusal` has a reason: the stats
socket served by another uid than the master's, whose pid the guards trust.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType
from typing import Protocol

from uwsgitune.actuate.fifo import FifoError, FifoShortWrite, MasterFifo
from uwsgitune.core.frame import Frame
from uwsgitune.errors import UwsgituneError
from uwsgitune.pipeline import InstanceDriver
from uwsgitune.sources.procfs import PROC
from uwsgitune.stopsignals import stop_signals

PLUS_RETRY_SECONDS = 3.0  # a `+` not applied after three master cycles is resent
POLL_SECONDS = 0.25


Poll = Callable[[], Frame]  # a fresh poll of the instance (its driver's: `driver_polls`)


class Fifo(Protocol):
    """What we need of a guarded FIFO writer (`BoundFifo`; the tests' fakes)."""

    def write(self, commands: str) -> None: ...


class BoundFifo:
    """Writes commands to one master's FIFO and remembers what it sent."""

    def __init__(
        self,
        path: str | Path,
        master_pid: int,
        proc: Path = PROC,
        refusal: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.path = str(path)
        self.refusal = refusal  # why writing is refused right now (the stats' peer), or None
        self.master_pid = master_pid
        self.sent: list[str] = []  # every command written, for the report and the tests
        self._fifo = MasterFifo(path, proc)

    def check(self) -> None:
        """All guards now, rather than mid-sweep."""
        self._fifo.check(self.master_pid)

    def write(self, commands: str) -> None:
        refused = self.refusal()
        if refused is not None:
            err = FifoError(refused)
            err.code = 1  # not bad input: the instance's stats cannot be trusted
            raise err
        try:
            self._fifo.send(commands, self.master_pid)
        except FifoShortWrite as exc:  # only what went is recorded as sent
            if exc.sent:
                self.sent.append(exc.sent)
            raise
        self.sent.append(commands)


class SweepError(UwsgituneError):
    """The sweep cannot go on; one line naming the thing and the fix."""


def driver_polls(driver: InstanceDriver, timeout: float = 5.0) -> Poll:
    """Fresh polls of `driver`'s instance, made by its own thread: each call asks for one
    and waits for it (a poll is bounded by the driver's own timeout)."""

    def poll() -> Frame:
        state = driver.fresh(timeout)
        if state is None or state.frame is None:
            name = driver.source.name
            raise SweepError(f"stats {name}: no poll came within {timeout:g}s; is it stuck?")
        return state.frame

    return poll


class Interrupted(Exception):
    """Ctrl-C (SIGINT) arrived: stop the load, restore the count, report what was measured."""


class StopFlag:
    """A SIGINT/SIGTERM/SIGHUP handler that only records the signal; loops check it and stop
    cleanly."""

    def __init__(self) -> None:
        self.is_set = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.is_set = True


def sigint_records(flag: StopFlag) -> AbstractContextManager[None]:
    return stop_signals(flag)


class LiveCount:
    """Reads and sets the live worker count of one instance."""

    def __init__(
        self,
        poll: Poll,
        fifo: Fifo,
        *,
        stop: StopFlag | None = None,
        timeout: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.poll = poll
        self.fifo = fifo
        self.stop = stop or StopFlag()
        self.timeout = timeout
        self._sleep = sleep
        self._mono = mono
        self._minus_floor: int | None = None  # our `-` are pending while live > this

    def frame(self) -> Frame:
        frame = self.poll()
        if not frame.ok:
            raise SweepError(f"stats {frame.source}: {frame.error}")
        return frame

    def read(self) -> int:
        return self.frame().live

    def reach(self, target: int, *, interruptible: bool = True) -> int:
        """Send `+`/`-` until the stats show `target` live workers; return it."""
        if target < 1:
            raise SweepError(f"refusing to go to {target} live workers; the floor is 1")
        deadline = self._mono() + self.timeout
        last_plus = -PLUS_RETRY_SECONDS
        live = self.read()
        while live != target:
            if interruptible and self.stop.is_set:
                raise Interrupted
            if self._mono() > deadline:
                raise SweepError(self._stuck(live, target))
            if live < target and self._mono() - last_plus >= PLUS_RETRY_SECONDS:
                self.fifo.write("+" * (target - live))
                last_plus = self._mono()
                self._minus_floor = None  # a `+` cancels a pending `-`
            elif live > target and (self._minus_floor is None or live <= self._minus_floor):
                self.fifo.write("-" * (live - target))
                self._minus_floor = target
            self._sleep(POLL_SECONDS)
            live = self.read()
        self._minus_floor = None
        return live

    def _stuck(self, live: int, target: int) -> str:
        if live > target:
            why = "a `-` only cheaps an idle worker: is other traffic keeping them busy?"
        else:
            why = "is cheaper-algo = manual, and processes large enough?"
        return f"live workers stuck at {live}, wanted {target}, after {self.timeout:g}s; {why}"
