"""The wall clock jumps: decisions and schedules run on the monotonic clock; the wall clock
only stamps audit records. Two tuners see the same frames, one with a wall clock that jumps
an hour back and forth at every step: they decide the same."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tuner.real import manual
from tests.uwsgi_harness import url
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.loop import TuneLoop
from uwsgitune.core.address import parse_address
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import run_closed
from uwsgitune.pipeline.rules import RulesRunner
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import TunerSettings

pytestmark = pytest.mark.uwsgi


def test_wall_clock_jumps_change_no_decision(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=4, initial=1))
    watch = InstanceWatch(parse_address(proc.stats), interval=0.2)
    jumps = itertools.cycle((3600.0, -3600.0, 86400.0, -86400.0))
    settings = TunerSettings(max_workers=4, interval=0.2, measure_frames=2)

    def loop(wall: Callable[[], float], name: str) -> TuneLoop:
        audit = AuditLog(tmp_path / f"{name}.jsonl")
        fifo = MasterFifo(proc.fifo)
        return TuneLoop(watch, fifo, None, settings, "recommend", audit, wall=wall)

    steady = loop(time.time, "steady")
    jumping = loop(lambda: time.time() + next(jumps), "jumping")
    load = threading.Thread(target=run_closed, args=(url(proc, "/io/30"), 3, 4.0))
    load.start()
    seen, rules = [], RulesRunner()
    try:
        for _ in range(16):
            time.sleep(max(0.0, watch.next_due - time.monotonic()))
            frame = watch.step()
            found = rules.run(watch.window.frames())
            ra, rb = steady.step(frame, found), jumping.step(frame, found)
            a, b = ra.decision, rb.decision
            assert a is not None and b is not None
            assert (a.action, a.code, a.desired) == (b.action, b.code, b.desired)
            seen.append(a.action)
    finally:
        load.join()
    assert "up" in seen  # the load made the decisions non-trivial
    assert watch.next_due - time.monotonic() < 1.0  # the schedule is monotonic
