"""The /proc reader gives what psutil gives, from the same files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from uwsgitune.sources.kept import KeptFiles
from uwsgitune.sources.procfiles import ProcFiles
from uwsgitune.sources.procfs import CLOCK_TICKS, PAGE_SIZE, parse_stat, proc_sample


def _stat(
    comm: str, utime: int, stime: int, threads: int, nice: int = 0, state: str = "S"
) -> bytes:
    fields = [state] + ["0"] * 40
    fields[14 - 3], fields[15 - 3], fields[20 - 3] = str(utime), str(stime), str(threads)
    fields[19 - 3] = str(nice)
    return f"42 ({comm}) {' '.join(fields)}\n".encode()


def test_a_command_with_spaces_and_parentheses_does_not_shift_the_fields() -> None:
    got = parse_stat(_stat("uwsgi ) (x y", 300, 100, 5, -5, state="R")) or (0.0, 0, 0, "", 0.0)
    cpu, threads, nice, state, user = got
    assert cpu == 400 / CLOCK_TICKS and threads == 5 and nice == -5 and state == "R"
    assert user == 300 / CLOCK_TICKS  # the host counts a niced process's user time as niced


def test_a_truncated_or_garbled_line_is_unreadable() -> None:
    assert parse_stat(b"42 (uwsgi) S 1 2 3") is None
    assert parse_stat(_stat("uwsgi", 1, 1, 1).replace(b" 1 ", b" x ", 1)) is None
    assert parse_stat(b"") is None


def test_a_fake_proc_tree(tmp_path: Path) -> None:
    pid = tmp_path / "7"
    pid.mkdir()
    (pid / "stat").write_bytes(_stat("uwsgi", 250, 50, 1))
    (pid / "statm").write_bytes(b"1000 300 20 1 0 200 0\n")
    (pid / "schedstat").write_bytes(b"100 2500000000 7\n")
    s = proc_sample(7, proc=tmp_path)
    assert s is not None
    assert (s.cpu_seconds, s.rss, s.num_threads, s.runq_seconds) == (
        300 / CLOCK_TICKS,
        300 * PAGE_SIZE,
        1,
        2.5,
    )
    procs = ProcFiles(KeptFiles(), proc=tmp_path)
    try:
        assert procs.sample([7, 8]) == (s,) == procs.sample([8, 7])  # a gone pid is left out
        (pid / "stat").write_bytes(_stat("uwsgi", 260, 50, 1))  # it ran: a kept file,
        (pid / "schedstat").write_bytes(b"200 2500000000 8\n")  # read again
        assert procs.sample([7])[0].cpu_seconds == 310 / CLOCK_TICKS and len(procs) == 1
    finally:
        procs.close()


def test_the_same_numbers_as_psutil_for_a_live_process() -> None:
    """Threads and RSS come from the files psutil reads; CPU moves between the two reads,
    so it is bracketed."""
    p = psutil.Process(os.getpid())
    procs = ProcFiles(KeptFiles())
    try:
        for i in range(10):  # RSS can move between the reads: one of a few tries must agree
            t0 = p.cpu_times()
            mine = proc_sample(os.getpid()) if i % 2 else procs.sample([os.getpid()])[0]
            t1 = p.cpu_times()
            rss, threads = p.memory_info().rss, p.num_threads()
            assert mine is not None
            assert t0.user + t0.system - 0.02 <= mine.cpu_seconds <= t1.user + t1.system + 0.02
            if (mine.rss, mine.num_threads) == (rss, threads):
                return
    finally:
        procs.close()
    raise AssertionError(f"rss/threads {mine.rss}/{mine.num_threads} vs psutil {rss}/{threads}")


def test_a_kernel_without_schedstat_keeps_the_other_two(tmp_path: Path) -> None:
    """Without CONFIG_SCHED_INFO (gVisor, minimal kernels) there is no schedstat: the
    run-queue time is unknown, and stat and statm are still kept, not opened every poll."""
    pid = tmp_path / "7"
    pid.mkdir()
    (pid / "stat").write_bytes(_stat("uwsgi", 250, 50, 1))
    (pid / "statm").write_bytes(b"1000 300 20 1 0 200 0\n")
    procs = ProcFiles(KeptFiles(), proc=tmp_path)
    try:
        for _ in range(2):
            (s,) = procs.sample([7])
            assert (s.cpu_seconds, s.runq_seconds, len(procs)) == (300 / CLOCK_TICKS, None, 1)
    finally:
        procs.close()


def test_rss_is_not_read_where_nothing_reads_it(tmp_path: Path) -> None:
    """`no_rss`: stat and schedstat are read, statm is not (a process without one, or an
    unreadable one, is still sampled); the others' RSS is read as before."""
    for pid, statm in ((7, b"1000 300 20 1 0 200 0\n"), (8, None)):
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_bytes(_stat("uwsgi", 250, 50, 1))
        (d / "schedstat").write_bytes(b"100 2500000000 7\n")
        if statm is not None:
            (d / "statm").write_bytes(statm)
    assert proc_sample(8, proc=tmp_path) is None  # statm wanted and missing: unreadable
    lean = proc_sample(8, proc=tmp_path, rss=False)
    assert lean is not None and lean.rss is None and lean.runq_seconds == 2.5
    procs = ProcFiles(KeptFiles(), proc=tmp_path)
    try:
        a, b = procs.sample([7, 8], no_rss={8})
        assert (a.rss, b.rss) == (300 * PAGE_SIZE, None)
        assert b.cpu_seconds == 300 / CLOCK_TICKS and b.runq_seconds == 2.5
        (tmp_path / "7" / "statm").write_bytes(b"1000 400 20 1 0 200 0\n")
        assert procs.sample([7], no_rss={7})[0].rss is None
        assert procs.sample([7])[0].rss == 400 * PAGE_SIZE
    finally:
        procs.close()


def test_a_process_reads_at_its_nice() -> None:
    """The instance's processes carry their nice value: the CPU of one at a positive nice is
    in the host's niced CPU (core/frame.py `host_contended_pct`)."""
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    procs = ProcFiles(KeptFiles())
    try:
        one = proc_sample(os.getpid())
        kept = procs.sample([os.getpid()])[0]
    finally:
        procs.close()
    assert one is not None and one.nice == kept.nice == mine


def test_a_process_reads_in_its_scheduler_state() -> None:
    """The state is the kernel's for the process at the read: a child asleep in a pipe read
    reads "S", one spinning on a CPU reads "R" (each read a few times: a spinning process
    can be caught between its timeslices only as runnable, still "R")."""
    asleep = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    procs = ProcFiles(KeptFiles())
    try:
        deadline = time.monotonic() + 30
        seen: dict[int, set[str]] = {asleep.pid: set(), spinning.pid: set()}
        while time.monotonic() < deadline and not (
            seen[asleep.pid] == {"S"} and seen[spinning.pid] == {"R"}
        ):
            seen = {asleep.pid: set(), spinning.pid: set()}
            time.sleep(0.2)  # both started: the interpreter loaded and in its loop or read
            for _ in range(5):
                for s in (*procs.sample([asleep.pid, spinning.pid]), proc_sample(spinning.pid)):
                    assert s is not None
                    seen[s.pid].add(s.state)
        assert seen == {asleep.pid: {"S"}, spinning.pid: {"R"}}
    finally:
        procs.close()
        for child in (asleep, spinning):
            child.kill()
            child.wait()
        assert asleep.stdin is not None
        asleep.stdin.close()
