"""Issue 36.7 for the TUI's `a`, against a real uWSGI: `tune` SIGKILLed between its reload's
`p` and its `r` leaves the pool paused and its mark in the apply lock; the TUI's confirmed
apply takes the lock next and resumes the pool before anything else (and applies nothing on
top: the advice it confirmed was read before the pause)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import doc, kill_mid_reload, manual, service, tuned, wait_for
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.lock import lock_path
from uwsgitune.launch import UwsgiProcess
from uwsgitune.pipeline import InstanceDriver, InstanceState
from uwsgitune.tui.app import WatchApp
from uwsgitune.tui.screens import ConfirmScreen
from uwsgitune.tuner import TunerSettings

pytestmark = pytest.mark.uwsgi


async def _step(driver: InstanceDriver) -> InstanceState:
    """One poll, in a thread, as the TUI's poll thread makes it."""
    return await asyncio.to_thread(lambda: driver.run(until=lambda _state: True))


async def _advice(driver: InstanceDriver) -> InstanceState:
    """Polls until the tuner advises a change."""
    for _ in range(40):
        state = await _step(driver)
        d = state.tuning.decision if state.tuning is not None else None
        if d is not None and d.is_change:
            return state
    raise AssertionError("no advice to change in 10 s")


async def test_the_apply_key_resumes_a_pool_a_killed_tune_left_paused_first(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    override, locks = tmp_path / "override.ini", tmp_path / "locks"
    proc = uwsgi(**manual(override, processes=4, initial=1))
    audit = AuditLog(tmp_path / "audit.jsonl")
    settings = TunerSettings(min_workers=2, max_workers=4)  # 1 live: "up 1 → 2 live workers"
    driver = tuned(
        proc.stats,
        proc.fifo,
        settings=settings,
        mode="recommend",
        override=override,
        ini=proc.ini,
        audit=audit,
        locks=locks,
        interval=0.25,
        role="uwsgitune watch",
    )
    app = WatchApp([driver], autopoll=False)
    async with app.run_test(size=(160, 50)) as pilot:
        app.show(0, await _advice(driver))
        kill_mid_reload(proc, locks)  # the screen still shows the advice read before
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        state = await _step(driver)  # the poll thread serves the request
        app.show(0, state)
        await pilot.pause()
    assert state.tuning is not None
    asked = state.tuning.requested
    assert asked is not None and asked.kind == "resumed", asked
    assert asked.text.startswith(
        "not applied: resumed (`p`) the 1 workers a reload cut short left paused"
    ), asked
    assert b"resuming workers" in proc.log.read_bytes()
    assert wait_for(lambda: all(w.status != "pause" for w in doc(proc).live_workers))
    assert len(doc(proc).live_workers) == 1  # nothing applied on top of the resume
    assert "reload master" not in lock_path(proc.fifo, locks).read_text()  # the mark went
    (record,) = [r for r in audit.records() if r.event == "change"]
    assert (record.action, record.result) == ("resume", "sent")
    assert service(driver).lock is None  # taken for that apply only
