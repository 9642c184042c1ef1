"""A vassal of a real Emperor: the override reload works, and the Emperor keeps its vassal.

Measured first: the Emperor reloads a vassal when the vassal's own ini changes, not when a
file that ini includes changes, so the tuner sends `r` to a vassal as to any instance.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.tuned import poller, wait_for
from tests.uwsgi_harness import base_options
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.override import Override
from uwsgitune.actuate.reload import Limits, Reloader, under_emperor
from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.launch import find_uwsgi, render_ini
from uwsgitune.sources.stats import read_stats

pytestmark = pytest.mark.uwsgi
# the vassal's ini, its override, its polls, the Emperor
Vassal = tuple[Path, Path, Callable[[], Frame], subprocess.Popen[bytes]]


@pytest.fixture
def vassal() -> Iterator[Vassal]:
    work = Path(f"/tmp/uwt-emp-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    (work / "vassals").mkdir(parents=True)
    override = work / "override.ini"
    override.write_text("[uwsgi]\n")
    opts = base_options(work, processes=4, cheaper=1, cheaper_initial=1, cheaper_algo="manual")
    opts["ini"] = str(override)
    ini = work / "vassals" / "app.ini"
    ini.write_text(render_ini(opts))
    argv = [find_uwsgi(), "--emperor", str(work / "vassals")]
    argv += ["--emperor-stats", str(work / "emperor.sock")]
    with (work / "log").open("wb") as log:
        emperor = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    poll = poller(str(work / "stats.sock"))
    try:
        assert wait_for(lambda: poll().ok, 20), (work / "log").read_text()[-2000:]
        yield ini, override, poll, emperor
    finally:
        emperor.send_signal(signal.SIGINT)  # the Emperor stops its vassals, then itself
        try:
            emperor.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(emperor.pid, signal.SIGKILL)
            emperor.wait(5)
        subprocess.run(["rm", "-rf", str(work)], check=False)


def test_override_reload_of_a_vassal(
    vassal: Vassal,
) -> None:
    ini, override, poll, emperor = vassal
    before = poll()
    assert under_emperor(before.master_pid)
    assert before.live == 1 and before.workers_max == 4
    text, mtime = ini.read_text(), ini.stat().st_mtime_ns
    reloader = Reloader(MasterFifo(ini.parent.parent / "fifo"), override, ini, poll)
    out = reloader.apply(Override(6, 1, 3), before, Limits(4096), deadline=15)
    assert out.ok and "Emperor vassal" in out.detail, out.detail
    after = poll()
    assert after.master_pid == before.master_pid  # reloaded in place, not respawned
    assert after.workers_max == 6 and after.live == 3
    assert ini.read_text() == text and ini.stat().st_mtime_ns == mtime  # never touched
    emp = read_stats(parse_address(str(ini.parent.parent / "emperor.sock")), timeout=2.0)
    assert b'"app.ini"' in emp and emperor.poll() is None  # the Emperor keeps its vassal
