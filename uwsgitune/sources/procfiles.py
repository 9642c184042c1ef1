"""Each sampled process's stat, statm and schedstat, their descriptors kept between polls.

Three `pread`s a process and little else: a `KeptFiles` read builds the path and keeps books
per file, which at 1,000 workers cost about as much again as the reads. Kept descriptors
are safe for the reasons kept.py gives (once its process is gone, a read fails, and the
path is opened again: the new process with that pid, or nothing) and count against the same
process-wide bound; past it, a process is read with open, read, close. A threaded
process's run-queue time is its threads' (task/*/schedstat), read through `files`.
Not thread-safe: one polling thread (`HostSampler` locks it).
"""

from __future__ import annotations

import os
from collections.abc import Container
from pathlib import Path

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

    def sample(self, pids: list[int], no_rss: Container[int] = ()) -> tuple[ProcSample, ...]:
        """CPU, RSS, threads and run-queue time of each pid that can be read, in order; the
        RSS (statm) not read for the pids in `no_rss`. One flat loop: per process, per poll
        (the host sample's hot path at 1,000 workers)."""
        out: list[ProcSample] = []
        kept, used, pread = self._fds, self._used, os.pread
        for pid in pids:
            used.add(pid)
            rss = pid not in no_rss
            fds = kept.get(pid) or self._open(pid)
            if fds is None:
                got = self._once(pid, rss)
            else:
                try:
                    parsed = parse_stat(pread(fds[0], SIZE, 0))
                    resident = parse_statm(pread(fds[1], SIZE, 0)) if rss else None
                    if parsed is None or (rss and resident is None):
                        got = None
                    elif parsed[1] > 1 or len(fds) < 3:
                        got = self._threaded(pid, parsed, resident, len(fds) >= 3)
                    else:
                        runq = parse_schedstat(pread(fds[2], SIZE, 0))
                        got = ProcSample(pid, parsed[0], resident, parsed[1], runq)
                except OSError:  # its process is gone (ESRCH): whoever has the pid now, if any
                    self._close(pid)
                    got = self._once(pid, rss)
            if got is not None:
                out.append(got)
        return tuple(out)

    def _threaded(
        self, pid: int, parsed: tuple[float, int], resident: int | None, sched: bool
    ) -> ProcSample:
        """A process with threads (their run-queue times summed from task/), or without a
        schedstat here (its run-queue time unknown)."""
        cpu, threads = parsed
        runq = runq_seconds(pid, threads, self._root, self._files.read) if sched else None
        return ProcSample(pid, cpu, resident, threads, runq)

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
