"""Quitting the TUI while its `a` key's reload waits on slow requests, against a real uWSGI:
the screen keeps getting fresh polls during the wait, and on quit the apply ends in its own
thread (rolled back, audited `interrupted`, lock released) before `watch` exits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from uwsgitune.actuate.loop import OverrideTarget, TuneLoop
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tui.polling import PollLoop
from uwsgitune.tui.tuning import TuiTuner, finish_applies

from tests.faults.test_interrupted_apply import busy_workers, check_interrupted, intent_seen
from tests.tuner.real import manual, wait_for
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.core.address import parse_address
from uwsgitune.launch import UwsgiProcess
from uwsgitune.pipeline import InstanceState, pipeline_for
from uwsgitune.tuner import TunerSettings

pytestmark = pytest.mark.uwsgi


def test_quitting_mid_apply_rolls_back_and_releases(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=4, initial=4))
    audit = AuditLog(tmp_path / "audit.jsonl")
    watch = InstanceWatch(parse_address(proc.stats), interval=0.5)
    settings = TunerSettings(min_workers=1, max_workers=2, cpu_saturated=1.0)
    target = OverrideTarget(override, proc.ini)
    loop = TuneLoop(watch, MasterFifo(proc.fifo), target, settings, "recommend", audit)
    tuner = TuiTuner(loop, ApplyLock(proc.fifo, "uwsgitune watch", tmp_path / "locks"))
    shown: list[InstanceState] = []
    poller = PollLoop(0, pipeline_for(watch, tuner=tuner.advise), lambda _i, s: shown.append(s))
    loop.poll = poller.poll_and_show  # what the app wires for an instance with a tuner
    thread = threading.Thread(target=poller.run)
    with busy_workers(proc, 4):
        thread.start()
        try:
            assert wait_for(lambda: _advice(shown) is not None, 30)
            tuner.request("down", _advice(shown) or 0)  # the `a` key, confirmed
            assert wait_for(lambda: intent_seen(audit.path), 30)
            during = len(shown)
            assert wait_for(lambda: len(shown) >= during + 3, 15)  # the screen moves on
            assert tuner.lock.held
            quit_at = time.monotonic()
            poller.stop()
            tuner.halt()  # what the app does on quit
            assert finish_applies([tuner]) == 0
            took = time.monotonic() - quit_at
        finally:
            poller.stop()
            tuner.halt()
            thread.join(30)
    assert took < 20 and not tuner.lock.held, took
    check_interrupted(audit.path, override)
    assert proc.alive()


def _advice(shown: list[InstanceState]) -> int | None:
    tuning = shown[-1].tuning if shown else None
    d = tuning.decision if tuning is not None else None
    return d.desired if d is not None and d.is_change and d.action == "down" else None
