"""A worker spawned between two host samples (a `+`, a respawn) was born in the interval:
all its CPU and run-queue time count in the instance's. Counting none of it read the poll
after `+20` as a tenth of the CPU a request takes, and the tuner's model sized on it."""

from __future__ import annotations

import math
from typing import Any

from tests.support.instances import document, poll_of, worker
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import HostSample, ProcSample


def _host(busy: float, *procs: ProcSample) -> HostSample:
    return HostSample(
        cpu_count=2,
        effective_cpus=2.0,
        cpu_busy_seconds=busy,
        cpu_total_seconds=2 * busy + 10,
        mem_total=8 << 30,
        mem_available=4 << 30,
        procs=procs,
    )


MASTER = ProcSample(100, 1.0, 10 << 20, 1, 0.0)


def _second_frame(
    first: list[dict[str, Any]],
    then: list[ProcSample],
    second: list[dict[str, Any]],
    now: list[ProcSample],
) -> Frame:
    """The frame of the second of two polls, 2 s apart, of the master (pid 100) and these
    workers and processes."""
    tracker = Tracker("s")
    tracker.update(poll_of(document(workers=first), 0, host=_host(10.0, MASTER, *then)))
    return tracker.update(poll_of(document(workers=second), 2, host=_host(11.0, MASTER, *now)))


def test_a_spawned_workers_cpu_counts_from_its_birth() -> None:
    # worker 2 uncheaped (pid 12, born since), worker 1 served on; pid 99 is not the instance
    f = _second_frame(
        [worker(1, 11, status="busy"), worker(2, 0, status="cheap")],
        [ProcSample(11, 2.0, 30 << 20, 1, 0.5)],
        [worker(1, 11, status="busy"), worker(2, 12, status="busy")],
        [
            ProcSample(11, 2.5, 30 << 20, 1, 0.6),
            ProcSample(12, 0.3, 20 << 20, 1, 0.05),
            ProcSample(99, 50.0, 1 << 20, 1, 3.0),
        ],
    )
    assert math.isclose(f.instance_cpu_cores or 0, (0.5 + 0.3) / 2)


def test_a_respawned_workers_cpu_pct_counts_from_its_birth() -> None:
    """A slot whose pid changed (a respawn, an uncheaped worker) shows its new process's CPU
    since birth on the first poll that sees it; it was blank until the poll after."""
    f = _second_frame(
        [worker(1, 11, status="busy"), worker(2, 0, status="cheap"), worker(3, 13, status="busy")],
        [ProcSample(11, 2.0, 30 << 20, 1, 0.5)],  # pid 13 not read this time
        [
            worker(1, 21, status="busy", respawn_count=2),  # respawned: pid 11 -> 21
            worker(2, 12, status="busy"),  # uncheaped
            worker(3, 13, status="busy"),  # the same process, unread at the last poll
        ],
        [
            ProcSample(21, 0.4, 30 << 20, 1, 0.0),
            ProcSample(12, 0.3, 20 << 20, 1, 0.05),
            ProcSample(13, 40.0, 20 << 20, 1, 1.0),
        ],
    )
    pct = [w.cpu_pct for w in f.workers]
    assert pct[0] is not None and math.isclose(pct[0], 0.4 / 2 * 100)
    assert pct[1] is not None and math.isclose(pct[1], 0.3 / 2 * 100)
    # Not new: its 40 s of CPU are its life's, not this interval's (no rate without a
    # sample from before), in its CPU % and in the instance's
    assert pct[2] is None
    assert f.instance_cpu_cores is not None
    assert math.isclose(f.instance_cpu_cores, (0.4 + 0.3) / 2)


def test_a_reused_pid_in_a_respawned_slot_counts_from_birth() -> None:
    """The pid a respawned worker got belonged to another slot's process at the last poll
    (the kernel reuses pids): that sample is the old process's, not this one's."""
    f = _second_frame(
        [worker(1, 11, status="busy"), worker(2, 21, status="busy")],
        [ProcSample(11, 2.0, 30 << 20, 1, 0.5), ProcSample(21, 5.0, 30 << 20, 1, 0.5)],
        [
            worker(1, 21, status="busy", respawn_count=2),  # pid 21 again: a new process
            worker(2, 22, status="busy", respawn_count=2),
        ],
        [ProcSample(21, 0.2, 30 << 20, 1, 0.0), ProcSample(22, 0.1, 30 << 20, 1, 0.0)],
    )
    pct = [w.cpu_pct for w in f.workers]
    assert pct[0] is not None and math.isclose(pct[0], 0.2 / 2 * 100)
    assert pct[1] is not None and math.isclose(pct[1], 0.1 / 2 * 100)
