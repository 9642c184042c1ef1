"""Helpers for the real-uWSGI tests of the tuner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from uwsgitune.actuate.loop import TuneLoop
from uwsgitune.core.address import parse_address
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.launch import UwsgiProcess
from uwsgitune.pipeline.rules import RulesRunner
from uwsgitune.sources.stats import read_stats
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import Decision


def doc(proc: UwsgiProcess) -> StatsDoc:
    return parse_stats(read_stats(parse_address(proc.stats), timeout=2.0))


def live(proc: UwsgiProcess) -> int:
    return len(doc(proc).live_workers)


def wait_for(check: Callable[[], bool], timeout: float = 8.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.2)
    return check()


def manual(override: Path, processes: int = 4, initial: int = 2) -> dict[str, object]:
    """Options of an instance ready to be tuned, whose ini ends with the override include."""
    override.write_text("[uwsgi]\n")
    return {
        "processes": processes,
        "cheaper": 1,
        "cheaper_initial": initial,
        "cheaper_algo": "manual",
        "ini": str(override),
    }


def drive(loop: TuneLoop, seconds: float, lines: list[str] | None = None) -> list[Decision]:
    """Poll and step the loop at its interval for `seconds`, running the rules once per poll
    as `uwsgitune tune` does; the decisions, in order. `lines`: gets what the loop said (its
    fresh notes), as `uwsgitune tune` prints them."""
    out: list[Decision] = []
    end, rules, since = time.monotonic() + seconds, RulesRunner(), None
    while time.monotonic() < end:
        time.sleep(max(0.0, loop.watch.next_due - time.monotonic()))
        frame = loop.watch.step()
        result = loop.step(frame, rules.run(loop.watch.window.frames(), since))
        since = result.listen_since
        assert result.decision is not None
        out.append(result.decision)
        if lines is not None:
            lines += [n.text for n in result.notes if n.fresh]
    return out


def read_pid(pidfile: Path) -> int | None:
    """The pid a daemonized uWSGI wrote (`pidfile`), or None."""
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def stop_pid(pid: int, grace: float = 15.0) -> None:
    """Stop a daemonized uWSGI we started: SIGINT (SIGTERM would be a reload), then SIGKILL."""
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    end = time.monotonic() + grace
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


class PidfileUwsgi:
    """A daemonized uWSGI (`daemonize2`, `pidfile`) that a restart script stops and starts;
    mixed into the tests' dataclasses, which give `pidfile` and `stats`."""

    pidfile: Path
    stats: str

    def pid(self) -> int | None:
        return read_pid(self.pidfile)

    def watch(self) -> InstanceWatch:
        return InstanceWatch(parse_address(self.stats), interval=0.5)

    def backlog(self) -> int | None:
        frame = self.watch().step()
        found = [s.backlog for s in frame.sockets if s.backlog]
        return found[0] if frame.ok and found else None


MID_RELOAD = """
import sys, time
from pathlib import Path
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.lock import ApplyLock
fifo, locks, pid = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
lock = ApplyLock(fifo, "uwsgitune tune", locks)
assert lock.acquire() is None
lock.mark_reload(pid, time.time())  # what the Reloader does before its `p` (reload.py)
MasterFifo(fifo).send("p", pid)
print("paused", flush=True)
time.sleep(120)
"""


def kill_mid_reload(proc: UwsgiProcess, locks: Path) -> None:
    """A `tune` SIGKILLed between its reload's `p` and its `r`: it took the apply lock in
    `locks`, marked the reload there as the Reloader does, sent `p`, and died. The pool is
    left paused (every live worker reads `pause` when this returns), the mark in the lock."""
    pid = doc(proc).pid
    holder = subprocess.Popen(
        [sys.executable, "-c", MID_RELOAD, str(proc.fifo), str(locks), str(pid)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"paused\n"
    finally:
        holder.kill()  # the holder this helper started, by its handle: SIGKILL
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    assert wait_for(lambda: all(w.status == "pause" for w in doc(proc).live_workers))
    assert f"reload master {pid} at" in "".join(p.read_text() for p in locks.glob("*.lock"))
