"""Build a `TuneLoop` from paths and a first frame: shared by `uwsgitune tune` and the daemon.

The caller decides what a problem means: `tune --mode apply` exits, the daemon logs it and
carries on (every FIFO write is guarded again anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.listen import RestartCommand
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.loop import Mode, OverrideTarget, TuneLoop
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.actuate.procini import ini_from_proc
from uwsgitune.core.frame import Frame
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import TunerSettings


@dataclass
class Built:
    loop: TuneLoop
    fifo_problem: str | None  # the FIFO failed its checks against the first frame
    lock: ApplyLock | None  # held, for apply mode
    lock_problem: str | None  # apply wanted, someone else holds the lock: mode is observe


def build_loop(
    watch: InstanceWatch,
    first: Frame,
    *,
    fifo: Path,
    override: Path | None,
    ini: Path | None,
    settings: TunerSettings,
    mode: Mode,
    audit: AuditLog | None,
    role: str,
    restart: RestartCommand | None = None,
    peer: PeerCheck | None = None,
) -> Built:
    master = MasterFifo(fifo)
    fifo_problem = None
    try:
        master.check(first.master_pid)
    except FifoError as exc:
        fifo_problem = str(exc)
    lock, lock_problem = None, None
    if mode == "apply":
        lock = ApplyLock(fifo, role)
        lock_problem = lock.acquire()
        if lock_problem is not None:
            lock, mode = None, "observe"
    target = None
    if override is not None:
        target = OverrideTarget(override, ini or ini_from_proc(first.master_pid))
    loop = TuneLoop(watch, master, target, settings, mode, audit, restart=restart, peer=peer)
    loop.lock = lock
    return Built(loop, fifo_problem, lock, lock_problem)
