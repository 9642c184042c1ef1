"""Sweep's FIFO writer: the tuner's guarded writer (`uwsgitune.actuate.fifo`), bound to the
master whose stats the sweep reads.

Every write goes through the same guards as the tuner's: the path must be a real FIFO (lstat,
no symlink, opened with O_NOFOLLOW), owned by the master's user and held open by that master
(its inode in /proc/<pid>/fd), opened O_WRONLY|O_NONBLOCK (ENXIO: no master reads it).
And, as the tuner does (`uwsgitune.actuate.peer`), nothing is written while `refusal` has a
reason: the stats socket served by another uid than the master's, whose pid the guards trust.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from uwsgitune.actuate.fifo import FifoError, FifoShortWrite
from uwsgitune.actuate.fifo import MasterFifo as GuardedFifo

__all__ = ["FifoError", "MasterFifo"]


class MasterFifo:
    """Writes commands to one master's FIFO and remembers what it sent."""

    def __init__(
        self,
        path: str | Path,
        master_pid: int,
        proc: Path = Path("/proc"),
        refusal: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.path = str(path)
        self.refusal = refusal  # why writing is refused right now (the stats' peer), or None
        self.master_pid = master_pid
        self.sent: list[str] = []  # every command written, for the report and the tests
        self._fifo = GuardedFifo(path, proc)

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
