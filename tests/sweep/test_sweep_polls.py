"""The sweep polls its instance only when it asks, against a real uWSGI: a step's closing
poll derives its rates (CPU, mean response time) from the step's opening one, so the
server's figures cover the same seconds as the client's window, and no poll of a schedule
competes with the built-in load generator for the sweep's process."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sweep.test_real import sweep_cmd
from uwsgitune.cli import sweep
from uwsgitune.cli.main import build_parser
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi


def test_a_steps_closing_poll_derives_from_its_opening_one(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(processes=4, cheaper=1, cheaper_algo="manual", cheaper_initial=2)
    argv = sweep_cmd(proc, "/io/20", "1..2", tmp_path / "out")[3:]  # after `python -m uwsgitune`
    target, _frame = sweep._instance(build_parser().parse_args(argv), 2)
    try:
        opening = target.poll()
        time.sleep(2.0)  # a step's measuring window, shortened
        closing = target.poll()
    finally:
        target.driver.stop()
        target.driver.join(10)
    assert opening.ok and closing.ok and closing.dt is not None
    assert closing.dt >= 1.9, closing.dt  # the rates span the window, not a scheduled poll's
