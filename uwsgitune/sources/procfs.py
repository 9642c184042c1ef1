"""CPU, RSS, threads and run-queue time of a process, read straight from /proc.

`/proc/PID/stat` gives what psutil's `cpu_times()` and `num_threads()` give and
`/proc/PID/statm` its `memory_info().rss` (the same files, fields and units psutil reads: the
`rss` field of `stat` is the kernel's approximate counter and may differ), plus `schedstat`
for the run-queue wait. At 64-1,000 workers, psutil's per-process objects,
`oneshot()` contexts and the extra `statm` read cost several times the reads themselves.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from uwsgitune.core.samples import ProcSample
from uwsgitune.sources.kept import read_once

Read = Callable[[str], bytes | None]

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# Fields after the command (`pid (comm) state ...`), counted from the state (field 3).
_UTIME, _STIME, _NICE, _THREADS = 14 - 3, 15 - 3, 19 - 3, 20 - 3


def socket_inodes(pid: int, proc: Path = PROC) -> set[int]:
    """The inodes of the sockets process `pid` holds (OSError: /proc/<pid>/fd unreadable)."""
    fd_dir = proc / str(pid) / "fd"
    out = set()
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            out.add(int(target[8:-1]))
    return out


def parse_stat(data: bytes) -> tuple[float, int, int, str, float] | None:
    """(user + system CPU seconds, threads, nice, state, user CPU seconds) from a
    `/proc/PID/stat` line. The command may hold spaces and parentheses: fields are counted
    after its last `)`. The state is the kernel's letter for the main thread: R running or
    runnable, S asleep, D in uninterruptible sleep (disk), and others. User time apart: the
    host's niced CPU (/proc/stat) counts a niced process's user time only, its system time
    as system."""
    end = data.rfind(b")")
    fields = data[end + 2 :].split(None, _THREADS + 1) if end >= 0 else []  # not the 30 after
    if len(fields) <= _THREADS:
        return None
    try:
        user = int(fields[_UTIME])
        cpu = (user + int(fields[_STIME])) / CLOCK_TICKS
        state = fields[0].decode("ascii", "replace")[:1]
        return cpu, int(fields[_THREADS]), int(fields[_NICE]), state, user / CLOCK_TICKS
    except ValueError:
        return None


def parse_statm(data: bytes) -> int | None:
    """Resident bytes from `/proc/PID/statm` (its second field, in pages)."""
    fields = data.split()
    return int(fields[1]) * PAGE_SIZE if len(fields) > 1 and fields[1].isdigit() else None


def parse_schedstat(data: bytes | None) -> float | None:
    fields = data.split() if data else []
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1]) / 1e9


def runq_seconds(
    pid: int, threads: int = 1, proc: Path | str = PROC, read: Read = read_once
) -> float | None:
    """Seconds the process's threads spent waiting on a run queue: the second field of
    schedstat (/proc/PID/schedstat is the main thread's; threads are summed from task/)."""
    if threads <= 1:
        return parse_schedstat(read(f"{proc}/{pid}/schedstat"))  # a str: pathlib costs more here
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return None
    total = 0.0
    for tid in tids:
        waited = parse_schedstat(read(f"{proc}/{pid}/task/{tid}/schedstat"))
        if waited is None:
            return None
        total += waited
    return total if tids else None


def sample_of(
    pid: int,
    stat: bytes | None,
    statm: bytes | None,
    runq: Callable[[int], float | None],
    rss: bool = True,
) -> ProcSample | None:
    """A process from its stat and statm bytes, and `runq(threads)`, its run-queue seconds
    (read only when the rest is readable); None when it is gone or unreadable. Without
    `rss`, statm is not read (pass None) and the sample's RSS is None."""
    parsed = parse_stat(stat) if stat else None
    resident = parse_statm(statm) if statm else None
    if parsed is None or (rss and resident is None):
        return None
    cpu, threads, nice, state, user = parsed
    return ProcSample(pid, cpu, resident, threads, runq(threads), nice, state, user)


def proc_sample(
    pid: int, proc: Path | str = PROC, read: Read = read_once, rss: bool = True
) -> ProcSample | None:
    """One process, or None when it is gone or unreadable (`rss`: as `sample_of`)."""
    base = f"{proc}/{pid}/"
    stat = read(base + "stat")
    statm = read(base + "statm") if stat and rss else None
    return sample_of(pid, stat, statm, lambda threads: runq_seconds(pid, threads, proc, read), rss)
