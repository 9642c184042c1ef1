"""`uwsgitune sweep --threads` end to end against real uWSGI instances (issue 17).

Physics-level assertions only (the 2 cores are shared): a CPU-bound route gains nothing from
threads (one GIL per process), so the cheapest cell near the best has one thread; an IO-bound
route gains from both, so it needs more concurrency than CPUs. After every sweep, and after
every refused one, the instance runs with the processes, threads and live workers it had.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.tuned import doc, manual
from tests.sweep.test_real import one_line_error
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi
Start = Callable[..., UwsgiProcess]
SHORT = ["--step-seconds", "2", "--warmup", "1", "--repeat", "1"]
ROOT = Path(__file__).resolve().parents[2]


def threaded(uwsgi: Start, tmp_path: Path, *, enable: bool = True, **opts: Any) -> UwsgiProcess:
    """An instance in cheaper mode whose ini ends with the override include."""
    first = {"enable_threads": True} if enable else {}
    return uwsgi(**first, **manual(tmp_path / "override.ini", processes=4, initial=2), **opts)


def state(proc: UwsgiProcess) -> tuple[int, int, int]:
    """(processes, threads per worker, live workers) from the stats."""
    d = doc(proc)
    return len(d.workers), len(d.workers[0].cores), len(d.live_workers)


def grid_cli(proc: UwsgiProcess, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "uwsgitune", "sweep", "--stats", proc.stats, "--fifo", proc.fifo]
    cmd += ["--ini", str(proc.ini), "--override", str(tmp_path / "override.ini")]
    cmd += ["--out", str(tmp_path / "out"), *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=env)


def grid(proc: UwsgiProcess, tmp_path: Path, path: str, *args: str) -> dict[str, Any]:
    base = ["--url", url(proc, path), "--allow-reload", "--concurrency", "16", *SHORT]
    res = grid_cli(proc, tmp_path, *base, *args)
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert (tmp_path / "out" / "sweep.svg").read_text().count("<rect") > 4  # the heat map
    return out


def test_cpu_bound_grid_picks_one_thread_and_restores(uwsgi: Start, tmp_path: Path) -> None:
    proc = threaded(uwsgi, tmp_path)
    before = state(proc)
    d = grid(proc, tmp_path, "/cpu/10", "--workers", "1,2", "--threads", "1,4", "--within", "15")
    rec = d["recommendation"]
    assert rec["threads"] == 1 and rec["processes"] is not None, (rec, d["axis"])
    assert d["axis"]["pays"] in ("processes", "neither"), d["axis"]
    assert {(p["workers"], p["threads"]) for p in d["points"]} == {(1, 1), (2, 1), (1, 4), (2, 4)}
    assert all(p["gen_cpu_cores"] is not None for p in d["points"])
    assert d["restored"] and state(proc) == before == (4, 1, 2)
    assert (tmp_path / "override.ini").read_text() == "[uwsgi]\n"


def test_io_bound_grid_needs_more_than_the_cpus(uwsgi: Start, tmp_path: Path) -> None:
    proc = threaded(uwsgi, tmp_path)
    d = grid(proc, tmp_path, "/io/50", "--workers", "1,2", "--threads", "1,4")
    rec = d["recommendation"]
    cpus = d["effective_cpus"] or 2
    assert rec["processes"] * rec["threads"] > cpus, (rec, d["axis"])
    assert d["axis"]["pays"] in ("threads", "both"), d["axis"]
    assert d["restored"] and state(proc) == (4, 1, 2)


def test_refused_grids_are_one_line_and_change_nothing(uwsgi: Start, tmp_path: Path) -> None:
    proc = threaded(uwsgi, tmp_path)
    base = ["--url", url(proc, "/"), "--workers", "1,2"]
    one_line_error(grid_cli(proc, tmp_path, *base, "--threads", "1,4"), "--allow-reload")
    bad = grid_cli(proc, tmp_path, *base, "--threads", "0,4", "--allow-reload")
    one_line_error(bad, "threads = 0")
    assert state(proc) == (4, 1, 2) and doc(proc).workers[0].requests == 0
    plain = tmp_path / "plain"
    plain.mkdir()
    proc2 = threaded(uwsgi, plain, enable=False)
    base2 = ["--url", url(proc2, "/"), "--workers", "1,2", "--allow-reload"]
    one_line_error(grid_cli(proc2, plain, *base2, "--threads", "1,2"), "enable-threads")
    assert state(proc2) == (4, 1, 2)
