"""The run-queue wait counted towards requests when they outlast the poll, pure
(`hostview._busy_shares`): uWSGI adds a request's running time when it ends, so a worker in
one request from one poll to the next reads no busy share there, though it was in that
request the whole poll. Weighted by that share, a CPU-bound pool whose requests took
seconds (64 workers on a Django page, 16 s a request under contention) lost the wait of
every poll but the one each request ended in, and the staffing model read it as IO: 1.3 s
of run-queue wait and 14.5 s of IO a request, where the workers were runnable in 1,279 of
1,280 samples (issue 39, bench/results/thirdparty.md)."""

from __future__ import annotations

import pytest

from tests.support.instances import document, worker
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import HostSample, Poll, ProcSample
from uwsgitune.core.staffing import estimate

T0 = 1_700_000_000.0
LONG = 3  # seconds a request takes: three polls
CPU, RUNQ = 0.1, 0.8  # each busy worker's seconds a second on a CPU and waiting for one


def long_requests(
    polls: int = 10,
    busy: int = 3,
    cpu: float = CPU,
    runq: float = RUNQ,
    blocked: tuple[int, ...] | None = None,
) -> list[Frame]:
    """`busy` workers each in one 3 s request at a time, a third of them ending at each 1 s
    poll (their running time and request count grow then, as uWSGI's do), each on a CPU
    `cpu` and waiting for one `runq` seconds a second; one more worker idle, woken for
    connections the others take (the thundering herd): it waits for a CPU too. The
    schedstat and CPU counters grow every second; the host's 2 CPUs as busy as the workers
    keep them. `blocked`: at poll t, the first `blocked[t % len]` busy workers read asleep
    ("S") and the rest runnable ("R"), the idle one asleep; None: no state read."""
    tracker = Tracker("long")
    idle = 100 + busy
    out = []
    for t in range(polls):
        done = [t // LONG + (1 if k % LONG < t % LONG else 0) for k in range(busy)]
        workers = [
            worker(k + 1, 100 + k, status="busy", requests=n, running_time=n * LONG * 10**6)
            for k, n in enumerate(done)
        ]
        workers.append(worker(busy + 1, idle, status="idle"))
        asleep = blocked[t % len(blocked)] if blocked is not None else 0
        states = ["S" if k < asleep else "R" for k in range(busy)] + ["S"]
        if blocked is None:
            states = [""] * (busy + 1)
        procs = [
            ProcSample(100 + k, cpu * t, 50 << 20, 1, runq * t, state=states[k])
            for k in range(busy)
        ]
        procs.append(ProcSample(idle, 0.0, 50 << 20, 1, 0.2 * t, state=states[busy]))
        host = HostSample(
            cpu_count=2,
            effective_cpus=2.0,
            cpu_busy_seconds=min(busy * cpu, 2.0) * t,
            cpu_total_seconds=2.0 * t,
            mem_total=8 << 30,
            mem_available=4 << 30,
            procs=(ProcSample(99, 0.0, 0, 1, 0.0), *procs),
        )
        doc = parse_stats(document(99, workers))
        out.append(tracker.update(Poll("long", T0 + t, 1000.0 + t, doc=doc, host=host)))
    return out


def test_a_request_that_outlasts_the_poll_counts_its_whole_wait() -> None:
    frames = long_requests()
    for f in frames[1:]:
        assert f.runq_cores == pytest.approx(3 * RUNQ), (f.mono, f.runq_cores)


def test_the_model_reads_a_cpu_bound_pool_of_long_requests_as_cpu_bound() -> None:
    # a request: 3 s, 0.3 s of it on a CPU, 2.4 s waiting for one, 0.3 s blocked
    m = estimate(long_requests(40)[1:], per_cpu=2.0)
    assert m is not None
    assert m.cpu_ms == pytest.approx(300.0)
    assert m.runq_ms == pytest.approx(2400.0)
    assert m.io_ms == pytest.approx(300.0)
