"""Helpers for the real-uWSGI tests of the tuner service (tests/actuate, and the TUI's, the
daemon's and sweep's tests that tune): a driver with its tuner, the override and the ini it
needs, and a tuner killed in the middle of a reload."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.actuate.restart import RestartCommand
from uwsgitune.actuate.service import Mode, TunerService, TunerSetup, tuner_factory
from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.launch import UwsgiProcess
from uwsgitune.pipeline import InstanceDriver, InstanceState, live_driver
from uwsgitune.sources.stats import read_stats
from uwsgitune.tuner import Decision, TunerSettings


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


def tuned(
    stats: str,
    fifo: str | Path,
    *,
    settings: TunerSettings,
    mode: Mode = "apply",
    override: Path | None = None,
    ini: Path | None = None,
    audit: AuditLog | None = None,
    locks: Path | None = None,
    restart: RestartCommand | None = None,
    interval: float = 0.5,
    trust_tcp: bool = False,
    role: str = "uwsgitune tune",
    mono: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> InstanceDriver:
    """The driver of a real instance with its tuner, as `uwsgitune tune` builds it (the
    rules once per poll, the tuner after them), not yet polling."""
    address = parse_address(stats)
    setup = TunerSetup(
        stats=address,
        fifo=Path(fifo),
        settings=lambda _slots: settings,
        mode=mode,
        override=override,
        ini=ini,
        audit=audit,
        restart=restart,
        role=role,
        peer=PeerCheck(trust_tcp=trust_tcp),
        lock_dir=locks,
    )
    if mono is time.monotonic and wall is time.time:
        return live_driver(address, interval=interval, tuner=tuner_factory(setup), mode=mode)

    def tuner(poll: Callable[[], InstanceState]) -> TunerService:
        return TunerService(setup, poll, mono=mono, wall=wall)

    return live_driver(address, interval=interval, tuner=tuner, mode=mode)


def service(driver: InstanceDriver) -> TunerService:
    """The driver's tuner (a `TunerService`), to look at or to ask; take it before the
    driver is closed (`drive` closes it), which lets it go."""
    assert isinstance(driver.tuner, TunerService)
    return driver.tuner


def drive(
    driver: InstanceDriver,
    seconds: float,
    lines: list[str] | None = None,
    *,
    close: bool = True,
    until: Callable[[list[Decision]], bool] | None = None,
) -> list[Decision]:
    """Run the driver in this thread for `seconds`, as `uwsgitune tune` does: the tuner's
    decisions, in order, each step once. `lines`: gets what the tuner said (its fresh
    notes), as `uwsgitune tune` prints them. `until`: stop sooner, once the decisions so far
    hold all a test looks at (the same `seconds` bound it). Then the tuner is closed (its
    lock released) as `tune` closes it, unless not `close` (the caller calls
    `driver.close()`)."""
    out: list[Decision] = []
    said: list[object] = [None]

    def collect(state: InstanceState) -> None:
        result = state.tuning
        if result is None or result is said[0]:  # a poll mid-apply: the same result
            return
        said[0] = result
        if result.decision is not None:
            out.append(result.decision)
        if lines is not None:
            lines.extend(n.text for n in result.notes if n.fresh)

    driver.subscribe(collect)
    try:
        done = None if until is None else (lambda _state: until(out))
        driver.run(until=done, deadline=time.monotonic() + seconds)
    finally:
        if close:
            driver.close()
    return out


def applying(
    proc: UwsgiProcess,
    tmp_path: Path,
    settings: TunerSettings,
    mono: Callable[[], float] = time.monotonic,
) -> InstanceDriver:
    """`tune --mode apply` on a `manual` instance: its override `tmp_path/o.ini`, the audit
    log `audit_of(tmp_path)`, the apply lock in `tmp_path/locks`."""
    return tuned(
        proc.stats,
        proc.fifo,
        settings=settings,
        override=tmp_path / "o.ini",
        ini=proc.ini,
        audit=audit_of(tmp_path),
        locks=tmp_path / "locks",
        mono=mono,
    )


def audit_of(tmp_path: Path) -> AuditLog:
    """The audit log `applying` writes."""
    return AuditLog(tmp_path / "audit.jsonl")


def poller(stats: str, interval: float = 0.25) -> Callable[[], Frame]:
    """Polls of a real instance through a driver's stages, one per call (for the actuators'
    own waits, which poll through whatever function they are given)."""
    driver = live_driver(parse_address(stats), interval=interval, rules=False)

    def poll() -> Frame:
        frame = driver.poll_in_step().frame
        assert frame is not None
        return frame

    return poll


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

    def poll(self) -> Callable[[], Frame]:
        return poller(self.stats, interval=0.5)

    def backlog(self) -> int | None:
        frame = self.poll()()
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
