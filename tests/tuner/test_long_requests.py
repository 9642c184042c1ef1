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


def test_cpus_used_with_no_request_served_nor_in_service_are_no_reason_to_shrink() -> None:
    """64 Django workers just forked held 2 CPUs for 15 s before any request came (the
    third-party bench, the tuner started before the load), and the tuner halved them by a
    reload on it: the CPU was not the requests', and the worker count no lever on it. A
    request in service (a long one, none finished yet) is."""
    from tests.support.frames import series

    s = TunerSettings(min_workers=2, max_workers=64)
    box = {"live": 64, "workers_max": 64, "instance_cpu_cores": 2.0, "host_cpu_pct": 100}
    box |= {"cpu_count": 2, "effective_cpus": 2.0}
    idle = series(12, rps=0, busy_ratio=0.0, **box)
    d = decide(idle, TunerState(), s, now=idle[-1].mono)
    assert d.action == "hold" and d.code != "cpu-oversubscribed", d.line()
    # long requests, none finished: after ESTIMATE_WAIT (no estimate can come)
    for load in ({"rps": 0, "busy_ratio": 1.0}, {"rps": 20, "busy_ratio": 1.0}):
        busy = series(25, **load, **box)
        d = decide(busy, TunerState(), s, now=busy[-1].mono)
        assert (d.action, d.code) == ("down", "cpu-oversubscribed"), (load, d.line())


def test_the_first_requests_on_busy_cpus_wait_for_the_estimate_not_a_halving() -> None:
    """The same Django pool, the load begun: its first 2 requests (0.2 req/s) on CPUs the
    workers held, no estimate yet (it needs `MIN_REQUESTS` in the polls it reads), and the
    tuner halved 64 -> 32 by a reload, then needed two more to reach 6 and 4 where one
    estimate gives the count. Where the estimate can come (the CPU per worker read, and the
    wait for a CPU on a contended host), it waits for it, and moves on it once the polls
    hold enough requests; where it cannot (no host data), the halving stays."""
    from dataclasses import replace

    from tests.support.frames import series
    from uwsgitune.core.staffing import MIN_REQUESTS

    s = TunerSettings(min_workers=2, max_workers=64)
    box = {"live": 64, "workers_max": 64, "host_cpu_pct": 100, "cpu_count": 2}
    box |= {"effective_cpus": 2.0, "instance_cpu_cores": 2.0}

    def polls(n: int, start: int = 0, **load: float) -> list:  # type: ignore[type-arg]
        # 64 busy workers on 2 CPUs: each request waits for a CPU most of its time
        return [replace(f, runq_cores=62.0) for f in series(n, start, **load, **box)]

    first = polls(4, rps=0.5, busy_ratio=0.05)  # 2 requests at this count
    d = decide(first, TunerState(), s, now=first[-1].mono)
    assert (d.action, d.code) == ("hold", "cpu-estimating"), d.line()
    assert f"it needs {MIN_REQUESTS}" in d.reason
    # the load comes: the polls the model reads hold enough, the move goes on its estimate
    loaded = first + polls(6, 4, rps=20.0, busy_ratio=1.0)
    d = decide(loaded, TunerState(), s, now=loaded[-1].mono)
    assert (d.action, d.code) == ("down", "cpu-oversubscribed"), d.line()
    assert "keep the CPUs busy" in d.reason and d.desired <= 4, d.line()  # not a halving
    # no CPU per worker: no estimate will come
    blind = [replace(f, instance_cpu_cores=None) for f in first]
    d = decide(blind, TunerState(), s, now=blind[-1].mono)
    assert d.code != "cpu-estimating", d.line()
    # a contended host whose wait for a CPU is not read: the model would count it as IO
    # and declines (`staffing.estimable`), so no estimate will come either
    unread = [replace(f, runq_cores=None) for f in first]
    d = decide(unread, TunerState(), s, now=unread[-1].mono)
    assert d.code != "cpu-estimating", d.line()
    # requests too long to finish: the wait ends ESTIMATE_WAIT after the first was seen
    long = polls(25, rps=0, busy_ratio=0.05)
    d = decide(long, TunerState(), s, now=long[-1].mono)
    assert (d.action, d.code) == ("down", "cpu-oversubscribed"), d.line()
    d = decide(long[:15], TunerState(), s, now=long[14].mono)
    assert (d.action, d.code) == ("hold", "cpu-estimating"), d.line()
    # a count already at the plain CPU count (3 on 2 CPUs): no move would follow, no wait
    few = [
        replace(f, runq_cores=1.0)
        for f in series(4, rps=0.5, busy_ratio=0.5, **(box | {"live": 3}))
    ]
    assert decide(few, TunerState(), s, now=few[-1].mono).code != "cpu-estimating"


def test_a_wait_for_a_cpu_not_yet_reported_still_goes_to_the_cpus_count_in_one_move() -> None:
    """schedstat reports a wait for a CPU when the task gets one: here it has reported half
    of it (0.5 s of 0.95 s a second). The remainder reads 1.4 s of IO a request and the pool
    stays far too large; with the busy workers' states read (all runnable), the move goes to
    the CPUs' count at once, as on the Django page (64 -> 12 -> 3, was 64 -> 17 -> 5 -> 4)."""
    s = TunerSettings(min_workers=2, max_workers=64)
    blind = long_requests(polls=12, busy=60, cpu=2.0 / 60, runq=0.5)
    d = decide(blind, TunerState(), s, now=blind[-1].mono)
    assert not (d.action == "down" and d.desired <= 8), d.line()
    seen = long_requests(polls=12, busy=60, cpu=2.0 / 60, runq=0.5, blocked=(0,))
    d = decide(seen, TunerState(), s, now=seen[-1].mono)
    # the CPUs' 2, without the spare: the 60 requests in the instance would keep 58 queued
    assert (d.action, d.code, d.desired) == ("down", "cpu-oversubscribed", 2), d.line()
