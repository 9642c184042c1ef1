"""A one-thread process whose schedstat reads as at the last poll has not run: its CPU time
and threads are not read again, its RSS is (procfiles.py). Fake /proc trees pin the rule;
real processes show that it holds for them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.sources.test_procfs import _stat
from uwsgitune.sources.kept import KeptFiles
from uwsgitune.sources.procfiles import ProcFiles
from uwsgitune.sources.procfs import CLOCK_TICKS, PAGE_SIZE

STATM = b"1000 300 20 1 0 200 0\n"


def _tree(tmp_path: Path, threads: int = 1, sched: bytes = b"100 2500000000 7\n") -> Path:
    d = tmp_path / "7"
    d.mkdir(parents=True)
    (d / "stat").write_bytes(_stat("uwsgi", 250, 50, threads))
    (d / "statm").write_bytes(STATM)
    (d / "schedstat").write_bytes(sched)
    return d


def test_a_process_that_has_not_run_keeps_its_sample_and_its_rss_is_read(tmp_path: Path) -> None:
    d = _tree(tmp_path)
    procs = ProcFiles(KeptFiles(), proc=tmp_path)
    try:
        (first,) = procs.sample([7])
        # stat is not read again: a kernel never moves it without schedstat (the rule, pinned)
        (d / "stat").write_bytes(_stat("uwsgi", 900, 50, 1))
        assert procs.sample([7])[0] is first
        (d / "statm").write_bytes(b"1000 450 20 1 0 200 0\n")  # pages reclaimed or touched
        (moved,) = procs.sample([7])
        assert moved.rss == 450 * PAGE_SIZE and moved.cpu_seconds == first.cpu_seconds
        assert procs.sample([7])[0] is moved
        assert procs.sample([7], no_rss={7})[0].rss is None
        (d / "schedstat").write_bytes(b"300 2600000000 9\n")  # it ran
        (ran,) = procs.sample([7])
        assert (ran.cpu_seconds, ran.runq_seconds) == (950 / CLOCK_TICKS, 2.6)
    finally:
        procs.close()


def test_threaded_processes_and_schedstat_without_run_time_are_read_in_full(
    tmp_path: Path,
) -> None:
    """Another thread can run while the main one sleeps; a kernel without scheduler
    statistics shows "0 0 0" whatever ran."""
    for threads, sched in ((2, b"100 2500000000 7\n"), (1, b"0 0 0\n")):
        root = tmp_path / f"{threads}"
        d = _tree(root, threads, sched)
        (d / "task").mkdir()
        for tid in range(threads):
            (d / "task" / str(tid)).mkdir()
            (d / "task" / str(tid) / "schedstat").write_bytes(sched)
        procs = ProcFiles(KeptFiles(), proc=root)
        try:
            procs.sample([7])
            (d / "stat").write_bytes(_stat("uwsgi", 900, 50, threads))
            assert procs.sample([7])[0].cpu_seconds == 950 / CLOCK_TICKS, threads
        finally:
            procs.close()


def test_real_processes_idle_and_running() -> None:
    """A sleeping child keeps its sample object, equal to a fresh read; a running one is
    read again and its CPU time grows. The sleeping one is first let settle: just after
    fork it is still exec'ing `sleep`, and runs."""
    spin = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass\n"
    idle = subprocess.Popen(["sleep", "30"])
    busy = subprocess.Popen([sys.executable, "-c", spin])
    procs = ProcFiles(KeptFiles())
    try:
        deadline = time.monotonic() + 15
        while _state(idle.pid) != ("sleep", "S"):  # fork, then exec: it runs until asleep
            assert time.monotonic() < deadline, f"the child never slept: {_state(idle.pid)}"
            time.sleep(0.05)
        (a,) = procs.sample([idle.pid])
        time.sleep(0.2)
        while (again := procs.sample([idle.pid])[0]) is not a:  # it ran since: not asleep yet
            assert time.monotonic() < deadline, f"the sleeping child never settled: {again}"
            a = again
            time.sleep(0.2)
        (b,) = procs.sample([busy.pid])
        while time.monotonic() < deadline:
            time.sleep(0.2)
            a2, b2 = procs.sample([idle.pid, busy.pid])
            assert a2 is a
            if b2.cpu_seconds > b.cpu_seconds and b2.runq_seconds is not None:
                break
        else:
            raise AssertionError(f"the running child's CPU stayed at {b.cpu_seconds}")
        fresh = ProcFiles(KeptFiles())
        try:
            assert fresh.sample([idle.pid]) == (a,)
        finally:
            fresh.close()
    finally:
        procs.close()
        for child in (idle, busy):  # the processes this test started, by their handles
            child.kill()
            child.wait(5)


def _state(pid: int) -> tuple[str, str]:
    """The process's command name and state letter (S: sleeping)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2]
