"""Rates from counter deltas, with reset detection, from synthetic documents (no I/O)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.instances import document, error_poll, never_spawned, poll_of, worker
from uwsgitune.core.derive import Tracker, detect_reload, slot_reset
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import HostSample, ProcSample, UnixQueue


def _two(
    w1: list[dict[str, object]], w2: list[dict[str, object]], dt: float = 1.0, pid2: int = 100
):  # type: ignore[no-untyped-def]
    tracker = Tracker("s")
    first = tracker.update(poll_of(document(workers=w1), 0.0))
    second = tracker.update(poll_of(document(pid=pid2, workers=w2), dt))
    return first, second


def test_first_frame_has_no_rates() -> None:
    first, _ = _two([worker(1, 11, requests=500)], [worker(1, 11, requests=510)])
    assert first.kind == "first"
    assert first.rps is None and first.eps is None and first.mean_rt_ms is None
    assert first.littles_l is None and first.busy_ratio is None
    assert all(w.rps is None for w in first.workers)


def test_rates_from_deltas_and_littles_law() -> None:
    _, f = _two(
        [
            worker(1, 11, requests=100, running_time=1_000_000, exceptions=1, cores=2),
            worker(2, 12, requests=50, running_time=500_000, cores=2),
        ],
        [
            worker(1, 11, requests=140, running_time=1_400_000, exceptions=3, cores=2),
            worker(2, 12, requests=70, running_time=1_100_000, cores=2),
        ],
        dt=2.0,
    )
    assert f.kind == "ok"
    assert math.isclose(f.rps or 0, 30.0)  # (40 + 20) / 2 s
    assert math.isclose(f.eps or 0, 1.0)
    # true mean: Δrunning_time / Δrequests = 1.0 s / 60 requests
    assert math.isclose(f.mean_rt_ms or 0, 1000 / 60)
    assert math.isclose(f.littles_l or 0, 0.5)  # 1.0 s of service over 2 s
    assert math.isclose(f.busy_ratio or 0, 0.5 / 4)  # 2 workers x 2 threads
    assert [w.rps for w in f.workers] == [20.0, 10.0]


def test_avg_rt_is_reported_apart_from_the_mean() -> None:
    _, f = _two(
        [worker(1, 11, requests=10, running_time=10_000, avg_rt=100)],
        [worker(1, 11, requests=20, running_time=210_000, avg_rt=100)],
    )
    assert math.isclose(f.mean_rt_ms or 0, 20.0)
    assert math.isclose(f.avg_rt_ms or 0, 0.1)


def test_reload_r_resets_every_counter_and_is_not_traffic() -> None:
    before = [
        worker(1, 11, requests=900, running_time=9_000_000, respawn_count=3),
        worker(2, 12, requests=800, running_time=8_000_000),
    ]
    after = [worker(1, 21, requests=5, running_time=50_000), worker(2, 22, requests=3)]
    tracker = Tracker("s")
    tracker.update(poll_of(document(workers=before), 0))
    f = tracker.update(poll_of(document(workers=after), 1))
    assert f.kind == "reload" and f.reloads_seen == 1
    assert f.rps is None and f.eps is None and f.mean_rt_ms is None
    g = tracker.update(
        poll_of(
            document(
                workers=[
                    worker(1, 21, requests=15, running_time=150_000),
                    worker(2, 22, requests=3),
                ]
            ),
            2,
        )
    )
    assert g.kind == "ok" and g.rps == 10.0
    assert g.reloads_seen == 1


def test_reload_of_an_idle_instance_is_seen_by_pids_and_respawn_count() -> None:
    _, f = _two([worker(1, 11), worker(2, 12)], [worker(1, 21), worker(2, 22)])
    assert f.kind == "reload"


def test_reload_with_more_traffic_after_than_before_is_still_a_reload() -> None:
    _, f = _two(
        [worker(1, 11, requests=3, running_time=3000, respawn_count=2), worker(2, 12, requests=2)],
        [worker(1, 21, requests=400, running_time=400_000), worker(2, 22, requests=500)],
    )
    assert f.kind == "reload" and f.rps is None


def test_worker_respawn_w_is_not_a_reset() -> None:
    before = [worker(1, 11, requests=100, running_time=100_000), worker(2, 12, requests=90)]
    after = [
        worker(1, 31, requests=100, running_time=100_000, respawn_count=2),
        worker(2, 32, requests=95, respawn_count=2),
    ]
    assert not any(
        slot_reset(p, c)
        for p, c in zip(
            parse_stats(document(workers=before)).workers,
            parse_stats(document(workers=after)).workers,
            strict=True,
        )
    )
    _, f = _two(before, after)
    assert f.kind == "ok"
    assert f.rps == 5.0  # counters survive the respawn: only the real 5 requests count
    assert f.respawns_delta == 2 and f.respawns_total == 2


def test_cheap_and_uncheap_keep_counters() -> None:
    base = [worker(1, 11, requests=10), worker(2, 12, requests=20)]
    cheaped = [worker(1, 11, requests=10), worker(2, 12, requests=20, status="cheap")]
    uncheaped = [worker(1, 11, requests=12), worker(2, 42, requests=21, respawn_count=2)]
    tracker = Tracker("s")
    tracker.update(poll_of(document(workers=base), 0))
    f1 = tracker.update(poll_of(document(workers=cheaped), 1))
    f2 = tracker.update(poll_of(document(workers=uncheaped), 2))
    assert (f1.kind, f1.live, f1.cheap, f1.rps) == ("ok", 1, 1, 0.0)
    assert (f2.kind, f2.live, f2.rps) == ("ok", 2, 3.0)


def test_never_spawned_slots() -> None:
    _, f = _two(
        [worker(1, 11, requests=4), never_spawned(), never_spawned()],
        [worker(1, 11, requests=8), worker(2, 13), never_spawned()],
    )
    assert f.kind == "ok" and f.rps == 4.0
    assert (f.workers_max, f.live, f.cheap) == (3, 2, 1)


def test_restart_with_new_master_pid() -> None:
    _, f = _two([worker(1, 11, requests=100)], [worker(1, 51, requests=1)], pid2=200)
    assert f.kind == "restart" and f.rps is None and f.master_pid == 200


def test_processes_changed_is_a_reload() -> None:
    prev = parse_stats(document(workers=[worker(1, 11, requests=5)]))
    cur = parse_stats(document(workers=[worker(1, 11, requests=5), worker(2, 12)]))
    assert detect_reload(prev, cur)


def test_lone_slot_reset_counts_a_lower_bound_not_a_negative() -> None:
    _, f = _two(
        [worker(1, 11, requests=100), worker(2, 12, requests=100), worker(3, 13, requests=100)],
        [worker(1, 11, requests=110), worker(2, 12, requests=110), worker(3, 13, requests=4)],
    )
    assert f.kind == "ok"
    assert f.rps == 24.0  # 10 + 10 + 4 (the reset slot's new value)


def test_zero_or_negative_dt_gives_no_rates() -> None:
    tracker = Tracker("s")
    tracker.update(poll_of(document(workers=[worker(1, 11, requests=1)]), 5.0))
    f = tracker.update(poll_of(document(workers=[worker(1, 11, requests=9)]), 5.0))
    assert f.rps is None


def test_errors_keep_disconnected_since_and_recover() -> None:
    tracker = Tracker("s")
    tracker.update(poll_of(document(workers=[worker(1, 11, requests=1)]), 0))
    e1 = tracker.update(error_poll(1))
    e2 = tracker.update(error_poll(3))
    assert e1.kind == e2.kind == "error"
    assert e1.disconnected_since == e2.disconnected_since == 1_800_000_001.0
    assert e2.rps is None and e2.master_pid == 100  # the last known instance, marked stale
    back = tracker.update(poll_of(document(workers=[worker(1, 11, requests=41)]), 4))
    assert back.kind == "ok" and back.disconnected_since is None
    assert back.rps == 10.0  # averaged over the whole gap, never a spike


def test_restart_during_an_outage_is_a_restart() -> None:
    tracker = Tracker("s")
    tracker.update(poll_of(document(workers=[worker(1, 11, requests=100)]), 0))
    tracker.update(error_poll(1))
    back = tracker.update(poll_of(document(pid=300, workers=[worker(1, 31, requests=1)]), 5))
    assert back.kind == "restart" and back.rps is None


def test_host_cpu_memory_and_unix_queues() -> None:
    def host(
        cpu: float,
        busy: float,
        overflows: int,
        proc_cpu: float,
        nice: int = 0,
        user: float | None = None,
    ) -> HostSample:
        return HostSample(
            cpu_count=4,
            effective_cpus=1.5,
            cpu_busy_seconds=busy,
            cpu_total_seconds=cpu,
            mem_total=8 << 30,
            mem_available=4 << 30,
            cgroup_mem_max=2 << 30,
            cgroup_mem_current=1 << 30,
            somaxconn=4096,
            listen_overflows=overflows,
            listen_drops=overflows,
            procs=(
                ProcSample(100, 1.0, 10 << 20, nice=nice),
                ProcSample(11, proc_cpu, 30 << 20, nice=nice, user_seconds=user),
            ),
            unix_queues=(UnixQueue("/run/app.sock", 5, 4),),
        )

    sockets = [{"name": "/run/app.sock", "proto": "uwsgi", "queue": 0, "max_queue": 0}]
    tracker = Tracker("s")
    tracker.update(
        poll_of(document(workers=[worker(1, 11)], sockets=sockets), 0, host=host(100, 10, 7, 2.0))
    )
    f = tracker.update(
        poll_of(document(workers=[worker(1, 11)], sockets=sockets), 1, host=host(104, 12, 19, 2.5))
    )
    assert math.isclose(f.host_cpu_pct or 0, 50.0)
    assert math.isclose(f.instance_cpu_cores or 0, 0.5) and f.instance_niced_cores == 0.0
    assert f.effective_cpus == 1.5 and math.isclose(f.cpu_saturation or 0, 0.5 / 1.5)
    assert f.listen_overflows_delta == 12
    assert f.mem_source == "psutil" and f.mem_total_rss == 30 << 20
    assert f.mem_available == 1 << 30 and f.mem_limit == 2 << 30
    (sock,) = f.sockets
    assert (sock.unix, sock.queue, sock.backlog, sock.source, sock.full) == (
        True,
        5,
        4,
        "kernel",
        True,
    )
    assert f.queue_full
    # the same instance at nice 10: its CPU is counted as niced (core/frame.py)
    niced = Tracker("s")
    for t, args in ((0, (100, 10, 7, 2.0)), (1, (104, 12, 19, 2.5))):
        doc = document(workers=[worker(1, 11)], sockets=sockets)
        g = niced.update(poll_of(doc, t, host=host(*args, nice=10)))
    assert math.isclose(g.instance_niced_cores or 0, 0.5)
    # ... its user time, when read apart: the kernel counts a niced process's system time as
    # system, so that part is not in the host's niced CPU
    user = Tracker("s")
    for t, args in ((0, (100, 10, 7, 2.0, 10, 1.5)), (1, (104, 12, 19, 2.5, 10, 1.8))):
        doc = document(workers=[worker(1, 11)], sockets=sockets)
        g = user.update(poll_of(doc, t, host=host(*args)))
    assert math.isclose(g.instance_cpu_cores or 0, 0.5)
    assert math.isclose(g.instance_niced_cores or 0, 0.3)


def test_memory_report_wins_over_psutil() -> None:
    w = worker(1, 11) | {"rss": 50 << 20}
    frame = Tracker("s").update(
        poll_of(document(workers=[w, worker(2, 12) | {"rss": 30 << 20}]), 0)
    )
    assert frame.memory_report
    assert frame.workers[0].rss == 50 << 20


# --- property: whatever the counters do, rates are never negative and never spike ----------

_event = st.sampled_from(["traffic", "traffic", "traffic", "w", "r", "restart", "cheap", "error"])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_event, st.integers(0, 500), st.floats(0.05, 5.0)), min_size=2, max_size=25)
)
def test_rates_never_negative_never_spike(events: list[tuple[str, int, float]]) -> None:
    pid, t, counts, pids, respawns, status = 100, 0.0, [0, 0], [11, 12], [1, 1], ["idle", "idle"]
    next_pid = 1000
    tracker = Tracker("s")
    for event, n, dt in events:
        t += dt
        if event == "error":
            frame = tracker.update(error_poll(t))
            assert frame.rps is None
            continue
        if event == "traffic":
            counts = [counts[0] + n, counts[1] + n // 2]
        elif event == "w":
            pids = [next_pid, next_pid + 1]
            next_pid += 2
            respawns = [r + 1 for r in respawns]
        elif event in ("r", "restart"):
            counts, respawns = [n % 7, 0], [1, 1]
            pids = [next_pid, next_pid + 1]
            next_pid += 2
            if event == "restart":
                pid += 1
        elif event == "cheap":
            status = ["idle", "cheap" if status[1] == "idle" else "idle"]
            if status[1] == "idle":
                pids[1], respawns[1] = next_pid, respawns[1] + 1
                next_pid += 1
        workers = [
            worker(
                i + 1,
                pids[i],
                requests=counts[i],
                running_time=counts[i] * 1000,
                respawn_count=respawns[i],
                status=status[i],
            )
            for i in range(2)
        ]
        frame = tracker.update(poll_of(document(pid=pid, workers=workers), t))
        if frame.rps is not None:
            assert frame.kind == "ok"
            assert frame.rps >= 0 and frame.eps is not None and frame.eps >= 0
            assert frame.dt is not None
            # never more than the counters themselves show: no spike is possible
            assert frame.rps * frame.dt <= sum(counts) + 1e-6
            assert (frame.littles_l or 0) >= 0 and (frame.mean_rt_ms or 0) >= 0
            assert all((w.rps or 0) >= 0 for w in frame.workers)
        else:
            assert frame.kind != "ok" or frame.dt is None


def test_each_process_gil_is_busy_for_its_threads_cpu_and_run_queue_wait() -> None:
    def host(total: float, p11: tuple[float, float], p12: tuple[float, float]) -> HostSample:
        return HostSample(
            cpu_count=2,
            effective_cpus=2.0,
            cpu_busy_seconds=total / 2,
            cpu_total_seconds=total,
            mem_total=8 << 30,
            mem_available=4 << 30,
            procs=(
                ProcSample(100, 1.0, 1, 2, 0.0),
                ProcSample(11, p11[0], 1, 4, p11[1]),
                ProcSample(12, p12[0], 1, 4, p12[1]),
            ),
        )

    workers = [worker(1, 11, cores=4), worker(2, 12, cores=4)]
    tracker = Tracker("s")
    tracker.update(poll_of(document(workers=workers), 0, host=host(100, (1, 1), (1, 1))))
    # over 2 s: worker 11 ran 0.5 s and its threads waited 3 s for a CPU (its GIL never
    # idle); worker 12 ran 0.2 s and waited 0.2 s (busy a fifth of the time)
    f = tracker.update(poll_of(document(workers=workers), 2, host=host(104, (1.5, 4), (1.2, 1.2))))
    assert f.threads == 4
    assert f.gil_busy is not None and math.isclose(f.gil_busy, (1.0 + 0.2) / 2)
    single = Tracker("s")
    one = [worker(1, 11), worker(2, 12)]
    single.update(poll_of(document(workers=one), 0, host=host(100, (1, 1), (1, 1))))
    g = single.update(poll_of(document(workers=one), 2, host=host(104, (1.5, 4), (1.2, 1.2))))
    assert g.gil_busy is None and g.runq_cores is not None
