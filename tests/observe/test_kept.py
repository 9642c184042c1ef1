"""Kept /proc descriptors: fresh bytes on every read, nothing stale after a process exits,
nothing left open for processes no longer sampled, and a bound on how many are kept."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from uwsgitune.sources.kept import KeptFiles, _Budget
from uwsgitune.sources.procfs import proc_sample


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


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

    from uwsgitune.sources.host import cpu_times, memory

    for _ in range(5):  # both move between the reads: one of a few tries must agree
        mine, theirs = cpu_times(), tuple(psutil.cpu_times())
        got = memory()
        vm = psutil.virtual_memory()
        assert mine is not None and got is not None and len(mine) == len(theirs)
        if tuple(mine) == theirs and got == (vm.total, vm.available):
            return
    raise AssertionError(f"{mine} {got} against psutil {theirs} {vm}")
