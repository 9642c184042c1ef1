"""More safety invariants against a real uWSGI: no action right after a reload, the memory
budget caps growth, and a vassal's reload is left to the Emperor (detected from /proc)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import applying, doc, drive, live, manual
from tests.uwsgi_harness import url
from uwsgitune.actuate.reload import under_emperor
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, LoadRun
from uwsgitune.tuner import TunerSettings

pytestmark = pytest.mark.uwsgi


def _load(proc: UwsgiProcess, seconds: float, out: list[LoadResult]) -> threading.Thread:
    run = LoadRun(url(proc, "/io/30"), duration=seconds, timeout=20)
    th = threading.Thread(target=lambda: out.append(asyncio.run(run.closed_loop(6))))
    th.start()
    return th


def test_no_action_before_the_metrics_settle_after_a_reload(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=6, initial=1))
    driver = applying(proc, tmp_path, TunerSettings(max_workers=6, settle_after_reload=3))
    result: list[LoadResult] = []
    th = _load(proc, 6.0, result)
    time.sleep(3.5)  # saturated at 1 worker: the tuner would add at once
    proc.fifo_write("r")
    reloaded = time.monotonic()
    decisions = drive(driver, 2.5)
    th.join()
    assert decisions and all(not d.is_change for d in decisions)
    assert {d.code for d in decisions} <= {"no-rates", "settling", "measuring", "unreachable"}
    assert time.monotonic() - reloaded < 3.5 and live(proc) == 1
    assert result[0].errors == 0


def test_memory_budget_caps_growth(uwsgi: Callable[..., UwsgiProcess], tmp_path: Path) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=6, initial=1))
    rss = 0
    result: list[LoadResult] = []
    th = _load(proc, 9.0, result)
    while not rss:
        time.sleep(0.3)
        rss = max(w.rss for w in doc(proc).workers)
    budget = int(rss * 2.5)  # room for two workers
    settings = TunerSettings(max_workers=6, memory_budget=budget, cooldown_up=1, measure_frames=2)
    driver, lines = applying(proc, tmp_path, settings), list[str]()
    decisions = drive(driver, 7.0, lines)
    th.join()
    assert any(d.action == "up" for d in decisions), "\n".join(lines)
    assert max(d.desired for d in decisions) <= 2 and live(proc) <= 2
    assert result[0].errors == 0


def test_vassal_detection(tmp_path: Path) -> None:
    proc = tmp_path / "proc" / "7"
    proc.mkdir(parents=True)
    (proc / "environ").write_bytes(b"PATH=/bin\0UWSGI_EMPEROR_FD=3\0")
    assert under_emperor(7, tmp_path / "proc")
    assert not under_emperor(os.getpid())
