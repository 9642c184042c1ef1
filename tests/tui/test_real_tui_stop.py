"""Quitting the TUI while its `a` key's reload waits on slow requests, against a real uWSGI:
the screen keeps getting fresh polls during the wait, and on quit the apply ends in its own
thread (rolled back, audited `interrupted`, lock released) before `watch` exits."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.actuate.test_interrupted_apply import busy_workers, check_interrupted, intent_seen
from tests.support.tuned import manual, service, tuned, wait_for
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.launch import UwsgiProcess
from uwsgitune.pipeline import InstanceState
from uwsgitune.tui.app import finish
from uwsgitune.tuner import TunerSettings

pytestmark = pytest.mark.uwsgi


def test_quitting_mid_apply_rolls_back_and_releases(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=4, initial=4))
    audit = AuditLog(tmp_path / "audit.jsonl")
    settings = TunerSettings(min_workers=1, max_workers=2, cpu_saturated=1.0)
    driver = tuned(  # as `watch --fifo` builds it: recommend mode, `a` applies
        proc.stats,
        proc.fifo,
        settings=settings,
        mode="recommend",
        override=override,
        ini=proc.ini,
        audit=audit,
        locks=tmp_path / "locks",
        role="uwsgitune watch",
    )
    tuner = service(driver)
    shown: list[InstanceState] = []
    driver.subscribe(shown.append)  # what the app posts to its screen
    with busy_workers(proc, 4):
        driver.start(name="poll-0")
        try:
            assert wait_for(lambda: _advice(shown) is not None, 30)
            tuner.request("down", _advice(shown) or 0)  # the `a` key, confirmed
            driver.poll_now()
            assert wait_for(lambda: intent_seen(audit.path), 30)
            during = len(shown)
            assert wait_for(lambda: len(shown) >= during + 3, 15)  # the screen moves on
            assert tuner.lock_held and driver.stepping
            quit_at = time.monotonic()
            driver.stop()  # what the app does on quit: the apply halted
            assert finish([driver]) == 0  # what `run_tui` does after the app exits
            took = time.monotonic() - quit_at
        finally:
            driver.stop()
            driver.join(30)
    assert took < 20 and not tuner.lock_held and driver.tuner is None, took
    check_interrupted(audit.path, override)
    assert proc.alive()


def _advice(shown: list[InstanceState]) -> int | None:
    tuning = shown[-1].tuning if shown else None
    d = tuning.decision if tuning is not None else None
    return d.desired if d is not None and d.is_change and d.action == "down" else None
