"""Long waits say what they wait for on a terminal, and nothing off one (cli/progress.py)."""

from __future__ import annotations

import io
import time
from dataclasses import replace

import pytest
from rich.console import Console

from uwsgitune.cli.progress import WaitLine, timed
from uwsgitune.pipeline import InstanceState
from uwsgitune.tuner.result import Waiting

STATE = InstanceState("unix:///x.sock")


def test_off_a_terminal_nothing_is_drawn(capsys: pytest.CaptureFixture[str]) -> None:
    with timed("observing /x.sock for 1s", 0.3):
        time.sleep(0.5)
    line = WaitLine()
    line(replace(STATE, waiting=Waiting("the reload", 0.0, 20.0)))
    line(STATE)
    out = capsys.readouterr()
    assert out.out == "" and out.err == "" and line.said == []


def test_a_wait_shows_what_it_waits_for_and_the_time_left_then_goes() -> None:
    now = [3.0]
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)
    line = WaitLine(mono=lambda: now[0], show=True, console=console)
    what = "the reload: master 12 back with 4 live workers"
    line(replace(STATE, waiting=Waiting(what, 0.0, 20.0)))
    now[0] = 11.0
    line(replace(STATE, waiting=Waiting(what, 0.0, 20.0)))
    line(STATE)  # the wait ended: the line goes
    assert line.said == [f"waiting for {what}: 17s left", f"waiting for {what}: 9s left"]
    assert line._status is None
