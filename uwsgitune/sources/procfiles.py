"""Each sampled process's stat, statm and schedstat, their descriptors kept between polls.

Three `pread`s a process and little else: a `KeptFiles` read builds the path and keeps books
per file, which at 1,000 workers cost about as much again as the reads. Kept descriptors
are safe for the reasons kept.py gives (once its process is gone, a read fails, and the
path is opened again: the new process with that pid, or nothing) and count against the same
process-wide bound; past it, a process is read with open, read, close. A threaded
process's run-queue time is its threads' (task/*/schedstat), read through `files`.

A process with one thread whose schedstat reads as it did at the last poll has not run
since: its run time, run-queue time and timeslices are all in that line, and the kernel
counts CPU time (stat) only while a task runs. Its CPU time, threads and scheduler state
are then as read at the last poll, and only its RSS is read again (the kernel can reclaim
the pages of a process that sleeps). The state can be stale by a wake-up: a task woken
since that has not yet had a CPU reads as it slept, for the few milliseconds until it runs.
That takes a read and its parsing off each idle worker, most of an over-provisioned pool.
Threaded processes are read in full: another thread can run while the main one, whose
schedstat this is, sleeps.
Not thread-safe: one polling thread (`HostSampler` locks it).
"""

from __future__ import annotations

import os
from collections.abc import Container
from pathlib import Path

import msgspec

from uwsgitune.core.samples import ProcSample
from uwsgitune.sources.kept import BUDGET, Kept, KeptFiles, _Budget, read_once
from uwsgitune.sources.procfs import (
    PROC,
    parse_schedstat,
    parse_stat,
    parse_statm,
    proc_sample,
    runq_seconds,
)

NAMES = ("stat", "statm", "schedstat")
SIZE = 4096  # more than any of the three holds (stat: 52 numbers and a 16-byte command)
_FLAGS = os.O_RDONLY | os.O_CLOEXEC


class ProcFiles(Kept[int]):
    def __init__(self, files: KeptFiles, proc: Path | str = PROC, budget: _Budget = BUDGET):
        super().__init__(budget)
        self._files = files
        self._root = str(proc)
        # one-thread processes: their schedstat line and sample at the last poll
        self._last: dict[int, tuple[bytes, ProcSample]] = {}

    def sample(self, pids: list[int], no_rss: Container[int] = ()) -> tuple[ProcSample, ...]:
        """CPU, RSS, threads and run-queue time of each pid that can be read, in order; the
        RSS (statm) not read for the pids in `no_rss`. One flat loop: per process, per poll
        (the host sample's hot path at 1,000 workers)."""
        out: list[ProcSample] = []
        kept, used, last, pread = self._fds, self._used, self._last, os.pread
        for pid in pids:
            used.add(pid)
            rss = pid not in no_rss
            fds = kept.get(pid) or self._open(pid)
            if fds is None:
                got = self._once(pid, rss)
            else:
                try:
                    sched = pread(fds[2], SIZE, 0) if len(fds) > 2 else None
                    seen = last.get(pid)
                    resident = parse_statm(pread(fds[1], SIZE, 0)) if rss else None
                    if rss and resident is None:
                        got = None
                    elif seen is not None and sched == seen[0]:  # it has not run since
                        got = self._idle(pid, seen, resident)
                    else:
                        got = self._fresh(pid, pread(fds[0], SIZE, 0), resident, sched)
                except OSError:  # its process is gone (ESRCH): whoever has the pid now, if any
                    self._close(pid)
                    got = self._once(pid, rss)
            if got is not None:
                out.append(got)
        return tuple(out)

    def _idle(self, pid: int, seen: tuple[bytes, ProcSample], resident: int | None) -> ProcSample:
        """A one-thread process that has not run since the last poll: its sample then, with
        the RSS read now (the same object when that has not moved either)."""
        old = seen[1]
        if resident == old.rss:
            return old
        got = msgspec.structs.replace(old, rss=resident)
        self._last[pid] = (seen[0], got)
        return got

    def _fresh(
        self, pid: int, stat: bytes, resident: int | None, sched: bytes | None
    ) -> ProcSample | None:
        """A process read in full; one with one thread remembered by its schedstat line."""
        parsed = parse_stat(stat)
        if parsed is None:
            self._last.pop(pid, None)
            return None
        if parsed[1] > 1 or sched is None:
            self._last.pop(pid, None)
            return self._threaded(pid, parsed, resident, sched is not None)
        cpu, threads, nice, state, user = parsed
        got = ProcSample(pid, cpu, resident, threads, parse_schedstat(sched), nice, state, user)
        if sched.startswith(b"0 "):  # no run time counted here (scheduler statistics off)
            self._last.pop(pid, None)
        else:
            self._last[pid] = (sched, got)
        return got

    def _close(self, key: int) -> None:
        self._last.pop(key, None)
        super()._close(key)

    def _threaded(
        self,
        pid: int,
        parsed: tuple[float, int, int, str, float],
        resident: int | None,
        sched: bool,
    ) -> ProcSample:
        """A process with threads (their run-queue times summed from task/), or without a
        schedstat here (its run-queue time unknown)."""
        cpu, threads, nice, state, user = parsed
        runq = runq_seconds(pid, threads, self._root, self._files.read) if sched else None
        return ProcSample(pid, cpu, resident, threads, runq, nice, state, user)

    def _once(self, pid: int, rss: bool = True) -> ProcSample | None:
        return proc_sample(pid, self._root, read_once, rss)

    def _open(self, pid: int) -> tuple[int, ...] | None:
        """The pid's files, kept: stat, statm and, where the kernel has it (CONFIG_SCHED_INFO),
        schedstat. None when it is gone or the bound is reached (read once then)."""
        if not self._budget.take(len(NAMES)):
            return None
        fds: list[int] = []
        try:
            for name in NAMES:
                fds.append(os.open(f"{self._root}/{pid}/{name}", _FLAGS))
        except OSError:
            if len(fds) < 2:  # gone, or not a process
                for fd in fds:
                    os.close(fd)
                self._budget.give(len(NAMES))
                return None
            self._budget.give(1)  # no schedstat here: its run-queue time is unknown
        self._fds[pid] = got = tuple(fds)
        return got
