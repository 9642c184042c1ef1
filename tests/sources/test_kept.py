"""Kept /proc descriptors: fresh bytes on every read, nothing stale after a process exits,
nothing left open for processes no longer sampled, and a bound on how many are kept."""

from __future__ import annotations

import gc
import os
import subprocess
from pathlib import Path

from uwsgitune.sources.kept import KeptFiles, _Budget
from uwsgitune.sources.procfiles import ProcFiles
from uwsgitune.sources.procfs import proc_sample


def _open_fds() -> int:
    """Our descriptors open on /proc files, what these tests open and close. Not all of them:
    under pytest-xdist a test process also holds what earlier tests left to the collector
    or to a thread winding down (sockets, pipes), which come and go during a count (two
    failures on 3.10 under load: one socket more or less)."""
    gc.collect()  # what other tests left unclosed closes now, not in the middle of a count
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("/proc/")
        except OSError:
            continue  # closed since the listing (the listing's own descriptor among them)
    return count


def test_a_kept_file_is_read_again_not_remembered(tmp_path: Path) -> None:
    files = KeptFiles()
    try:
        # /proc/self/stat moves with our own CPU time; its pid field proves it is ours
        first = files.read("/proc/self/stat")
        assert first is not None and first.startswith(f"{os.getpid()} (".encode())
        assert len(files) == 1
        sum(range(3_000_000))  # some CPU, so utime moves
        again = files.read("/proc/self/stat")
        assert again is not None and again != first and len(files) == 1
        # a regular file rewritten in place is read as it is now
        path = tmp_path / "f"
        path.write_bytes(b"one")
        assert files.read(str(path)) == b"one"
        with path.open("r+b") as f:
            f.write(b"two")
        assert files.read(str(path)) == b"two"
        assert files.read(str(tmp_path / "missing")) is None and len(files) == 2
    finally:
        files.close()
    assert len(files) == 0


def test_an_exited_process_reads_as_gone_and_its_descriptors_close() -> None:
    before = _open_fds()
    files = KeptFiles()
    child = subprocess.Popen(["sleep", "30"])
    try:
        live = proc_sample(child.pid, read=files.read)
        assert live is not None and live.pid == child.pid
        assert len(files) == 3  # stat, statm, schedstat
    finally:
        child.kill()  # the process this test started, by its handle
        child.wait(5)
    assert proc_sample(child.pid, read=files.read) is None  # never its last bytes again
    files.sweep()  # what was read this round (nothing, it is gone) stays; the rest closes
    files.sweep()
    assert len(files) == 0 and _open_fds() == before


def test_files_not_read_in_a_round_are_closed() -> None:
    files = KeptFiles()
    files.read("/proc/self/stat")
    files.read("/proc/self/statm")
    files.sweep()
    assert len(files) == 2
    files.read("/proc/self/stat")
    files.sweep()  # statm was not read since the last sweep: a worker no longer sampled
    assert len(files) == 1
    files.close()


def test_past_the_bound_files_are_read_but_not_kept() -> None:
    budget = _Budget()
    budget.limit = 2
    a, b = KeptFiles(budget), KeptFiles(budget)  # the bound is shared
    try:
        assert a.read("/proc/self/stat") and a.read("/proc/self/statm")
        before = _open_fds()
        assert b.read("/proc/self/stat") is not None  # read, then closed
        assert (len(a), len(b), budget.used, _open_fds()) == (2, 0, 2, before)
        a.close()
        assert budget.used == 0 and b.read("/proc/self/stat") and len(b) == 1
    finally:
        a.close()
        b.close()
    assert budget.used == 0


def test_host_cpu_and_memory_read_as_psutil_reads_them() -> None:
    import psutil

    from uwsgitune.sources.hostfiles import cpu_times, memory

    for _ in range(5):  # both move between the reads: one of a few tries must agree
        mine, theirs = cpu_times(), tuple(psutil.cpu_times())
        got = memory()
        vm = psutil.virtual_memory()
        assert mine is not None and got is not None and len(mine) == len(theirs)
        if tuple(mine) == theirs and got == (vm.total, vm.available):
            return
    raise AssertionError(f"{mine} {got} against psutil {theirs} {vm}")


def test_a_processs_three_files_are_kept_until_it_is_gone_or_unsampled() -> None:
    before = _open_fds()
    procs = ProcFiles(KeptFiles())
    a, b = subprocess.Popen(["sleep", "30"]), subprocess.Popen(["sleep", "30"])
    try:
        first = procs.sample([a.pid, b.pid])
        assert [p.pid for p in first] == [a.pid, b.pid] and len(procs) == 2
        assert _open_fds() == before + 6  # stat, statm, schedstat of each (one thread each)
        procs.sweep()
        procs.sample([b.pid])
        procs.sweep()  # `a` was not sampled in that round: its files close
        assert len(procs) == 1 and _open_fds() == before + 3
        procs.sample([a.pid])
    finally:
        for child in (a, b):  # the processes this test started, by their handles
            child.kill()
            child.wait(5)
    assert procs.sample([a.pid]) == ()  # gone: never its last bytes again
    assert len(procs) == 1 and _open_fds() == before + 3  # its files closed at the failed read
    procs.close()
    assert _open_fds() == before


def test_past_the_bound_processes_are_read_without_keeping_files() -> None:
    budget = _Budget()
    budget.limit = 4  # room for one process's three, not two
    procs = ProcFiles(KeptFiles(budget), budget=budget)
    a, b = subprocess.Popen(["sleep", "30"]), subprocess.Popen(["sleep", "30"])
    try:
        got = procs.sample([a.pid, b.pid])
        assert [p.pid for p in got] == [a.pid, b.pid]
        assert len(procs) == 1 and budget.used == 3
    finally:
        for child in (a, b):
            child.kill()
            child.wait(5)
        procs.close()
    assert budget.used == 0
