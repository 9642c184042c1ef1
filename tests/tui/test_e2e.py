"""End to end in a real terminal (tmux): `uwsgitune watch` against a real uWSGI under load,
and `uwsgitune demo`, which must leave no process and no file behind however it ends."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.tui.tmux import Tmux, master_pid, with_status
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess

pytestmark = [pytest.mark.uwsgi, pytest.mark.slow]
BIN = Path(sys.executable).parent / "uwsgitune"


@pytest.fixture
def tmux() -> Iterator[Callable[..., Tmux]]:
    sessions: list[Tmux] = []

    def start(command: str, **kw: int) -> Tmux:
        sessions.append(Tmux(command, **kw))
        return sessions[-1]

    yield start
    for s in sessions:
        s.kill()


@pytest.fixture
def load() -> Iterator[Callable[[str, int, float], None]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(target: str, clients: int, seconds: float) -> None:
        code = "from uwsgitune.loadgen import run_closed; "
        code += f"run_closed({target!r}, {clients}, {seconds})"
        procs.append(subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL))

    yield start
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        p.wait(10)


def test_watch_shows_live_workers_and_q_exits(
    uwsgi: Callable[..., UwsgiProcess], tmux: Callable[..., Tmux], load: Callable[..., None]
) -> None:
    proc = uwsgi(processes=2)
    load(url(proc, "/io/20"), 2, 20)
    pids = [c.pid for c in psutil.Process(proc.pid).children()]
    term = tmux(with_status(f"{BIN} watch {proc.stats}"))
    screen = term.wait_for(
        lambda s: (
            all(str(p) in s for p in pids) and re.search(r"traffic [\d.]+ req/s", s) is not None
        )
    )
    assert f"master {proc.pid}" in screen and "2/2 live" in screen
    assert re.search(r"mean [\d.]+ (µs|ms|s)", screen), screen
    term.keys("q")
    assert term.wait_dead(10) == 0


def _demo_tree(term: Tmux) -> tuple[list[int], Path]:
    screen = term.wait_for(lambda s: re.search(r"master \d+", s) is not None, timeout=30)
    master = psutil.Process(master_pid(screen))
    workdir = Path(master.cwd())
    assert workdir.name.startswith("uwsgitune-demo-") and workdir.exists()
    return [master.pid] + [c.pid for c in master.children(recursive=True)], workdir


def _assert_clean(pids: list[int], workdir: Path) -> None:
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert alive == [] and not workdir.exists()


def test_demo_q_stops_everything(tmux: Callable[..., Tmux]) -> None:
    term = tmux(with_status(f"{BIN} demo --duration 30"), width=80, height=24)
    pids, workdir = _demo_tree(term)
    term.wait_for(lambda s: "demo phase" in s)
    term.keys("q")
    assert term.wait_dead(20) == 0
    _assert_clean(pids, workdir)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_demo_signal_stops_everything(tmux: Callable[..., Tmux], sig: signal.Signals) -> None:
    term = tmux(f"exec {BIN} demo --duration 30", width=100, height=30)
    pids, workdir = _demo_tree(term)
    assert term.pid not in pids
    os.kill(term.pid, sig)
    term.wait_dead(20)
    _assert_clean(pids, workdir)


def test_a_killed_demo_takes_its_uwsgi_with_it(tmux: Callable[..., Tmux]) -> None:
    """SIGKILL runs no cleanup: the kernel interrupts uWSGI (PR_SET_PDEATHSIG), which stops
    its workers. Only the temporary directory stays behind."""
    term = tmux(f"exec {BIN} demo --duration 30", width=100, height=30)
    pids, workdir = _demo_tree(term)
    os.kill(term.pid, signal.SIGKILL)
    deadline = time.monotonic() + 15
    alive = pids
    try:
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [
                p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
            ]
        assert alive == []
    finally:
        for pid in alive:  # the bug this tests for: stop what it left, by PID
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)


def test_demo_without_a_terminal_says_so() -> None:
    out = subprocess.run(
        [str(BIN), "demo"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "terminal" in out.stderr and out.stdout == ""


def test_demo_bad_input_one_line() -> None:
    out = subprocess.run(
        [str(BIN), "demo", "--duration", "-3"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_apply_key_asks_first_then_applies_the_advice_through_the_fifo(
    uwsgi: Callable[..., UwsgiProcess],
    tmux: Callable[..., Tmux],
    load: Callable[..., None],
    tmp_path: Path,
) -> None:
    """`watch --fifo`: the tuner's advice is shown, `a` then `n` changes nothing, `a` then
    `y` applies it through the guarded FIFO path, audited."""
    from tests.support.tuned import live, wait_for

    proc = uwsgi(processes=6, cheaper=1, cheaper_initial=1, cheaper_algo="manual")
    load(url(proc, "/io/50"), 6, 40)
    audit = tmp_path / "audit.jsonl"
    cmd = f"{BIN} watch {proc.stats} --fifo {proc.fifo} --max-workers 6 --audit {audit}"
    term = tmux(with_status(cmd), width=160, height=50)
    term.wait_for(lambda s: "tuner advises up 1 → " in s, timeout=30)
    term.keys("a")
    term.wait_for(lambda s: "Apply: up 1 → " in s and "y: apply" in s)
    term.keys("n")
    term.wait_for(lambda s: "y: apply" not in s)
    assert live(proc) == 1 and not audit.exists()  # cancelled: nothing sent
    term.keys("a")
    term.wait_for(lambda s: "y: apply" in s)
    term.keys("y")
    assert wait_for(lambda: live(proc) > 1, timeout=10), term.screen()
    term.wait_for(lambda s: "applied: up 1 → " in s)
    records = [line for line in audit.read_text().splitlines() if '"event": "change"' in line]
    assert len(records) == 1 and '"result": "sent"' in records[0]
    term.keys("q")
    assert term.wait_dead(10) == 0
