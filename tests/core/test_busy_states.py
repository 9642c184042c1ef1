"""The IO of a request read from the busy workers' scheduler states (`hostview.busy_blocked`,
`staffing.estimate`). schedstat reports a task's wait for a CPU when it gets one: at 64
runnable workers on 2 CPUs much of a poll's wait shows in a later poll, and the remainder
W - cpu - runq read it as IO (a CPU-bound Django page at 64 workers: 240 ms of "IO" a
request, a first move to 17 workers where 4 do). The states are read at once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.core.test_runq_share import long_requests
from uwsgitune.core.frame import Frame
from uwsgitune.core.staffing import MIN_OBSERVED, estimate


def test_each_poll_counts_its_busy_workers_asleep() -> None:
    frames = long_requests(4, busy=6, blocked=(2, 0, 5))
    assert [f.busy_blocked for f in frames] == [2, 0, 5, 2]  # the idle worker's sleep: not
    assert [f.busy_blocked for f in long_requests(3, busy=6)] == [None] * 3  # unread


def test_a_busy_worker_whose_state_is_unread_makes_the_count_unknown() -> None:
    frames = long_requests(3, busy=6, blocked=(1,))
    f = frames[-1]
    assert f.busy_blocked == 1
    # derived again with one busy worker's sample missing its state: unknown, not 0 of 5
    from uwsgitune.core.hostview import busy_blocked
    from uwsgitune.core.samples import HostSample, ProcSample

    procs = tuple(ProcSample(w.pid, 0.0, None, 1, 0.0, state="R") for w in f.workers[1:])
    host = HostSample(2, 2.0, 0.0, 0.0, 8 << 30, 4 << 30, procs=procs)
    assert busy_blocked(f, host) is None
    assert busy_blocked(replace(f, threads=2), host) is None  # a thread's state is not read


def test_a_wait_for_a_cpu_schedstat_has_not_reported_is_not_read_as_io() -> None:
    """60 workers, each request 3 s: 0.1 s on a CPU, the rest waiting for one, of which
    schedstat has reported 1.5 s so far. The remainder reads 1.4 s of IO and asks for many
    workers; the states (every busy worker runnable) read none, and the model gives the
    CPUs' count."""
    lagging = long_requests(30, busy=60, cpu=2.0 / 60, runq=0.5)[1:]
    blind = estimate(lagging, per_cpu=2.0)
    assert blind is not None and blind.io_ms == pytest.approx(1400, rel=0.01)
    assert blind.workers is not None and blind.workers > 50
    seen = estimate(long_requests(30, busy=60, cpu=2.0 / 60, runq=0.5, blocked=(0,))[1:], 2.0)
    assert seen is not None and seen.io_ms == 0.0 and seen.workers == 4, seen
    # a few asleep at each poll (a database call): that much IO, by Little's law
    some = estimate(long_requests(30, busy=60, cpu=2.0 / 60, runq=0.5, blocked=(3, 1))[1:], 2.0)
    assert some is not None and some.io_ms == pytest.approx(2 / 20 * 1000, rel=0.03)
    assert some.workers == 8  # 2 CPUs x (100 + 98) / 100 ms, 2 a CPU


def test_the_states_never_raise_the_io_above_the_remainder() -> None:
    """A worker that ended its request between the stats and /proc sleeps in accept and
    reads as blocked: the states err high only, so they can lower the remainder, never
    raise it."""
    exact = long_requests(30, busy=6, cpu=0.1, runq=0.8)[1:]
    asleep = long_requests(30, busy=6, cpu=0.1, runq=0.8, blocked=(6,))[1:]
    a, b = estimate(exact, 2.0), estimate(asleep, 2.0)
    assert a is not None and b is not None
    assert b.io_ms == a.io_ms == pytest.approx(300.0)


def test_too_few_states_seen_leave_the_remainder() -> None:
    """Short requests: a poll rarely catches a worker in one, and a handful of snapshots say
    little. Under `MIN_OBSERVED` busy workers seen, the remainder stands."""
    from tests.support.frames import series

    box = {"live": 8, "cpu_count": 2, "effective_cpus": 2.0, "host_cpu_pct": 50.0}
    load = {"rps": 10.0, "mean_rt_ms": 20.0, "instance_cpu_cores": 0.1}

    def polls(busy: int) -> list[Frame]:  # 10 ms CPU and 10 ms IO a request, none asleep
        return [
            replace(f, runq_cores=0.0, busy_blocked=0) for f in series(10, busy=busy, **load, **box)
        ]

    few = polls(1)
    assert sum(f.busy for f in few) < MIN_OBSERVED
    m = estimate(few, 2.0)
    assert m is not None and m.io_ms == pytest.approx(10.0, rel=1e-3)
    m = estimate(polls(3), 2.0)
    assert m is not None and m.io_ms == 0.0
