"""Issue 14.3 and 14.4 for `sweep`, against real uWSGI: a sweep and `tune --mode apply` exclude
each other through the one apply lock (each names the other as the holder), and a sweep
touches nothing when the stats socket is served by another uid than the master's. Issue 36.7:
a sweep that takes the lock after a `tune` killed between its reload's `p` and `r` resumes
the pool first."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import PIPE, STDOUT

import pytest

from tests.support.tuned import doc, kill_mid_reload, wait_for
from tests.sweep.test_real import SHORT, _lines, live, one_line_error, sweep_cmd, wait_for_line
from uwsgitune.core.address import parse_address
from uwsgitune.launch import UwsgiProcess
from uwsgitune.sources.stats import read_stats

pytestmark = pytest.mark.uwsgi
Start = Callable[..., UwsgiProcess]
NOBODY = 65534


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}


def _tune(proc: UwsgiProcess, tmp_path: Path, seconds: str) -> list[str]:
    audit = str(tmp_path / "audit.jsonl")
    argv = [sys.executable, "-m", "uwsgitune", "tune", proc.stats, "--fifo", proc.fifo]
    return [*argv, "--mode", "apply", "--duration", seconds, "--audit", audit]


def _wait_for_holder(locks: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = list(locks.glob("*.lock")) if locks.is_dir() else []
        if any(text in f.read_text() for f in files):
            return
        time.sleep(0.1)
    raise AssertionError(f"no lock held by {text} in {locks} within {timeout}s")


def test_sweep_refuses_while_tune_applies(uwsgi: Start, tmp_path: Path) -> None:
    proc = uwsgi(processes=4, cheaper=1, cheaper_algo="manual", cheaper_initial=2)
    env = _env(tmp_path)
    with subprocess.Popen(
        _tune(proc, tmp_path, "120"), stdout=PIPE, stderr=STDOUT, env=env
    ) as tune:
        try:
            _wait_for_holder(tmp_path / "locks", f"pid {tune.pid} (uwsgitune tune)")
            out = tmp_path / "out"
            cmd = sweep_cmd(proc, "/io/20", "1..3", out, "--concurrency", "6", *SHORT)
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        finally:
            tune.send_signal(signal.SIGINT)
            tune.wait(timeout=30)
    assert res.returncode == 1, res.stdout + res.stderr
    one_line_error(res, f"already tuned by pid {tune.pid} (uwsgitune tune)", "not sweeping")
    assert "step 1" not in res.stdout and not (tmp_path / "out" / "sweep.json").exists()


def test_tune_refuses_while_sweep_runs_and_takes_over_after(uwsgi: Start, tmp_path: Path) -> None:
    proc = uwsgi(processes=6, cheaper=1, cheaper_algo="manual", cheaper_initial=2)
    env = _env(tmp_path)
    cmd = sweep_cmd(proc, "/io/20", "1..4", tmp_path / "out", "--concurrency", "8", *SHORT)
    with subprocess.Popen(cmd, stdout=PIPE, stderr=STDOUT, text=True, env=env) as child:
        lines = _lines(child)
        try:
            wait_for_line(lines, "step 1:", 90)  # the sweep is moving the workers now
            tune = subprocess.run(
                _tune(proc, tmp_path, "1"), capture_output=True, text=True, env=env, timeout=60
            )
            child.send_signal(signal.SIGINT)
            assert child.wait(timeout=60) == 130
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert tune.returncode == 2, tune.stdout + tune.stderr
    assert f"already tuned by pid {child.pid} (uwsgitune sweep)" in tune.stderr, tune.stderr
    assert live(proc) == 2  # the sweep restored the count it found
    after = subprocess.run(
        _tune(proc, tmp_path, "1"), capture_output=True, text=True, env=env, timeout=60
    )
    assert after.returncode == 0, after.stderr  # released once the instance was restored


@pytest.fixture
def foreign_stats(uwsgi: Start) -> Iterator[tuple[UwsgiProcess, str]]:
    """A real instance, and a unix socket serving its real stats document, as another uid
    (a process that took a stats path): the document names the real master."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or python is None:
        pytest.skip("needs root and a system python3 to serve a socket as another uid")
    proc = uwsgi(processes=4, cheaper=1, cheaper_algo="manual", cheaper_initial=2)
    top = Path(tempfile.mkdtemp(prefix="uwt-peer-", dir="/tmp"))
    os.chown(top, NOBODY, NOBODY)
    doc = top / "doc.json"
    doc.write_bytes(read_stats(parse_address(proc.stats)))
    doc.chmod(0o644)
    sock = top / "stats.sock"
    serve = (
        "import socket, sys\n"
        "data = open(sys.argv[2], 'rb').read()\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    c, _ = s.accept(); c.sendall(data); c.close()\n"
    )
    server = subprocess.Popen(
        [python, "-c", serve, str(sock), str(doc)], user=NOBODY, stdout=PIPE, text=True
    )
    try:
        assert server.stdout is not None and server.stdout.readline() == "ready\n"
        yield proc, str(sock)
    finally:
        server.kill()  # the server this fixture started, by its handle
        server.wait(10)
        if server.stdout is not None:
            server.stdout.close()
        shutil.rmtree(top, ignore_errors=True)


def test_sweep_refuses_a_stats_socket_served_by_another_uid(
    foreign_stats: tuple[UwsgiProcess, str], tmp_path: Path
) -> None:
    proc, sock = foreign_stats
    out = tmp_path / "out"
    cmd = sweep_cmd(proc, "/io/20", "1..3", out, "--concurrency", "6", *SHORT)
    cmd[cmd.index("--stats") + 1] = sock
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    one_line_error(res, f"served by uid {NOBODY}", f"(pid {proc.pid}) runs as uid 0")
    assert res.returncode == 1 and "step 1" not in res.stdout and not out.exists()
    assert live(proc) == 2


def test_sweep_resumes_first_a_pool_a_killed_tune_left_paused(uwsgi: Start, tmp_path: Path) -> None:
    """`tune` SIGKILLed between its reload's `p` and `r`, then a sweep: it resumes the pool
    before anything else (uWSGI logs it), the mark goes, and the sweep runs on a live app."""
    proc = uwsgi(processes=4, cheaper=1, cheaper_algo="manual", cheaper_initial=2)
    kill_mid_reload(proc, tmp_path / "locks")
    cmd = sweep_cmd(proc, "/io/20", "1..2", tmp_path / "out", "--concurrency", "4", *SHORT)
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path), timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    resumed = "sweep: resumed (`p`) the 2 workers a reload cut short left paused"
    assert resumed in lines and lines.index(resumed) < lines.index(
        next(line for line in lines if line.startswith("sweep: workers 1, 2"))
    ), res.stdout
    assert b"resuming workers" in proc.log.read_bytes()
    assert wait_for(lambda: all(w.status != "pause" for w in doc(proc).live_workers))
    assert "step 2:" in res.stdout and "errors 0" in res.stdout
    lock_text = "".join(f.read_text() for f in (tmp_path / "locks").glob("*.lock"))
    assert "reload master" not in lock_text  # acted on: the mark went
