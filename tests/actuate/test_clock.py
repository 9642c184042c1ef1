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

from tests.support.tuned import manual
from tests.uwsgi_harness import url
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.service import TunerService, TunerSetup
from uwsgitune.core.address import parse_address
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import run_closed
from uwsgitune.pipeline import InstanceState, live_driver
from uwsgitune.tuner import Decision, TunerSettings

pytestmark = pytest.mark.uwsgi


def test_wall_clock_jumps_change_no_decision(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=4, initial=1))
    address = parse_address(proc.stats)
    driver = live_driver(address, interval=0.2)  # the rules, no tuner of its own
    jumps = itertools.cycle((3600.0, -3600.0, 86400.0, -86400.0))
    settings = TunerSettings(max_workers=4, interval=0.2, measure_frames=2)

    def tuner(wall: Callable[[], float], name: str) -> TunerService:
        audit = AuditLog(tmp_path / f"{name}.jsonl")
        setup = TunerSetup(
            address, Path(proc.fifo), lambda _slots: settings, "recommend", audit=audit
        )
        return TunerService(setup, driver.poll_in_step, wall=wall)

    steady = tuner(time.time, "steady")
    jumping = tuner(lambda: time.time() + next(jumps), "jumping")
    pairs: list[tuple[Decision | None, Decision | None]] = []

    def both(state: InstanceState) -> None:  # the same published state to each tuner
        ra, rb = steady.step(state), jumping.step(state)
        pairs.append((ra.decision if ra else None, rb.decision if rb else None))

    driver.subscribe(both)
    load = threading.Thread(target=run_closed, args=(url(proc, "/io/30"), 3, 4.0))
    load.start()
    try:
        driver.run(until=lambda _state: len(pairs) >= 16, deadline=time.monotonic() + 60)
    finally:
        load.join()
    seen = []
    for a, b in pairs:
        assert a is not None and b is not None
        assert (a.action, a.code, a.desired) == (b.action, b.code, b.desired)
        seen.append(a.action)
    assert len(seen) == 16
    assert "up" in seen  # the load made the decisions non-trivial
    assert driver.next_due - time.monotonic() < 1.0  # the schedule is monotonic
