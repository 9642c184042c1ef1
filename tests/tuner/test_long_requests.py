"""A CPU-bound pool far too large, whose requests outlast the poll, goes to the CPUs' count
in one move (`hostview._busy_shares` and the staffing model under `decide`): 60 workers on
2 CPUs, each request 3 s of which 0.1 s on a CPU and 2.85 s waiting for one. With the
run-queue wait counted only in the poll each request ended in, the model read 1.95 s of IO
a request, wanted 82 workers, and the pool held 60 ("adding cannot help"), as the tuner
held 64 on a CPU-bound Django page for a whole run (issue 39, bench/results/thirdparty.md)."""

from __future__ import annotations

from tests.core.test_runq_share import long_requests
from uwsgitune.tuner import TunerSettings, TunerState, decide


def test_a_cpu_bound_pool_of_long_requests_goes_to_the_cpus_count() -> None:
    frames = long_requests(polls=12, busy=60, cpu=2.0 / 60, runq=0.95)
    s = TunerSettings(min_workers=2, max_workers=64)
    d = decide(frames, TunerState(), s, now=frames[-1].mono)
    assert (d.action, d.code) == ("down", "cpu-oversubscribed"), d.line()
    # 100 ms CPU and 50 ms blocked a request: 3 requests in service keep 2 CPUs busy, 5
    # with `cpu_workers_per_cpu` (1.5); the top of the estimate's range at most a step above
    assert 5 <= d.desired <= 7, d.line()
