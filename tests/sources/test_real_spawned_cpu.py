"""A real uWSGI: workers spawned by `+` between two polls count their CPU in the instance's
and in their own CPU % (samples.BORN). Each worker of this app loads it itself (`lazy-apps`)
and spends 0.4 s of CPU doing so; the poll after `+++` must see the three spawns' 1.2 s,
where the instance's CPU left out every process the previous host sample lacked (about 0),
and each new worker's CPU % was blank."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sources.test_live import Watch, wait_for
from tests.uwsgi_harness import loading_app
from uwsgitune.launch import UwsgiProcess
from uwsgitune.sources.procfs import proc_sample

pytestmark = pytest.mark.uwsgi

BURN = 0.4  # CPU seconds each worker spends loading the app
LOAD = f"""\
import time

_end = time.process_time() + {BURN}
while time.process_time() < _end:  # CPU, not wall time: the same on a busy machine
    pass
"""


def test_workers_spawned_between_polls_count_their_cpu(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(
        wsgi_file=loading_app(tmp_path / "burn.py", LOAD),
        lazy_apps=True,
        processes=4,
        cheaper=1,
        cheaper_initial=1,
        cheaper_algo="manual",
    )
    first = wait_for(proc.stats, lambda d: len(d.live_workers) == 1)
    old = {w.pid for w in first.live_workers}
    _loaded(old)
    watch = Watch(proc.stats)
    assert watch.frame().live == 1
    proc.fifo_write("+++")
    doc = wait_for(proc.stats, lambda d: len(d.live_workers) == 4)
    spawned = {w.pid for w in doc.live_workers} - old
    assert len(spawned) == 3
    _loaded(spawned)  # each has spent its BURN
    f = watch.frame()
    assert f.kind == "ok" and f.live == 4 and f.dt and f.instance_cpu_cores is not None
    used = f.instance_cpu_cores * f.dt
    assert used >= 3 * BURN * 0.8, f"the instance used {used:.2f} s of CPU in {f.dt:.1f} s"
    # Each new worker's own CPU %, on this first poll that sees it: its BURN in the interval
    # (blank, before, until the poll after).
    new = [w for w in f.workers if w.pid in spawned]
    assert len(new) == 3
    for w in new:
        assert w.cpu_pct is not None and w.cpu_pct * f.dt / 100 >= BURN * 0.8, (w.pid, w.cpu_pct)


def _loaded(pids: set[int], timeout: float = 30.0) -> None:
    """Wait until each process has spent its BURN of CPU (its app loaded; stat counts in
    ticks, so a little less may show)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        samples = [proc_sample(pid) for pid in pids]
        if all(s is not None and s.cpu_seconds >= 0.9 * BURN for s in samples):
            return
        time.sleep(0.1)
    raise AssertionError(f"workers {sorted(pids)} never finished loading the app")
