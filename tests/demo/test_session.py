"""The demo's instance comes with the tuner beside the TUI, as `watch --fifo` has it: a new
user sees the advice and `a` in the demo. Everything it writes stays in the demo's
directory, removed on exit. A real uWSGI: the FIFO is proved against its master."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from uwsgitune.demo.session import DemoSession
from uwsgitune.pipeline import InstanceState

pytestmark = pytest.mark.uwsgi


def _opened(state: InstanceState) -> bool:
    return state.tuning is not None and state.tuning.opened is not None


def test_the_demo_has_the_tuner_beside_the_tui_and_leaves_nothing_behind() -> None:
    session = DemoSession(duration=30, load=False)
    workdir: Path | None = None
    try:
        session.start()
        workdir = session.workdir
        driver = session.driver(0.5)
        state = driver.run(until=_opened, deadline=time.monotonic() + 30)
        driver.close()
        assert state.mode == "recommend"
        assert state.tuning is not None and state.tuning.opened is not None
        opened = state.tuning.opened
        assert (opened.mode, opened.problems) == ("recommend", ())  # the FIFO proved
        assert state.tuning.decision is not None  # it advises from the first poll
    finally:
        session.cleanup()
    assert workdir is not None and not workdir.exists()
