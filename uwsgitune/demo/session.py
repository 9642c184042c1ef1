"""`uwsgitune demo`: the bundled app under a real uWSGI, a changing load, and the TUI on it.

Everything it starts it stops, whatever the exit: `q`, Ctrl-C, SIGINT/SIGTERM/SIGHUP, or a
crash. `DemoSession.cleanup` is idempotent and runs from `finally` and from `atexit`; while
it runs, further signals are only recorded, so a second Ctrl-C cannot cut it short.
"""

from __future__ import annotations

import atexit
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.service import TunerSetup, tuner_factory
from uwsgitune.core.address import parse_address
from uwsgitune.core.logline import log_format
from uwsgitune.demo import webapp
from uwsgitune.demo.load import DemoLoad
from uwsgitune.launch import IniValue, UwsgiProcess, free_port
from uwsgitune.pipeline import InstanceDriver, LatencyStage, live_driver
from uwsgitune.tuner import TunerSettings

LISTEN = 16  # small, so that the overload phase visibly fills the queue
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def demo_options(
    workdir: Path, port: int, processes: int, live: int, latency: str | None = None
) -> dict[str, IniValue]:
    """Cheaper mode with the manual algorithm: `live` workers of `processes`, ours to change;
    with `latency` (HOST:PORT), the request log sent there as `doctor --latency` has it."""
    logging: dict[str, IniValue] = {"disable-logging": True}
    if latency is not None:
        logging = {"log-format": log_format(None), "req-logger": f"socket:{latency}"}
    return {
        "master": True,
        "http-socket": f"127.0.0.1:{port}",
        "wsgi-file": str(Path(webapp.__file__).resolve()),
        "processes": processes,
        "cheaper": 1,
        "cheaper-initial": live,
        "cheaper-algo": "manual",
        "listen": LISTEN,
        "stats": str(workdir / "stats.sock"),
        "master-fifo": str(workdir / "fifo"),
        "memory-report": True,
        **logging,
        "harakiri": 60,
    }


class DemoSession:
    def __init__(self, *, duration: float, load: bool, processes: int = 8, live: int = 4) -> None:
        self.duration = duration
        self.with_load = load
        self.processes = processes
        self.live = live
        self.workdir: Path | None = None
        self.uwsgi: UwsgiProcess | None = None
        self.load: DemoLoad | None = None
        self.url = ""
        self.latency: LatencyStage | None = None
        self._cleaned = False

    def start(self) -> UwsgiProcess:
        self.workdir = Path(tempfile.mkdtemp(prefix="uwsgitune-demo-", dir="/tmp"))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        # the request log comes to a port the kernel picks: the TUI shows its percentiles
        self.latency = LatencyStage(("127.0.0.1", 0))
        opts = demo_options(
            self.workdir, port, self.processes, self.live, latency=self.latency.address
        )
        # uWSGI runs in its own session (a Ctrl-C reaches us, and we stop it in order); if we
        # are killed outright, the kernel interrupts it for us.
        self.uwsgi = UwsgiProcess(self.workdir, opts, name="demo", die_with_parent=True)
        self.uwsgi.start()
        if self.with_load:
            self.load = DemoLoad(self.url, self.duration).start()
        return self.uwsgi

    def driver(self, interval: float) -> InstanceDriver:
        """The instance's driver with the tuner beside the TUI, as `watch --fifo` has it
        (recommend mode: it advises at every poll; `a` applies, confirmed). Its audit log
        and apply lock live in the demo's directory, removed with it."""
        assert self.uwsgi is not None and self.workdir is not None
        address = parse_address(self.uwsgi.stats)
        setup = TunerSetup(
            stats=address,
            fifo=self.workdir / "fifo",
            settings=lambda slots: TunerSettings(
                min_workers=1, max_workers=slots or self.processes, interval=interval
            ),
            mode="recommend",
            audit=AuditLog(self.workdir / "audit.jsonl"),
            role="uwsgitune demo",
            lock_dir=self.workdir / "locks",
        )
        tuner = tuner_factory(setup)
        return live_driver(
            address, interval=interval, tuner=tuner, mode="recommend", latency=self.latency
        )

    def status(self) -> str:
        if self.load is None:
            return f"demo: no load; try: curl {self.url}/cpu/50"
        return self.load.status()

    def cleanup(self) -> None:
        """Stop the load, stop uWSGI (FIFO q, then SIGINT, SIGKILL last), remove the temp dir."""
        if self._cleaned:
            return
        self._cleaned = True
        previous = {sig: signal.signal(sig, _record) for sig in SIGNALS}
        try:
            if self.load is not None:
                self.load.stop()
            if self.uwsgi is not None:
                self.uwsgi.stop()
            if self.latency is not None:
                self.latency.close()
        finally:
            if self.workdir is not None:
                shutil.rmtree(self.workdir, ignore_errors=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _record(signum: int, frame: FrameType | None) -> None:
    """During cleanup a signal is noted and ignored: cleanup finishes first."""


class _Interrupted(Exception):
    pass


def _raise(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted(signum)


def run_session(
    session: DemoSession, show: Callable[[DemoSession], int], on_signal: Any = _raise
) -> int:
    """Start, show, clean up. SIGTERM/SIGHUP before the TUI runs end it like Ctrl-C."""
    atexit.register(session.cleanup)
    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS if sig != signal.SIGINT}
    try:
        session.start()
        return show(session)
    except _Interrupted:
        return 130
    finally:
        session.cleanup()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        atexit.unregister(session.cleanup)
