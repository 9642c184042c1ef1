"""The host's settings (CPUs, cgroup memory limit, somaxconn, autogroup) are read once per
SETTINGS_SECONDS and per master; what is measured against them is read every poll."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.instances import document, worker
from uwsgitune.core.model import parse_stats
from uwsgitune.sources import host
from uwsgitune.sources.host import SETTINGS_SECONDS, HostSampler


def test_settings_are_read_again_after_their_time_or_for_a_new_master(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []
    values = iter(range(100, 200))

    def fake_somaxconn(*_: object) -> int:
        reads.append(1)
        return next(values)

    used: list[object] = []  # the limit's cgroup use, read every poll
    monkeypatch.setattr(host, "somaxconn", fake_somaxconn)
    monkeypatch.setattr(host, "memory_current", lambda where, text: used.append(where))
    now = [1000.0]
    sampler = HostSampler(netlink=False, clock=lambda: now[0])
    a = parse_stats(document(pid=1, workers=[worker(1, 1)]))
    b = parse_stats(document(pid=2, workers=[worker(1, 1)]))
    try:
        seen = [sampler.sample(a).somaxconn]
        now[0] += SETTINGS_SECONDS / 2
        seen.append(sampler.sample(a).somaxconn)  # the same reading
        now[0] += SETTINGS_SECONDS / 2
        seen.append(sampler.sample(a).somaxconn)  # its time is up
        seen.append(sampler.sample(b).somaxconn)  # another master
        now[0] -= 60  # a clock that went back: read again, never trusted for longer
        seen.append(sampler.sample(b).somaxconn)
        assert seen == [100, 100, 101, 102, 103] and len(reads) == 4 and len(used) == 5
    finally:
        sampler.close()


def test_rss_is_read_from_proc_only_for_workers_whose_stats_carry_none() -> None:
    """The master's RSS is never read, nor a worker's that the stats carry (memory-report,
    after its first request): the frame reads the stats' then. A worker without it is
    read from /proc, and each process's CPU and threads whatever its RSS."""
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    master, reported, bare = kids = [subprocess.Popen(sleep) for _ in range(3)]
    sampler = HostSampler(netlink=False)
    try:
        doc = parse_stats(
            document(
                pid=master.pid,
                workers=[worker(1, reported.pid, rss=123 * 4096), worker(2, bare.pid)],
            )
        )
        procs = {p.pid: p for p in sampler.sample(doc).procs}
        assert set(procs) == {master.pid, reported.pid, bare.pid}
        assert procs[master.pid].rss is None and procs[reported.pid].rss is None
        assert (procs[bare.pid].rss or 0) > 0
        assert all(p.num_threads >= 1 and p.cpu_seconds >= 0 for p in procs.values())
    finally:
        sampler.close()
        for k in kids:
            k.kill()
            k.wait()
