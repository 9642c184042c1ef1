"""The demo's instance comes with the tuner beside the TUI, as `watch --fifo` has it: a new
user sees the advice and `a` in the demo, and the live latency of its requests (the
instance sends its request log). Everything it writes stays in the demo's directory, removed
on exit. A real uWSGI: the FIFO and the log's sender are proved against its master."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from uwsgitune.demo.session import DemoSession
from uwsgitune.loadgen import LoadRun
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
        assert state.mode == "recommend"
        assert state.tuning is not None and state.tuning.opened is not None
        opened = state.tuning.opened
        assert (opened.mode, opened.problems) == ("recommend", ())  # the FIFO proved
        assert state.tuning.decision is not None  # it advises from the first poll
        # stamped as the demo's load stamps them (a front proxy's `t=${msec}`)
        run = LoadRun(f"{session.url}/cpu/2", duration=20, max_requests=40, stamp=True)
        sent = asyncio.run(run.closed_loop(2))
        assert sent.ok == 40
        state = driver.run(until=_logged(40), deadline=time.monotonic() + 20)
        driver.close()
        latency = state.latency
        assert latency is not None and latency.lines == 40 and latency.trusted
        assert latency.long.service is not None and latency.long.service.p50_ms >= 1.0
        assert latency.long.queue is not None  # the stamps split the wait
        assert latency.long.stamps.format is not None and "nginx" in latency.long.stamps.format
    finally:
        session.cleanup()
    assert workdir is not None and not workdir.exists()
    assert session.latency is not None and session.latency.receiver.fileno() == -1


def _logged(n: int) -> Callable[[InstanceState], bool]:
    return lambda s: s.latency is not None and s.latency.lines >= n
