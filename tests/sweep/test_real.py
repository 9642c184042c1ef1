"""`uwsgitune sweep` end to end against real uWSGI instances of known shape.

Physics-level assertions only: the 2 cores are shared with other test runs, so numbers move.
CPU-bound (/cpu/10) must land near the effective CPUs, IO-bound (/io/50) far above them, and
the original live count must come back at the end and after Ctrl-C.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import PIPE, STDOUT
from typing import Any

import pytest

from tests.uwsgi_harness import url
from uwsgitune.core.address import parse_address
from uwsgitune.core.model import parse_stats
from uwsgitune.launch import UwsgiProcess
from uwsgitune.sources.stats import read_stats

pytestmark = pytest.mark.uwsgi
Start = Callable[..., UwsgiProcess]
SHORT = ["--step-seconds", "2", "--warmup", "1", "--repeat", "1"]


def live(proc: UwsgiProcess) -> int:
    return len(parse_stats(read_stats(parse_address(proc.stats), timeout=2.0)).live_workers)


def sweep_cmd(proc: UwsgiProcess, path: str, workers: str, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uwsgitune",
        "sweep",
        "--url",
        url(proc, path),
        "--stats",
        proc.stats,
        "--fifo",
        proc.fifo,
        "--workers",
        workers,
        "--out",
        str(out),
        *extra,
    ]


def sweep(proc: UwsgiProcess, path: str, workers: str, out: Path, *extra: str) -> dict[str, Any]:
    cmd = sweep_cmd(proc, path, workers, out, *extra)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    doc: dict[str, Any] = json.loads((out / "sweep.json").read_text())
    assert (out / "sweep.svg").read_text().startswith("<svg")
    return doc


def test_cpu_bound_lands_near_the_cpus_and_restores(uwsgi: Start, tmp_path: Path) -> None:
    proc = uwsgi(processes=8, cheaper=1, cheaper_algo="manual", cheaper_initial=2)
    doc = sweep(proc, "/cpu/10", "1..6", tmp_path, "--concurrency", "12", *SHORT)
    rec = doc["recommendation"]
    assert rec["workers"] is not None and rec["workers"] <= 3, rec
    assert doc["shape"]["kind"] != "io-bound", doc["shape"]
    assert [p["workers"] for p in doc["points"]] == [1, 2, 3, 4, 5, 6]
    assert doc["restored"] and doc["original_live"] == 2
    assert live(proc) == 2  # came down from 6 with the load paused


def test_io_bound_lands_far_above_the_cpus(uwsgi: Start, tmp_path: Path) -> None:
    proc = uwsgi(processes=16, cheaper=1, cheaper_algo="manual", cheaper_initial=3)
    doc = sweep(proc, "/io/50", "1,2,4,8,16", tmp_path, "--concurrency", "32", *SHORT)
    assert doc["recommendation"]["workers"] >= 8, doc["recommendation"]
    assert doc["shape"]["kind"] == "io-bound", doc["shape"]
    assert doc["restored"] and live(proc) == 3


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    """The child's output lines, then "" at EOF."""
    q: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            q.put(line)
        q.put("")

    threading.Thread(target=pump, daemon=True).start()
    return q


def wait_for_line(lines: queue.Queue[str], prefix: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not lines.get(timeout=max(0.1, deadline - time.monotonic())).startswith(prefix):
        pass


def test_ctrl_c_mid_sweep_restores_the_count(uwsgi: Start, tmp_path: Path) -> None:
    proc = uwsgi(processes=8, cheaper=1, cheaper_algo="manual", cheaper_initial=4)
    cmd = sweep_cmd(proc, "/io/20", "1..6", tmp_path, "--concurrency", "12", *SHORT)
    with subprocess.Popen(cmd, stdout=PIPE, stderr=STDOUT, text=True) as child:
        lines = _lines(child)
        try:
            wait_for_line(lines, "step 1:", 60)
            time.sleep(1.5)  # into step 2: the count is off the original, the load runs
            assert live(proc) in (1, 2)
            child.send_signal(signal.SIGINT)
            assert child.wait(timeout=30) == 130
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        rest = "".join(iter(lambda: lines.get(timeout=10), ""))
    assert "restored 4 live workers" in rest and "Traceback" not in rest, rest
    assert live(proc) == 4
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert doc["interrupted"] and doc["restored"] and doc["steps"][0]["workers"] == 1


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "uwsgitune", "sweep", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def one_line_error(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("uwsgitune: "), res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_input_is_one_line_with_the_fix(uwsgi: Start, tmp_path: Path) -> None:
    proc = uwsgi(processes=4, cheaper=1, cheaper_algo="manual")
    base = ["--url", url(proc, "/"), "--out", str(tmp_path)]
    good = ["--stats", proc.stats, "--fifo", proc.fifo]
    one_line_error(run_cli(*base, *good, "--workers", "1..8"), "processes = 4", "cheaper = 1")
    one_line_error(run_cli(*base, *good, "--workers", "4..2"), "--workers 4..2")
    not_fifo = ["--stats", proc.stats, "--fifo", str(proc.ini), "--workers", "1..4"]
    one_line_error(run_cli(*base, *not_fifo), "not a FIFO")
    gone = ["--stats", str(tmp_path / "none.sock"), "--fifo", proc.fifo, "--workers", "1..4"]
    one_line_error(run_cli(*base, *gone), "none.sock")
    assert not (tmp_path / "sweep.json").exists()
    assert live(proc) == 1
